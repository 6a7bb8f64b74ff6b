//! `qkv train --data train.bin` as a researcher runs it on data nanoGPT's `prepare.py` wrote:
//! uint16 token ids, `val.bin` beside `train.bin`; then `qkv sample` writes its sample as ids.

use std::process::{Command, Output};

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

#[test]
fn a_run_trains_on_nanogpt_token_files_and_samples_token_ids() {
    let dir = std::env::temp_dir().join(format!("qkv-token-files-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A repeating sequence of 30 ids: learnable, and each split has ids of its own.
    let ids = |count: usize| (0..count).flat_map(|i| ((i * 11 % 30) as u16).to_le_bytes()).collect::<Vec<u8>>();
    std::fs::write(dir.join("train.bin"), ids(3000)).unwrap();
    std::fs::write(dir.join("val.bin"), ids(600)).unwrap();
    let data = dir.join("train.bin").display().to_string();
    let out = dir.join("run").display().to_string();

    let trained = qkv(&["train", "--preset", "classroom", "--data", &data, "--steps", "3", "--batch", "2", "--out", &out]);
    assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/summary.json")).unwrap()).unwrap();
    let loss = summary["final_train_loss"].as_f64().expect("a loss");
    assert!(loss.is_finite() && loss < (30f64).ln() + 1.0, "{summary}");

    let checkpoint = dir.join("run/checkpoint.qkv").display().to_string();
    let sampled = qkv(&["sample", "--checkpoint", &checkpoint, "--prompt", "0 11 22", "--tokens", "5"]);
    let text = String::from_utf8_lossy(&sampled.stdout);
    assert!(sampled.status.success(), "{}", String::from_utf8_lossy(&sampled.stderr));
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(words.len() >= 3 + 5 && words.iter().all(|w| w.parse::<u16>().is_ok_and(|id| id < 30)), "{text}");

    let refused = qkv(&["sample", "--checkpoint", &checkpoint, "--prompt", "to be"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("token id"), "{}", String::from_utf8_lossy(&refused.stderr));
    std::fs::remove_dir_all(&dir).ok();
}
