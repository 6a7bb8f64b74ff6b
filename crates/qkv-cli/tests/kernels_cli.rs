//! `qkv bench --kernels`: what a GPU step costs in launches and host waits, counted on wgpu (Mesa's
//! lavapipe on a machine without a GPU). Counts do not depend on the machine's speed, so they are
//! asserted exactly: a change that moves one says so here, and docs/performance.md ("The GPU
//! path") records the figures. Re-measure with the command in `count`. (Burn picks some kernels by
//! where tensors lie in memory, e.g. a vectorised copy for an aligned one, so the same model with
//! other runs beside it can count a launch or two apart: the command is part of the figure.)

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::process::Command;

use serde_json::Value;

/// `qkv bench --kernels --json` on the classroom model on wgpu, its first row, with Burn's matrix
/// product (set, so that the count does not depend on which product lavapipe times faster).
fn count(variant: &str, read_back_every: &str) -> Value {
    count_with("burn", variant, read_back_every)
}

/// [`count`] with the matrix product `product` (`QKV_PRODUCT`: burn or blocked).
fn count_with(product: &str, variant: &str, read_back_every: &str) -> Value {
    let args = ["--preset", "classroom", "--steps", "2", "--warmup", "1", "--variants", variant, "--read-back-every", read_back_every];
    kernels_row(product, &args)
}

/// The first row of `qkv bench --kernels --json --backend wgpu` with `args`, with the matrix
/// product `product`.
fn kernels_row(product: &str, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_qkv"))
        .env("QKV_PRODUCT", product)
        .args(["bench", "--kernels", "--json", "--backend", "wgpu"])
        .args(args)
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
        ("launches_per_step", 73.0),
        ("host_waits_per_step", 1.0),
        ("compiled_by_first_step", 32.0),
        ("launches_per_evaluation", 108.0),
        ("host_waits_per_evaluation", 1.0),
        ("launches_per_generated_token", 35.0),
        ("host_waits_per_generated_token", 1.0),
    ];
    for (name, expected) in figures {
        assert_eq!(row[name].as_f64(), Some(expected), "{name}: {row:#}");
    }
    let by_kernel: f64 = row["step_by_kernel"].as_array().unwrap().iter().map(|k| k[1].as_f64().unwrap()).sum();
    assert_eq!(by_kernel, 73.0, "the kernels of a step add up to its launches");
    // The step's parallel shapes, from the shapes our kernels launch and Burn's 27 products as
    // modelled (the critical path of serial trips, bytes read and written); Burn's one fill, the
    // loss's seed, carries none. The least a step must move: 107,648 parameters, each with its
    // gradient and two moments, read and written once (32 bytes), and 1,024 tokens and targets.
    let shapes: Vec<Option<f64>> = ["critical_path_trips", "bytes_read", "bytes_written", "launches_without_shape", "bytes_least"]
        .iter()
        .map(|key| row["step_shapes"][key].as_f64())
        .collect();
    assert_eq!(shapes, [34_735.0, 42_160_456.0, 23_707_192.0, 1.0, (32.0 * 107_648.0 + 8.0 * 1_024.0)].map(Some), "{row:#}");

    // Steps launched in pairs wait once per pair, and the pair's values are read in that one
    // wait as they lie (no launch puts them together).
    let paired = count("standard", "2");
    assert_eq!(paired["host_waits_per_step"].as_f64(), Some(0.5));
    assert_eq!(paired["launches_per_step"], row["launches_per_step"]);
}

/// Where Burn's product is taken, a layer's Q, K and V are one packed product: forward a packing
/// and one product where they took three, backward two products and an unpacking where they
/// took six and two adds. Our blocked product (the one GPUs emulated on the CPU are given) takes
/// the place of Burn's one launch for one, and such a device keeps the projections apart and the
/// barrier-free attention and layer norm kernels: attention's backward there is one launch more a
/// layer (D_i has its own), layer norm's as many. The classroom model has no biases.
#[test]
fn the_packed_projections_and_the_blocked_product_account_for_every_launch() {
    let burn = count("standard", "1");
    let blocked = count_with("blocked", "standard", "1");
    let launches_of = |row: &Value, kernel: &str| {
        row["step_by_kernel"].as_array().unwrap().iter().find(|k| k[0] == kernel).map_or(0.0, |k| k[1].as_f64().unwrap())
    };
    let layers = 2.0;
    // A layer: Q, K, V packed (1 + 2), W_O, c_fc and c_proj (3 + 6); the LM head (1 + 2).
    assert_eq!(launches_of(&burn, "MatmulEntry"), layers * 12.0 + 3.0, "{burn:#}");
    assert_eq!((launches_of(&burn, "PackKernel"), launches_of(&burn, "UnpackKernel")), (layers, layers), "{burn:#}");
    // Apart, Q, K and V are 3 + 6 products a layer.
    assert_eq!((launches_of(&blocked, "ProductKernel"), launches_of(&blocked, "MatmulEntry")), (layers * 18.0 + 3.0, 0.0), "{blocked:#}");
    assert_eq!(launches_of(&blocked, "AttentionDeltaKernel"), layers, "{blocked:#}");
    let launches = |row: &Value| row["launches_per_step"].as_f64().unwrap();
    let packing_saves = (3.0 + 6.0 + 2.0) - (2.0 + 3.0);
    assert_eq!(launches(&blocked), launches(&burn) + layers * (packing_saves + 1.0), "{blocked:#}");
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
    let args = ["--profile", "--preset", "classroom", "--steps", "1", "--warmup", "1", "--variants", "standard", "--gen-tokens", "1"];
    let row = &kernels_row("burn", &args);
    let profile = row["step_profile"].as_array().expect("a profile");
    let launches: u64 = profile.iter().map(|k| k["launches"].as_u64().unwrap()).sum();
    assert_eq!(Some(launches as f64), row["launches_per_step"].as_f64(), "{row:#}");
    let times: Vec<f64> = profile.iter().map(|k| k["milliseconds"].as_f64().unwrap()).collect();
    assert!(times.iter().all(|&t| t >= 0.0) && times.windows(2).all(|w| w[0] >= w[1]), "the longest first: {times:?}");
    assert!(times[0] > 0.0, "a step takes time: {times:?}");
}

/// `qkv bench --kernels --dry-run --json` (every launch compiled and dropped): the first row.
fn dry_run(preset: &str, batch: usize) -> Value {
    let batch = batch.to_string();
    kernels_row("burn", &["--dry-run", "--variants", "standard", "--steps", "1", "--warmup", "0", "--preset", preset, "--batch", &batch])
}

/// A figure of a step's parallel shapes (`step_shapes`).
fn shape(row: &Value, key: &str) -> u64 {
    row["step_shapes"][key].as_u64().unwrap_or_else(|| panic!("{key}: {row:#}"))
}

/// Each of our kernels of a step, by name: (launches, longest serial trips of a unit).
fn ours(row: &Value) -> std::collections::BTreeMap<String, (f64, u64)> {
    let kernels = row["step_shapes"]["kernels"].as_array().unwrap();
    kernels
        .iter()
        .filter(|k| k["ours"] == true)
        .map(|k| (k["kernel"].as_str().unwrap().to_owned(), (k["launches"].as_f64().unwrap(), k["longest_serial_trips"].as_u64().unwrap())))
        .collect()
}

/// The parallel shapes of a step follow from the model and the batch alone (docs/performance.md,
/// "The GPU path", has the table), and a bigger batch adds units, not serial work: nanoGPT's
/// shakespeare-char shape (6/6/384, context 256) at batch 8 and at 64, counted on a dry run.
#[test]
fn a_bigger_batch_adds_units_not_serial_work() {
    let (small, large) = (dry_run("shakespeare-char", 8), dry_run("shakespeare-char", 64));
    assert_eq!(ours(&small), ours(&large), "every kernel of ours, as often and as long a unit's work: {small:#} {large:#}");
    assert!(ours(&small).values().all(|&(_, trips)| trips > 0), "every launch of ours says its shape: {small:#}");
    let our_path = |row: &Value| -> u64 {
        row["step_shapes"]["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["ours"] == true)
            .map(|k| k["critical_path_trips"].as_u64().unwrap())
            .sum()
    };
    assert_eq!((our_path(&small), our_path(&large)), (1_008_510, 1_008_510));
    // Burn's products as modelled (`qkv_kernels`' burn_product): a unit loops over the product's
    // inner dimension. A weight's gradient has the batch's rows there (8 × 256 and 64 × 256),
    // cut into runs of 1,024 (`qkv_kernels`' weight_gradient), so the longest is c_proj's 1,536
    // channels at either batch.
    let product_unit = |row: &Value| -> u64 {
        let kernels = row["step_shapes"]["kernels"].as_array().unwrap();
        kernels.iter().find(|k| k["kernel"] == "MatmulEntry").and_then(|k| k["longest_serial_trips"].as_u64()).unwrap()
    };
    assert_eq!((product_unit(&small), product_unit(&large)), (1_536, 1_536));
    // So the whole step's critical path, ours and Burn's, is the same at batch 64 as at 8.
    assert_eq!((shape(&small, "critical_path_trips"), shape(&large, "critical_path_trips")), (1_071_438, 1_071_438));
    for row in [&small, &large] {
        assert_eq!(row["step_shapes"]["launches_without_shape"].as_f64(), Some(1.0), "the loss's seed only: {row:#}");
    }
    // Bytes grow with the batch (activations), by less than 8× (the parameters' do not), and
    // so does their multiple of the least a step must move (10,749,696 parameters, 32 bytes each,
    // and the batch's tokens and targets).
    let bytes = |row: &Value| shape(row, "bytes_read") + shape(row, "bytes_written");
    assert!(bytes(&large) > 4 * bytes(&small) && bytes(&large) < 8 * bytes(&small), "{} → {}", bytes(&small), bytes(&large));
    let least = |batch: u64| 32 * 10_749_696 + 8 * batch * 256;
    assert_eq!((shape(&small, "bytes_least"), shape(&large, "bytes_least")), (least(8), least(64)));
    for row in [&small, &large] {
        assert_eq!(row["launches_per_step"].as_f64(), Some(220.0), "{row:#}");
    }
    // Every other launch is Burn's matrix product or the fill that seeds the loss's gradient.
    for row in [&small, &large] {
        let burns: std::collections::BTreeSet<&str> = row["step_shapes"]["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["ours"] == false)
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(burns, ["FullKernel", "MatmulEntry"].into(), "{row:#}");
    }
}
