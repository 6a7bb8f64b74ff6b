//! `qkv export` and `qkv import` as a user runs them: a trained checkpoint becomes a safetensors
//! file that PyTorch code reads by nanoGPT's names, and comes back as a checkpoint that samples
//! exactly as the original; damaged files are refused with their reason.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::process::{Command, Output};

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

/// The JSON header of a safetensors file: its length as 8 little-endian bytes, then the JSON.
fn header(bytes: &[u8]) -> serde_json::Value {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[8..8 + len]).expect("a JSON header")
}

#[test]
fn a_trained_checkpoint_exports_with_nanogpt_names_and_its_config() {
    let dir = std::env::temp_dir().join(format!("qkv-export-cli-{}", std::process::id()));
    let out = dir.display().to_string();
    let trained = qkv(&["train", "--preset", "classroom", "--data", "synthetic:copy:4", "--steps", "1", "--batch", "2", "--out", &out]);
    assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));

    let checkpoint = dir.join("checkpoint.qkv").display().to_string();
    let exported = qkv(&["export", "--checkpoint", &checkpoint]);
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    let bytes = std::fs::read(dir.join("checkpoint.safetensors")).expect("written next to the checkpoint");
    let header = header(&bytes);
    assert!(header["transformer.wte.weight"]["shape"].is_array(), "{header}");
    assert!(header["transformer.h.0.attn.c_proj.weight"].is_object(), "{header}");
    let config: serde_json::Value = serde_json::from_str(header["__metadata__"]["config"].as_str().unwrap()).unwrap();
    assert_eq!(config["n_layer"], 2, "{config}");
    let gpt2: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(gpt2["n_head"], config["n_head"], "{gpt2}");

    std::fs::write(dir.join("broken.qkv"), b"not a checkpoint").unwrap();
    let refused = qkv(&["export", "--checkpoint", &dir.join("broken.qkv").display().to_string()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("broken.qkv"), "{}", String::from_utf8_lossy(&refused.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_exported_model_imports_and_samples_exactly_as_the_original() {
    let dir = std::env::temp_dir().join(format!("qkv-import-cli-{}", std::process::id()));
    let out = dir.display().to_string();
    let trained = qkv(&["train", "--preset", "classroom", "--steps", "2", "--batch", "2", "--out", &out]);
    assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));
    let original = dir.join("checkpoint.qkv").display().to_string();
    let sample = |checkpoint: &str| {
        let sampled = qkv(&["sample", "--checkpoint", checkpoint, "--prompt", "ROMEO:", "--tokens", "40", "--seed", "7"]);
        assert!(sampled.status.success(), "{}", String::from_utf8_lossy(&sampled.stderr));
        String::from_utf8(sampled.stdout).unwrap()
    };
    let expected = sample(&original);

    for layout in ["nanogpt", "huggingface"] {
        let weights = dir.join(format!("{layout}.safetensors")).display().to_string();
        let exported = qkv(&["export", "--checkpoint", &original, "--layout", layout, "--out", &weights]);
        assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
        let imported = dir.join(format!("{layout}.qkv")).display().to_string();
        let done = qkv(&["import", &weights, "--preset", "classroom", "--out", &imported]);
        assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
        assert!(String::from_utf8_lossy(&done.stdout).contains("standard (2 layers"), "{}", String::from_utf8_lossy(&done.stdout));
        assert_eq!(sample(&imported), expected, "{layout}");
    }

    std::fs::write(dir.join("notes.safetensors"), b"plain words").unwrap();
    let refused = qkv(&["import", &dir.join("notes.safetensors").display().to_string()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a safetensors file"), "{}", String::from_utf8_lossy(&refused.stderr));
    std::fs::remove_dir_all(&dir).ok();
}
