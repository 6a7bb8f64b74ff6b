//! `qkv train` stopped by Ctrl-C or SIGTERM keeps what it trained: the step in flight finishes,
//! the checkpoint, metrics and summary are written, and the exit code says which signal (130,
//! 143), as a shell reports a process the signal ended.
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn train_until_signalled(signal: &str, out: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_qkv"))
        .args(["train", "--preset", "classroom", "--steps", "100000", "--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qkv starts");
    // The first evaluation (step 50) writes the run so far; signal once it has.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !out.join("checkpoint.qkv").exists() {
        assert!(Instant::now() < deadline, "no checkpoint within 300 s");
        assert!(child.try_wait().unwrap().is_none(), "qkv ended before the signal");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_signal_keeps_the_run_so_far_and_exits_130_or_143() {
    for (signal, code, name) in [("-INT", 130, "Ctrl-C"), ("-TERM", 143, "SIGTERM")] {
        let out = std::env::temp_dir().join(format!("qkv-interrupt-{}-{}", std::process::id(), &signal[1..]));
        std::fs::remove_dir_all(&out).ok();
        let (status, stderr) = train_until_signalled(signal, &out);
        assert_eq!(status, Some(code), "{signal}: {stderr}");
        let said = stderr.lines().find(|l| l.starts_with("qkv: stopped by")).unwrap_or_else(|| panic!("{signal}: {stderr}"));
        assert!(said.contains(name) && said.contains(&out.display().to_string()), "{said}");
        let step: usize = said.split("after step ").nth(1).and_then(|s| s.split(';').next()).and_then(|s| s.parse().ok()).unwrap();
        assert!(step >= 50, "{said}");
        // Every step done is in the metrics, and the checkpoint continues: it samples.
        let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
        let last = metrics.lines().filter_map(|l| l.split(',').nth(2)?.parse::<usize>().ok()).max();
        assert_eq!(last, Some(step), "the metrics end at another step than the one said");
        assert!(out.join("summary.json").exists());
        let sampled = Command::new(env!("CARGO_BIN_EXE_qkv"))
            .args(["sample", "--checkpoint", out.join("checkpoint.qkv").to_str().unwrap(), "--tokens", "5"])
            .output()
            .unwrap();
        assert!(sampled.status.success(), "{}", String::from_utf8_lossy(&sampled.stderr));
        std::fs::remove_dir_all(&out).ok();
    }
}
