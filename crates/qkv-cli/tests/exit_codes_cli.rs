//! What `qkv`'s exit code says, so that a script can tell a typo from a failed run: 0 done, 2 a
//! command line or setting that cannot be (clap's own usage errors, the CLI's checks, a model
//! that fails validation), 1 a run that failed.

use std::process::{Command, Output};

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

#[test]
fn usage_errors_exit_2_and_failed_runs_exit_1() {
    let out = std::env::temp_dir().join(format!("qkv-exit-codes-{}", std::process::id()));
    let out = out.to_str().unwrap();
    let missing = std::env::temp_dir().join("qkv-exit-codes-no-such-file.txt");
    let missing = missing.to_str().unwrap();
    let unwritable = "/proc/qkv-exit-codes/runs";
    let cases: [(&[&str], i32, &str); 7] = [
        // clap's: an unknown flag, an unknown preset.
        (&["train", "--preset", "classroom", "--frobnicate"], 2, "--frobnicate"),
        (&["train", "--preset", "gpt5"], 2, "unknown preset"),
        // The CLI's own checks, and a model that fails validation.
        (&["params", "--preset", "classroom", "--context", "0"], 2, "--context 0"),
        (&["train", "--preset", "classroom", "--kv-heads", "3", "--steps", "1", "--out", out], 2, "divisor"),
        // Runs that fail: data that is not there, a checkpoint that is not one.
        (&["train", "--preset", "classroom", "--data", missing, "--steps", "1", "--out", out], 1, "qkv-exit-codes-no-such-file"),
        (&["sample", "--checkpoint", missing], 1, "qkv-exit-codes-no-such-file"),
        // An error and its cause, each said once.
        (
            &["train", "--preset", "classroom", "--steps", "1", "--out", unwritable],
            1,
            "cannot create /proc/qkv-exit-codes/runs\n  caused by: ",
        ),
    ];
    for (args, code, expected) in cases {
        let output = qkv(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.matches("error: ").count(), 1, "{args:?}: said once: {stderr}");
    }
    std::fs::remove_dir_all(out).ok();
}

/// A matrix product `QKV_PRODUCT` does not name is a setting that cannot be: 2, with the fix,
/// before any work.
#[test]
fn an_unknown_product_in_the_environment_exits_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_qkv"))
        .args(["params", "--preset", "classroom"])
        .env("QKV_PRODUCT", "fastest")
        .output()
        .expect("qkv runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("error: QKV_PRODUCT=\"fastest\"") && stderr.contains("burn or blocked"), "{stderr}");
    assert!(output.stdout.is_empty(), "no work done: {}", String::from_utf8_lossy(&output.stdout));
}

/// A batch wider than a GPU's launch grid (65,535 workgroups along an axis; tiled attention
/// gives the batch one) is a setting that cannot be: 2, with what to lower, before the model is
/// allocated, where the launch itself would stop the program mid-step. On wgpu (lavapipe here).
#[test]
fn a_batch_wider_than_a_gpus_grid_exits_2_before_training() {
    let out = std::env::temp_dir().join(format!("qkv-exit-codes-grid-{}", std::process::id()));
    let args = ["train", "--preset", "classroom", "--backend", "wgpu", "--batch", "70000", "--context", "2", "--steps", "1"];
    let output = qkv(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let expected = "needs 70000 workgroups along one axis, more than a GPU takes (65535): lower the batch";
    assert!(stderr.contains(expected) && !stderr.contains("panicked"), "{stderr}");
    // Counted by its own words: Mesa's driver may print an `error: ` line of its own.
    assert_eq!(stderr.matches("lower the batch").count(), 1, "said once: {stderr}");
    std::fs::remove_dir_all(out).ok();
}
