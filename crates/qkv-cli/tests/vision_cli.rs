//! `qkv train --preset vision-digits --data digits` as a user runs it: a ViT on the embedded
//! digits, its validation and test accuracy printed and in summary.json; and what a mismatch of
//! model and data says.

use std::process::{Command, Output};

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_vit_trains_on_the_digits_and_reports_its_validation_and_test_accuracy() {
    let dir = std::env::temp_dir().join(format!("qkv-vision-cli-{}", std::process::id()));
    let out = dir.join("run").display().to_string();
    let trained =
        qkv(&["train", "--preset", "vision-digits", "--data", "digits", "--variant", "wq-identity", "--steps", "40", "--out", &out]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    let said = String::from_utf8_lossy(&trained.stdout);
    assert!(said.contains("images in") && said.contains("validation accuracy") && said.contains("test accuracy"), "{said}");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/summary.json")).unwrap()).unwrap();
    // 40 steps: above chance (10%), far from done, on the validation images and the test ones.
    for figure in ["accuracy", "test_accuracy"] {
        let accuracy = summary[figure].as_f64().expect("an accuracy");
        assert!((0.2..=1.0).contains(&accuracy), "{figure}: {summary}");
    }
    assert!(summary["test_loss"].as_f64().is_some_and(f64::is_finite), "{summary}");
    assert_eq!(summary["steps"], 40);

    // A ViT has no text to continue.
    let checkpoint = dir.join("run/checkpoint.qkv").display().to_string();
    let sampled = qkv(&["sample", "--checkpoint", &checkpoint]);
    assert_eq!(sampled.status.code(), Some(2), "a command that cannot be");
    assert!(stderr(&sampled).contains("holds a vision transformer") && stderr(&sampled).contains("summary.json"), "{}", stderr(&sampled));
    // Nor a GPT-2 layout to be exported in.
    let exported = qkv(&["export", "--checkpoint", &checkpoint]);
    assert_eq!(exported.status.code(), Some(2), "a command that cannot be");
    assert!(stderr(&exported).contains("writes GPTs only"), "{}", stderr(&exported));
    assert!(!dir.join("run/checkpoint.safetensors").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn model_and_data_that_do_not_go_together_say_how_to_fix_it() {
    let out = std::env::temp_dir().join(format!("qkv-vision-cli-mismatch-{}", std::process::id())).display().to_string();
    let text_to_vit = qkv(&["train", "--preset", "vision-digits", "--steps", "1", "--out", &out]);
    assert_eq!(text_to_vit.status.code(), Some(1));
    assert!(stderr(&text_to_vit).contains("--data digits"), "{}", stderr(&text_to_vit));
    let images_to_gpt = qkv(&["train", "--preset", "classroom", "--data", "digits", "--steps", "1", "--out", &out]);
    assert_eq!(images_to_gpt.status.code(), Some(1));
    assert!(stderr(&images_to_gpt).contains("--preset vision-digits"), "{}", stderr(&images_to_gpt));
    std::fs::remove_dir_all(&out).ok();
}

/// MNIST's files as a user unpacks them, here 4×6 images: the preset takes their size.
#[test]
fn a_vit_trains_on_idx_files_of_another_size() {
    let dir = std::env::temp_dir().join(format!("qkv-vision-cli-idx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let idx = |magic: u32, sizes: &[u32], data: Vec<u8>| {
        let mut bytes = magic.to_be_bytes().to_vec();
        sizes.iter().for_each(|s| bytes.extend(s.to_be_bytes()));
        bytes.extend(data);
        bytes
    };
    for (prefix, count) in [("train", 40u32), ("t10k", 10)] {
        // Label l: a bright column at l % 6.
        let labels: Vec<u8> = (0..count).map(|i| (i % 6) as u8).collect();
        let pixels: Vec<u8> = labels.iter().flat_map(|&l| (0..24).map(move |p| if p % 6 == l as usize { 255 } else { 0 })).collect();
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), idx(0x803, &[count, 4, 6], pixels)).unwrap();
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), idx(0x801, &[count], labels)).unwrap();
    }
    let data = format!("mnist:{}", dir.display());
    let out = dir.join("run").display().to_string();
    let trained = qkv(&["train", "--preset", "vision-digits", "--data", &data, "--steps", "3", "--batch", "8", "--out", &out]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/summary.json")).unwrap()).unwrap();
    assert!(summary["accuracy"].as_f64().is_some(), "{summary}");

    std::fs::remove_file(dir.join("t10k-labels-idx1-ubyte")).unwrap();
    let missing = qkv(&["train", "--preset", "vision-digits", "--data", &data, "--steps", "1", "--out", &out]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("t10k-labels-idx1-ubyte") && stderr(&missing).contains("unpacked"), "{}", stderr(&missing));
    std::fs::remove_dir_all(&dir).ok();
}

/// `qkv bench` on a ViT: training throughput on the digits, and no generation figure (a ViT does
/// not continue a text), rather than an error or a made-up one.
#[test]
fn a_vit_is_benchmarked_on_the_digits_without_a_generation_figure() {
    let output = qkv(&["bench", "--preset", "vision-digits", "--steps", "1", "--rounds", "1", "--warmup", "1", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    assert_eq!(report["block"], 17, "16 patches and the class token: {report}");
    for row in report["rows"].as_array().unwrap() {
        assert!(row["train_tokens_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["generate_tokens_per_sec"].is_null(), "{row}");
    }
}
