//! `qkv bench --kernels`: what a training step, an evaluation and a generated token cost a GPU in
//! kernel launches and host waits, and how many kernels a run compiles before its first step.
//! Counts, not timings: they do not depend on the machine's speed (docs/performance.md, "The GPU
//! path"), so lavapipe, a machine without a GPU, gives the figures a real GPU would.

use serde::Serialize;

use qkv_kernels::{DryRun, KernelTime, KernelTimes, LaunchCounter, Tally};
use qkv_model::AttentionVariant;
use qkv_model::burn::module::Module;
use qkv_train::RunError;
use qkv_train::generate::{SampleOptions, generate};
use qkv_train::rng::Rng;

use super::BenchArgs;
use super::shapes::StepShapes;
use crate::Failure;
use crate::compute::{Adapter, Backend, Compute};
use pollster::FutureExt as _;

/// One variant's counts.
#[derive(Debug, Serialize)]
struct KernelRow {
    variant: AttentionVariant,
    /// Distinct kernels launched from the start of the process to the end of this run's first
    /// step: what the process compiled by then (each kernel is compiled once, at its first
    /// launch). The runs' models are all built before the first run steps.
    compiled_by_first_step: usize,
    launches_per_step: f64,
    /// Read-backs per step: each waits for the device to finish.
    host_waits_per_step: f64,
    /// One evaluation over the recipe's validation batches (not on a dry run).
    #[serde(flatten)]
    evaluation: Option<EvaluationCounts>,
    /// The kernels of one step, by name, most launched first.
    step_by_kernel: Vec<(String, f64)>,
    /// The kernels of one step by parallel shape.
    step_shapes: StepShapes,
    /// With `--profile`: one more step, timed kernel by kernel, the longest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    step_profile: Option<Vec<KernelProfile>>,
}

/// What an evaluation and a generated token cost.
#[derive(Debug, Serialize)]
struct EvaluationCounts {
    launches_per_evaluation: usize,
    host_waits_per_evaluation: usize,
    /// One more generated token, with the KV cache, past the first few.
    launches_per_generated_token: f64,
    host_waits_per_generated_token: f64,
}

/// A kernel's launches in the profiled step and their time on the device.
#[derive(Debug, Serialize)]
struct KernelProfile {
    kernel: String,
    launches: usize,
    milliseconds: f64,
    /// Launches the host timed (around a blocking submit), where the device could not.
    host_timed: usize,
}

impl KernelProfile {
    fn new((kernel, time): (String, KernelTime)) -> Self {
        Self { kernel, launches: time.launches, milliseconds: time.seconds * 1e3, host_timed: time.host_timed }
    }
}

#[derive(Debug, Serialize)]
struct KernelReport {
    preset: qkv_model::Preset,
    backend: Backend,
    batch: usize,
    block: usize,
    steps_counted: usize,
    read_back_every: usize,
    /// Counted on CubeCL's dry run: compiled and dropped, not run.
    dry_run: bool,
    adapter: Option<Adapter>,
    product: Option<super::ProductReport>,
    rows: Vec<KernelRow>,
}

/// `tally` divided over `count` steps or tokens.
fn per(tally: &Tally, count: usize) -> (f64, f64, Vec<(String, f64)>) {
    let count = count as f64;
    let mut by_kernel: Vec<(String, f64)> = tally.by_kernel.iter().map(|(name, &n)| (name.clone(), n as f64 / count)).collect();
    by_kernel.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (tally.launches as f64 / count, tally.read_backs as f64 / count, by_kernel)
}

pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    // Started before anything touches a device, so that every kernel the process compiles is seen.
    let counter = LaunchCounter::start();
    let plan = super::train_args(args).plan(&args.variants);
    let compute = args.spread.compute(args.backend)?;
    let adapter = super::adapter(&compute, args)?;
    let product = super::choose_product(&compute);
    let mut experiment = plan.experiment(&compute.home)?;
    experiment.spread_over(&compute.replicas);
    let batch_size = experiment.runs[0].spec.training.batch_size;
    let block_size = experiment.runs[0].spec.model.block_size;
    let val_batches = experiment.val_batches().to_vec();
    let batch = experiment.dataset().train_batch(&mut Rng::new(7), batch_size, block_size, 0);
    // Enough tokens past the prompt that the count per token is the steady one, and few enough
    // that the context never slides (which rebuilds the cache).
    let tokens = (block_size / 4).clamp(1, args.gen_tokens.max(1));

    // Compiled and dropped from here on, if asked: the models are built and the batch is on
    // the device, and nothing below reads a result it branches on.
    let _dry_run = args.dry_run.then(DryRun::new);
    let mut rows = Vec::new();
    for (run, &variant) in experiment.runs.iter_mut().zip(&args.variants) {
        step(run, &batch, 1, 1, args.dry_run)?;
        let compiled_by_first_step = counter.distinct_kernels();
        step(run, &batch, args.warmup, 1, args.dry_run)?;

        let (before, mark) = (counter.tally(), counter.mark());
        step(run, &batch, args.steps, args.read_back_every, args.dry_run)?;
        let (launches_per_step, host_waits_per_step, step_by_kernel) = per(&counter.tally().since(&before), args.steps);
        let least = super::shapes::least_bytes(run.model().num_params(), batch_size * block_size);
        let step_shapes = StepShapes::of(&counter.launches_since(mark), args.steps, least);

        // After the counts: while the kernels are timed the counter sees none.
        let step_profile = if args.profile {
            let times = KernelTimes::start();
            super::train_steps(run, &batch, 1, 1)?;
            Some(times.finish().into_iter().map(KernelProfile::new).collect())
        } else {
            None
        };
        let evaluation = if args.dry_run { None } else { Some(evaluation_counts(&counter, run, &val_batches, tokens)?) };
        rows.push(KernelRow {
            variant,
            compiled_by_first_step,
            launches_per_step,
            host_waits_per_step,
            evaluation,
            step_by_kernel,
            step_shapes,
            step_profile,
        });
    }

    let report = KernelReport {
        preset: args.preset,
        backend: args.backend,
        batch: batch_size,
        block: block_size,
        steps_counted: args.steps,
        read_back_every: args.read_back_every,
        dry_run: args.dry_run,
        adapter,
        product,
        rows,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &compute);
    }
    Ok(())
}

/// `steps` training steps, read back every `read_back_every`. On a dry run the losses read back
/// are whatever the buffers held, so one that is not a number is not a divergence.
fn step(run: &mut qkv_train::Run, batch: &qkv_train::Batch, steps: usize, read_back_every: usize, dry_run: bool) -> Result<(), Failure> {
    match super::train_steps(run, batch, steps, read_back_every) {
        Err(failure) if dry_run && matches!(failure.downcast_ref::<RunError>(), Some(RunError::Diverged { .. })) => {
            Err("the dry run read back a loss that is not a number, and the run stopped there: count without --dry-run".into())
        }
        other => other,
    }
}

/// What one evaluation over `val_batches` and one more generated token cost.
fn evaluation_counts(
    counter: &LaunchCounter,
    run: &mut qkv_train::Run,
    val_batches: &[qkv_train::Batch],
    tokens: usize,
) -> Result<EvaluationCounts, Failure> {
    let before = counter.tally();
    run.evaluate(val_batches).block_on()?;
    let evaluation = counter.tally().since(&before);

    // Generating n and 2n tokens: the difference is n tokens' steady cost, the prompt's and
    // the first token's excluded.
    let model = run.model().valid().into_gpt()?;
    let options = |max_new_tokens| SampleOptions { max_new_tokens, ..Default::default() };
    let before = counter.tally();
    generate(&model, &[0], &options(tokens)).block_on()?;
    let short = counter.tally().since(&before);
    let before = counter.tally();
    generate(&model, &[0], &options(2 * tokens)).block_on()?;
    let long = counter.tally().since(&before);
    // Two separate windows: their difference is taken in totals (with Burn's fusion a kernel
    // of the short run need not recur in the long one).
    let difference = |long: usize, short: usize| (long as f64 - short as f64) / tokens as f64;
    Ok(EvaluationCounts {
        launches_per_evaluation: evaluation.launches,
        host_waits_per_evaluation: evaluation.read_backs,
        launches_per_generated_token: difference(long.launches, short.launches),
        host_waits_per_generated_token: difference(long.read_backs, short.read_backs),
    })
}

fn print_report(report: &KernelReport, compute: &Compute) {
    println!(
        "{} on {}, batch {} × {}: kernel launches and host waits, counted over {} steps (read back every {})",
        report.preset,
        compute.describe(),
        report.batch,
        report.block,
        report.steps_counted,
        report.read_back_every
    );
    if report.backend == Backend::Flex {
        println!("(flex computes on the CPU and launches no GPU kernels: every count is 0)");
    }
    println!(
        "{:<16} {:>9} {:>13} {:>11} {:>12} {:>11} {:>13} {:>12}",
        "variant", "compiled", "launches/step", "waits/step", "launches/eval", "waits/eval", "launches/token", "waits/token"
    );
    for r in &report.rows {
        let (eval, token) = match &r.evaluation {
            Some(e) => (
                format!("{:>12} {:>11}", e.launches_per_evaluation, e.host_waits_per_evaluation),
                format!("{:>13.1} {:>12.2}", e.launches_per_generated_token, e.host_waits_per_generated_token),
            ),
            None => (format!("{:>12} {:>11}", "—", "—"), format!("{:>13} {:>12}", "—", "—")),
        };
        println!(
            "{:<16} {:>9} {:>13.1} {:>11.2} {eval} {token}",
            r.variant.name(),
            r.compiled_by_first_step,
            r.launches_per_step,
            r.host_waits_per_step
        );
    }
    if report.dry_run {
        println!("(a dry run: every launch compiled and dropped, not run; no evaluation or generation figures)");
    }
    if report.rows.len() > 1 {
        println!("(compiled: distinct kernels launched by the end of the run's first step, the earlier runs' included)");
    }
    if let Some(first) = report.rows.first().filter(|r| !r.step_by_kernel.is_empty()) {
        println!("\n{}'s step, by kernel:", first.variant.name());
        for (name, count) in &first.step_by_kernel {
            println!("{count:>8.1}  {name}");
        }
        first.step_shapes.print(first.variant.name());
    }
    for row in &report.rows {
        let Some(profile) = &row.step_profile else { continue };
        let total: f64 = profile.iter().map(|k| k.milliseconds).sum();
        let host_timed: usize = profile.iter().map(|k| k.host_timed).sum();
        println!(
            "\n{}'s step timed kernel by kernel (each launch waits for the one before: a ranking, not the step's time):",
            row.variant.name()
        );
        println!("{:>10} {:>6} {:>9} {:>12}  kernel", "ms", "share", "launches", "µs/launch");
        for k in profile {
            println!(
                "{:>10.3} {:>5.1}% {:>9} {:>12.1}  {}",
                k.milliseconds,
                100.0 * k.milliseconds / total.max(f64::MIN_POSITIVE),
                k.launches,
                1e3 * k.milliseconds / k.launches.max(1) as f64,
                k.kernel
            );
        }
        if host_timed > 0 {
            println!("({host_timed} launches timed by the host, around a blocking submit: the device gave no timestamps)");
        }
    }
}
