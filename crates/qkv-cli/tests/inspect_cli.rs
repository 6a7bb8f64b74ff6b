//! `qkv inspect` as a reader runs it: a checkpoint from `qkv train` and one from `qkv import`
//! show their model, the same exact counts `qkv params` gives, and diagnostics for every layer;
//! a damaged file is refused with the error the other commands give.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::process::{Command, Output};

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

fn succeeded(output: &Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn a_trained_and_an_imported_checkpoint_show_their_counts_and_diagnostics() {
    let dir = std::env::temp_dir().join(format!("qkv-inspect-cli-{}", std::process::id()));
    let out = dir.display().to_string();
    succeeded(&qkv(&["train", "--preset", "classroom", "--variant", "wq-identity", "--steps", "2", "--batch", "2", "--out", &out]));
    let trained = dir.join("checkpoint.qkv").display().to_string();

    let json: serde_json::Value = serde_json::from_str(&succeeded(&qkv(&["inspect", "--checkpoint", &trained, "--json"]))).unwrap();
    let params: serde_json::Value =
        serde_json::from_str(&succeeded(&qkv(&["params", "--preset", "classroom", "--variant", "wq-identity", "--json"]))).unwrap();
    // The preset's vocabulary is nanoGPT's Shakespeare's; the run's is the embedded text's, so
    // the embeddings differ and the rest does not.
    for field in ["attention_params", "kv_cache_bytes_per_token"] {
        assert_eq!(json[field], params[field], "{field}: {json}");
    }
    let beside_tokens = |counts: &serde_json::Value| {
        let tokens = counts["components"].as_array().unwrap().iter().find(|c| c["name"] == "token embedding").unwrap();
        counts["total_params"].as_u64().unwrap() - tokens["params"].as_u64().unwrap()
    };
    assert_eq!(beside_tokens(&json), beside_tokens(&params), "{json}");
    let components: u64 = json["components"].as_array().unwrap().iter().map(|c| c["params"].as_u64().unwrap()).sum();
    assert_eq!(json["total_params"].as_u64(), Some(components), "the components add up to the total");
    assert_eq!(json["variant"], "wq-identity");
    assert_eq!(json["step"], 2);
    let layers = json["diagnostics"]["layers"].as_array().unwrap();
    assert_eq!(layers.len(), json["model"]["n_layer"].as_u64().unwrap() as usize, "a layer's diagnostics each: {json}");
    assert_eq!(layers[0]["symmetry"].as_array().unwrap().len(), json["model"]["n_head"].as_u64().unwrap() as usize);
    assert!(layers[0]["query_key_cosine"].is_null(), "W_Q = I has no W_Q to compare: {json}");

    let text = succeeded(&qkv(&["inspect", "--checkpoint", &trained]));
    assert!(text.contains("wq-identity (Q=I") && text.contains("layer 1:"), "{text}");
    let shorter = succeeded(&qkv(&["inspect", "--checkpoint", &trained, "--text", "ROMEO:"]));
    assert!(shorter.contains("diagnostics on 6 tokens"), "{shorter}");

    // A model that came from PyTorch's layout, as a reader checks one.
    let imported = dir.join("imported.qkv").display().to_string();
    let standard = dir.join("standard");
    succeeded(&qkv(&["train", "--preset", "classroom", "--steps", "1", "--batch", "2", "--out", &standard.display().to_string()]));
    let standard_weights = dir.join("standard.safetensors").display().to_string();
    let standard_checkpoint = standard.join("checkpoint.qkv").display().to_string();
    succeeded(&qkv(&["export", "--checkpoint", &standard_checkpoint, "--layout", "huggingface", "--out", &standard_weights]));
    succeeded(&qkv(&["import", &standard_weights, "--preset", "classroom", "--out", &imported]));
    let json: serde_json::Value = serde_json::from_str(&succeeded(&qkv(&["inspect", "--checkpoint", &imported, "--json"]))).unwrap();
    assert_eq!(json["variant"], "standard", "{json}");
    assert!(json["diagnostics"]["layers"][0]["query_key_cosine"].is_number(), "{json}");

    std::fs::write(dir.join("broken.qkv"), b"not a checkpoint").unwrap();
    let refused = qkv(&["inspect", "--checkpoint", &dir.join("broken.qkv").display().to_string()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("broken.qkv"), "{}", String::from_utf8_lossy(&refused.stderr));
    let unreadable = qkv(&["inspect", "--checkpoint", &trained, "--text", "\u{1F600}"]);
    assert_eq!(unreadable.status.code(), Some(2), "a text the tokenizer cannot read is the command line's");
    assert!(String::from_utf8_lossy(&unreadable.stderr).contains("--text"), "{}", String::from_utf8_lossy(&unreadable.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_model_s_shape_is_set_on_the_command_line_as_in_the_app() {
    // Lesson 3's setting: one layer of one head reading a list of four as an encoder.
    let dir = std::env::temp_dir().join(format!("qkv-shape-cli-{}", std::process::id()));
    let out = dir.display().to_string();
    let data = "synthetic:rotate:4:encoder";
    succeeded(&qkv(&[
        "train",
        "--preset",
        "classroom",
        "--data",
        data,
        "--layers",
        "1",
        "--heads",
        "1",
        "--steps",
        "1",
        "--batch",
        "2",
        "--out",
        &out,
    ]));
    let checkpoint = dir.join("checkpoint.qkv").display().to_string();
    let json: serde_json::Value = serde_json::from_str(&succeeded(&qkv(&["inspect", "--checkpoint", &checkpoint, "--json"]))).unwrap();
    assert_eq!((json["model"]["n_layer"].as_u64(), json["model"]["n_head"].as_u64()), (Some(1), Some(1)), "{json}");
    assert_eq!(json["model"]["attention"]["bidirectional"], true, "{json}");
    assert_eq!(json["diagnostics"]["layers"].as_array().map(Vec::len), Some(1), "{json}");

    let refused = qkv(&["train", "--preset", "classroom", "--heads", "5", "--steps", "1", "--out", &out]);
    assert_eq!(refused.status.code(), Some(2), "heads that do not divide the width: {}", String::from_utf8_lossy(&refused.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

/// `qkv compare --lesson 3` trains the app's lesson 3 headless and its summary.json holds the
/// lesson's contrast: Q-K-V and (Q=K-V)+rel get every digit, Q=K-V stalls near 55% with logits
/// that are symmetric as the softmax sees them.
#[test]
fn compare_lesson_3_reproduces_the_lesson_s_contrast() {
    let dir = std::env::temp_dir().join(format!("qkv-lesson-cli-{}", std::process::id()));
    let out = dir.display().to_string();
    succeeded(&qkv(&["compare", "--lesson", "3", "--out", &out]));
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let run = |name: &str| {
        summary.as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name} in {summary}")).clone()
    };
    let accuracy = |name: &str| run(name)["accuracy"].as_f64().unwrap();
    let symmetry = |name: &str| {
        let layer = &run(name)["diagnostics"]["layers"][0];
        assert_eq!(layer["symmetry_measure"], "visible-logits", "an encoder's measure: {layer}");
        layer["symmetry"][0].as_f64().unwrap()
    };
    assert!(accuracy("standard") >= 0.99 && accuracy("shared-qk-rel") >= 0.99, "{summary}");
    assert!((0.50..=0.60).contains(&accuracy("shared-qk")), "Q=K-V stalls near 55%: {summary}");
    assert!((symmetry("shared-qk") - 1.0).abs() < 1e-6, "{summary}");
    assert!(symmetry("shared-qk-rel") < 0.9, "{summary}");

    let refused = qkv(&["compare", "--lesson", "3", "--preset", "classroom", "--out", &out]);
    assert_eq!(refused.status.code(), Some(2), "the lesson sets the preset");
    let missing = qkv(&["compare", "--lesson", "6", "--out", &out]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("numbered 1 to 5"));
    std::fs::remove_dir_all(&dir).ok();
}
