//! `qkv train` stopped by Ctrl-C or SIGTERM keeps what it trained: the step in flight finishes,
//! the checkpoint, metrics and summary are written, and the exit code says which signal (130,
//! 143), as a shell reports a process the signal ended. `qkv resume` then trains on to the very
//! losses of a run that was never stopped, dropout included.
#![cfg(unix)]
#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn qkv(args: &[&str], out: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qkv"));
    command.args(args).args(["--out", out.to_str().unwrap()]);
    command
}

/// Runs `args` into `out` and sends `signal` once the first evaluation wrote the run so far
/// (`first_file`); the exit code and what it said.
fn until_signalled(args: &[&str], first_file: &str, signal: &str, out: &Path) -> (Option<i32>, String) {
    let mut child = qkv(args, out).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("qkv starts");
    // The first evaluation (step 50) writes the run so far; signal once it has.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !out.join(first_file).exists() {
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
        let train = ["train", "--preset", "classroom", "--steps", "100000"];
        let (status, stderr) = until_signalled(&train, "checkpoint.qkv", signal, &out);
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

/// (run, step) → training loss, from a folder's metrics.csv.
fn losses(out: &Path) -> Vec<(String, String, String)> {
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    metrics.lines().skip(1).map(|l| l.split(',').collect::<Vec<_>>()).map(|f| (f[0].into(), f[2].into(), f[5].into())).collect()
}

#[test]
fn a_stopped_run_resumes_to_the_losses_of_one_never_stopped() {
    let train = ["train", "--preset", "classroom", "--steps", "300", "--dropout", "0.2"];
    let compare = ["compare", "--preset", "classroom", "--steps", "300", "--dropout", "0.2", "--variants", "standard,wq-identity"];
    for (args, first_file) in [(&train[..], "checkpoint.qkv"), (&compare[..], "wq-identity.qkv")] {
        let dir = |what: &str| std::env::temp_dir().join(format!("qkv-resume-{}-{}-{what}", std::process::id(), args[0]));
        let (whole, stopped) = (dir("whole"), dir("stopped"));
        let done = qkv(args, &whole).output().unwrap();
        assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
        let (status, stderr) = until_signalled(args, first_file, "-INT", &stopped);
        assert_eq!(status, Some(130), "{stderr}");
        let stopped_at = losses(&stopped).len();
        let resumed = Command::new(env!("CARGO_BIN_EXE_qkv")).args(["resume", stopped.to_str().unwrap()]).output().unwrap();
        let said = String::from_utf8_lossy(&resumed.stderr);
        assert!(resumed.status.success(), "{said}");
        assert!(said.contains("resuming"), "{said}");
        let (expected, got) = (losses(&whole), losses(&stopped));
        assert!(stopped_at < expected.len(), "{}: the run was not stopped early ({stopped_at} rows)", args[0]);
        assert_eq!(got, expected, "{}: the resumed run's losses differ from the run never stopped", args[0]);
        // A finished folder is left as it is.
        let again = Command::new(env!("CARGO_BIN_EXE_qkv")).args(["resume", whole.to_str().unwrap()]).output().unwrap();
        let said = String::from_utf8_lossy(&again.stderr);
        assert!(again.status.success() && said.contains("nothing to resume"), "{said}");
        assert_eq!(losses(&whole), expected, "{}: resuming a finished run changed its metrics", args[0]);
        for folder in [whole, stopped] {
            std::fs::remove_dir_all(folder).ok();
        }
    }
    // A folder with nothing to resume says so, as a usage error.
    let empty = std::env::temp_dir().join(format!("qkv-resume-{}-empty", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_qkv")).args(["resume", empty.to_str().unwrap()]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("holds no checkpoint to resume"));
    std::fs::remove_dir_all(empty).ok();
}

/// One writer per folder: a second `qkv train` into a folder a first one is writing refuses,
/// naming it; the first releases the folder when it ends, even on Ctrl-C.
#[test]
fn a_folder_in_use_is_refused_to_a_second_writer() {
    let out = std::env::temp_dir().join(format!("qkv-lock-{}", std::process::id()));
    std::fs::remove_dir_all(&out).ok();
    let mut first = qkv(&["train", "--preset", "classroom", "--steps", "100000"], &out).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !out.join("checkpoint.qkv").exists() {
        assert!(Instant::now() < deadline && first.try_wait().unwrap().is_none(), "the first run did not get going");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = qkv(&["train", "--preset", "classroom", "--steps", "1"], &out).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("in use by another QKV Lab program (process {})", first.id())), "{said}");
    assert!(Command::new("kill").args(["-INT", &first.id().to_string()]).status().unwrap().success());
    assert_eq!(first.wait().unwrap().code(), Some(130));
    assert!(!out.join(".qkv-lock").exists(), "the lock outlived its run");
    std::fs::remove_dir_all(&out).ok();
}

/// `qkv experiment` keeps its seeds' checkpoints at every evaluation and on a signal, and the
/// same command run again resumes them from the step they were stopped at.
#[test]
fn an_experiment_stopped_by_a_signal_resumes_from_its_checkpoints() {
    use std::io::{BufRead, BufReader};
    let out = std::env::temp_dir().join(format!("qkv-interrupt-experiment-{}", std::process::id()));
    std::fs::remove_dir_all(&out).ok();
    let experiment = ["experiment", "paper1", "--scale", "tiny", "--seeds", "1", "--steps", "100000"];
    let seed_dir = "checkpoints/headline/seed-1337";
    let (status, stderr) = until_signalled(&experiment, &format!("{seed_dir}/standard.qkv"), "-INT", &out);
    assert_eq!(status, Some(130), "{stderr}");
    let said = stderr.lines().find(|l| l.starts_with("qkv: stopped by Ctrl-C")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(said.contains(seed_dir) && said.contains("run the same command again"), "{said}");
    let step: usize = said.split("after step ").nth(1).and_then(|s| s.split(';').next()).and_then(|s| s.parse().ok()).unwrap();

    // The same command again: it resumes the seed where the signal stopped it.
    let mut again = qkv(&experiment, &out).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("qkv starts");
    let resumed = BufReader::new(again.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        // The headline study trains two seeds for the one asked: the line of the seed stopped.
        .find(|l| l.contains("resuming at step") && l.contains(seed_dir))
        .expect("the second run resumes");
    again.kill().ok();
    again.wait().ok();
    assert!(resumed.ends_with(&format!("resuming at step {step} from {}", out.join(seed_dir).display())), "{resumed} (stopped at {step})");
    std::fs::remove_dir_all(&out).ok();
}
