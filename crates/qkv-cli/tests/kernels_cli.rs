//! `qkv bench --kernels`: what a GPU step costs in launches and host waits, counted on wgpu (Mesa's
//! lavapipe on a machine without a GPU). Counts do not depend on the machine's speed, so they are
//! asserted exactly: a change that moves one says so here, and docs/performance.md ("The GPU
//! path") records the figures. Re-measure with the command in `count`. (Burn picks some kernels by
//! where tensors lie in memory, e.g. a vectorised copy for an aligned one, so the same model with
//! other runs beside it can count a launch or two apart: the command is part of the figure.)

use std::process::Command;

use serde_json::Value;

/// `qkv bench --kernels --json` on the classroom model on wgpu, its first row, with Burn's matrix
/// product (set, so that the count does not depend on which product lavapipe times faster).
fn count(variant: &str, read_back_every: &str) -> Value {
    count_with("burn", variant, read_back_every)
}

/// [`count`] with the matrix product `product` (`QKV_PRODUCT`: burn or blocked).
fn count_with(product: &str, variant: &str, read_back_every: &str) -> Value {
    let args = ["bench", "--kernels", "--json", "--preset", "classroom", "--backend", "wgpu", "--steps", "2", "--warmup", "1"];
    let output = Command::new(env!("CARGO_BIN_EXE_qkv"))
        .env("QKV_PRODUCT", product)
        .args(args)
        .args(["--variants", variant, "--read-back-every", read_back_every])
        .output()
        .expect("qkv runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    report["rows"][0].clone()
}

#[test]
fn a_classroom_step_on_wgpu_costs_its_recorded_launches_and_one_wait() {
    let row = count("standard", "1");
    let figures = [
        ("launches_per_step", 120.0),
        ("host_waits_per_step", 1.0),
        ("compiled_by_first_step", 35.0),
        ("launches_per_evaluation", 128.0),
        ("host_waits_per_evaluation", 1.0),
        ("launches_per_generated_token", 37.0),
        ("host_waits_per_generated_token", 1.0),
    ];
    for (name, expected) in figures {
        assert_eq!(row[name].as_f64(), Some(expected), "{name}: {row:#}");
    }
    let by_kernel: f64 = row["step_by_kernel"].as_array().unwrap().iter().map(|k| k[1].as_f64().unwrap()).sum();
    assert_eq!(by_kernel, 120.0, "the kernels of a step add up to its launches");

    // Steps launched in pairs wait once per pair; the launches stay the same.
    let paired = count("standard", "2");
    assert_eq!(paired["host_waits_per_step"].as_f64(), Some(0.5));
    assert_eq!(paired["launches_per_step"], row["launches_per_step"]);
}

/// Our blocked product (the one GPUs emulated on the CPU are given) takes the place of Burn's, one
/// launch for one: the classroom model has no biases to fold into it.
#[test]
fn the_blocked_product_replaces_burns_launch_for_launch() {
    let burn = count("standard", "1");
    let blocked = count_with("blocked", "standard", "1");
    assert_eq!(blocked["launches_per_step"], burn["launches_per_step"], "{blocked:#}");
    let launches_of = |row: &Value, kernel: &str| {
        row["step_by_kernel"].as_array().unwrap().iter().find(|k| k[0] == kernel).map_or(0.0, |k| k[1].as_f64().unwrap())
    };
    assert_eq!(launches_of(&burn, "MatmulEntry"), 39.0, "{burn:#}");
    assert_eq!((launches_of(&blocked, "ProductKernel"), launches_of(&blocked, "MatmulEntry")), (39.0, 0.0), "{blocked:#}");
}

/// A figure recorded as a GPU's must come from a GPU: `--require-gpu` refuses a software adapter
/// (lavapipe here) unless `--allow-software` says to measure it anyway, and the report names it.
#[test]
fn a_software_adapter_is_named_and_refused_where_a_gpu_is_required() {
    let args =
        ["bench", "--kernels", "--json", "--preset", "classroom", "--backend", "wgpu", "--batch", "2", "--steps", "1", "--warmup", "0"];
    let run = |extra: &[&str]| Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).args(extra).output().expect("qkv runs");
    let allowed = run(&["--require-gpu", "--allow-software"]);
    assert!(allowed.status.success(), "{}", String::from_utf8_lossy(&allowed.stderr));
    let report: Value = serde_json::from_slice(&allowed.stdout).expect("valid JSON");
    let adapter = &report["adapter"];
    assert!(!adapter["name"].as_str().unwrap_or_default().is_empty(), "{report:#}");
    if adapter["software"] == true {
        let refused = run(&["--require-gpu"]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && stderr.contains("not a GPU") && stderr.contains("--allow-software"), "{stderr}");
    }
}

/// `--profile` times one more step kernel by kernel: the same kernels, launched as often as the
/// counted step's, the longest first.
#[test]
fn a_profiled_step_times_every_launch_of_the_counted_one() {
    let args = ["bench", "--kernels", "--profile", "--json", "--preset", "classroom", "--backend", "wgpu", "--steps", "1"];
    let output = Command::new(env!("CARGO_BIN_EXE_qkv"))
        .env("QKV_PRODUCT", "burn")
        .args(args)
        .args(["--warmup", "1", "--variants", "standard", "--gen-tokens", "1"])
        .output()
        .expect("qkv runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    let row = &report["rows"][0];
    let profile = row["step_profile"].as_array().expect("a profile");
    let launches: u64 = profile.iter().map(|k| k["launches"].as_u64().unwrap()).sum();
    assert_eq!(Some(launches as f64), row["launches_per_step"].as_f64(), "{row:#}");
    let times: Vec<f64> = profile.iter().map(|k| k["milliseconds"].as_f64().unwrap()).collect();
    assert!(times.iter().all(|&t| t >= 0.0) && times.windows(2).all(|w| w[0] >= w[1]), "the longest first: {times:?}");
    assert!(times[0] > 0.0, "a step takes time: {times:?}");
}
