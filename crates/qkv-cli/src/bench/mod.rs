//! `qkv bench`: training and generation throughput per variant, warm-up excluded, with the model
//! FLOPs they amount to and the process's memory. A vision preset trains on the embedded digits
//! and has no generation figure (a ViT classifies; it does not continue a text). A benchmark
//! reports ratios against the first variant measured in the same process, never a verdict.
//! `--kernels` counts instead of timing (`kernels`).

mod kernels;
mod shapes;

use std::time::Instant;

use clap::Args;
use serde::Serialize;

use qkv_model::AttentionVariant;
use qkv_model::accounting::training_flops_per_token;
use qkv_model::burn::module::Module;
use qkv_train::generate::{SampleOptions, generate};
use qkv_train::rng::Rng;
use qkv_train::{Batch, DataSource, ImageSource, Run, TokenizerKind};

use crate::Failure;
use crate::compute::{Adapter, Backend, Compute, SpreadArgs};
use crate::train::TrainArgs;
use pollster::FutureExt as _;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long)]
    preset: qkv_model::Preset,
    /// Comma-separated variants; the first is the reference for the ratios.
    #[arg(long, value_delimiter = ',', default_value = "standard,wq-identity")]
    variants: Vec<AttentionVariant>,
    #[arg(long, default_value = "flex")]
    backend: Backend,
    #[command(flatten)]
    spread: SpreadArgs,
    /// Timed training steps per variant.
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// Untimed steps first (kernel compilation, allocation).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Rows per batch [default: the preset's recipe].
    #[arg(long)]
    batch: Option<usize>,
    /// Tokens to generate for the generation figure.
    #[arg(long, default_value_t = 64)]
    gen_tokens: usize,
    /// Rounds: variants are measured in turn, round after round, and each figure is the median
    /// over rounds, so that drift in the machine's speed hits every variant alike.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Steps launched back to back before one read-back of their losses (the app, playing on a
    /// GPU, groups steps so); 1 reads every step.
    #[arg(long, default_value_t = 1)]
    read_back_every: usize,
    /// Count instead of timing: kernel launches and host waits (read-backs) per training step,
    /// per evaluation and per generated token, and the kernels compiled before the first step.
    /// Counts do not depend on the machine's speed; on flex (the CPU) they are all 0.
    #[arg(long)]
    kernels: bool,
    /// With --kernels: also time one training step kernel by kernel, the longest first. Each
    /// launch then waits for the one before, so the times rank the kernels (for a GPU machine:
    /// what to work on next); their sum is not the step's time.
    #[arg(long, requires = "kernels")]
    profile: bool,
    /// With --kernels: count without running. Every launch is compiled and dropped (CubeCL's dry
    /// run), so the counts and shapes of a step at sizes an emulated GPU would take minutes over
    /// come in seconds; the evaluation and generation figures are left out (they read results).
    #[arg(long, requires = "kernels", conflicts_with = "profile")]
    dry_run: bool,
    /// Measure a software adapter (lavapipe, llvmpipe, SwiftShader: wgpu on the CPU) as if it
    /// were a GPU; without it such an adapter is refused with `--require-gpu`.
    #[arg(long)]
    allow_software: bool,
    /// Refuse to measure unless the backend's adapter is a GPU (scripts that record GPU figures).
    #[arg(long)]
    require_gpu: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct BenchRow {
    variant: AttentionVariant,
    train_tokens_per_sec: f64,
    train_ratio: f64,
    /// Matrix-product FLOPs of one training step per token (forward and backward).
    flops_per_token: f64,
    /// What the training rate amounts to in model FLOPs per second, in billions.
    train_gflops: f64,
    /// None for a ViT, which generates nothing.
    generate_tokens_per_sec: Option<f64>,
    generate_ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
struct BenchReport {
    preset: qkv_model::Preset,
    backend: Backend,
    batch: usize,
    block: usize,
    read_back_every: usize,
    /// The GPU adapter measured; none on flex.
    adapter: Option<Adapter>,
    product: Option<ProductReport>,
    rows: Vec<BenchRow>,
    memory: Option<Memory>,
}

/// The process's resident memory (Linux), in MiB: after the warm-up steps and at the end, and
/// its peak. Training that holds steady keeps the last two close to the first.
#[derive(Debug, Serialize)]
struct Memory {
    rss_after_warmup_mib: f64,
    rss_at_end_mib: f64,
    peak_rss_mib: f64,
}

/// A `/proc/self/status` field in MiB (`VmRSS`, `VmHWM`); `None` where there is no procfs.
fn proc_status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The median of a figure's rounds (the reports' median: the mean of the middle two for an even
/// count; the upper one before, which the reports had dropped too).
fn median(mut values: Vec<f64>) -> f64 {
    crate::experiment::stats::median(&mut values).unwrap_or(f64::NAN)
}

/// The adapter `compute` runs on, said on stderr (with what it is not), and refused when the
/// caller requires a GPU and it is a software one.
fn adapter(compute: &Compute, args: &BenchArgs) -> Result<Option<Adapter>, Failure> {
    let Some(adapter) = compute.adapter() else { return Ok(None) };
    let what = if adapter.software { ": software, wgpu on the CPU, not a GPU" } else { "" };
    eprintln!("adapter: {}{what}", adapter.name);
    if args.require_gpu {
        crate::compute::refuse_software(&adapter, args.allow_software)?;
    }
    Ok(Some(adapter))
}

/// Which matrix product the linear layers take on a GPU, and the probe's times behind the choice.
#[derive(Debug, Serialize)]
struct ProductReport {
    product: String,
    burn_ms: Option<f64>,
    ours_ms: Option<f64>,
}

/// Chooses the matrix product on `compute`'s GPUs as a session does before its first step (timed,
/// unless `QKV_PRODUCT` sets it), and says which on stderr; `None` on flex.
fn choose_product(compute: &Compute) -> Option<ProductReport> {
    compute.adapter()?;
    let choice = pollster::block_on(qkv_kernels::choose_product(&compute.home));
    for replica in &compute.replicas {
        pollster::block_on(qkv_kernels::choose_product(replica));
    }
    let timed = choice
        .timed_ms
        .map_or("set by QKV_PRODUCT".to_string(), |(burn, ours)| format!("a probe took {burn:.2} ms with Burn's, {ours:.2} ms with ours"));
    eprintln!("products: {} ({timed})", choice.product);
    let (burn_ms, ours_ms) = choice.timed_ms.unzip();
    Some(ProductReport { product: choice.product.to_string(), burn_ms, ours_ms })
}

/// `steps` training steps of `run` on `batch`, launched in groups of `read_back_every` that are
/// read back once each.
fn train_steps(run: &mut Run, batch: &Batch, steps: usize, read_back_every: usize) -> Result<(), Failure> {
    let mut left = steps;
    while left > 0 {
        let group = vec![std::slice::from_ref(batch); left.min(read_back_every)];
        for outcome in run.train_steps(&group).block_on() {
            outcome?;
        }
        left -= group.len();
    }
    Ok(())
}

/// The training the benchmark's runs are planned with: the preset's recipe on the embedded text
/// (the embedded digits for a vision preset), for as many steps as the benchmark takes.
fn train_args(args: &BenchArgs) -> TrainArgs {
    TrainArgs {
        preset: Some(args.preset),
        data: if args.preset.is_vision() { DataSource::Images(ImageSource::Digits) } else { DataSource::Shakespeare },
        tokenizer: TokenizerKind::Char,
        steps: Some(args.warmup + args.steps * args.rounds + 1),
        batch: args.batch,
        lr: None,
        wd: None,
        kv_heads: None,
        seed: None,
        dropout: None,
        shift: None,
        shape: Default::default(),
        backend: args.backend,
        spread: args.spread.clone(),
        out: Default::default(),
    }
}

pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    if args.steps == 0 || args.rounds == 0 || args.read_back_every == 0 {
        return Err(crate::usage("--steps, --rounds and --read-back-every must be at least 1"));
    }
    if args.kernels {
        return kernels::run(args);
    }
    let plan = train_args(args).plan(&args.variants);
    let compute = args.spread.compute(args.backend)?;
    let adapter = adapter(&compute, args)?;
    let product = choose_product(&compute);
    // The runs are stepped one at a time, each on the same batch, not through the experiment.
    let mut experiment = plan.experiment(&compute.home)?;
    experiment.spread_over(&compute.replicas);
    let batch_size = experiment.runs[0].spec.training.batch_size;
    let block_size = experiment.runs[0].spec.model.block_size;
    let mut rng = Rng::new(7);
    let batch = experiment.dataset().train_batch(&mut rng, batch_size, block_size, 0);
    let runs = &mut experiment.runs;
    let tokens_per_step = (batch_size * block_size) as f64;

    for run in runs.iter_mut() {
        for _ in 0..args.warmup {
            run.train_step(std::slice::from_ref(&batch)).block_on()?;
        }
    }
    let rss_after_warmup = proc_status_mib("VmRSS:");
    let mut train_rates = vec![Vec::new(); runs.len()];
    let mut generate_rates = vec![Vec::new(); runs.len()];
    let prompt = [0u32];
    for round in 0..args.rounds {
        eprintln!("round {}/{}", round + 1, args.rounds);
        for (index, run) in runs.iter_mut().enumerate() {
            let started = Instant::now();
            train_steps(run, &batch, args.steps, args.read_back_every)?;
            train_rates[index].push(tokens_per_step * args.steps as f64 / started.elapsed().as_secs_f64());

            if args.preset.is_vision() {
                continue;
            }
            let model = run.model().valid().into_gpt()?;
            let options = SampleOptions { max_new_tokens: args.gen_tokens, seed: round as u64, ..Default::default() };
            generate(&model, &prompt, &SampleOptions { max_new_tokens: 4, ..options.clone() }).block_on()?;
            let started = Instant::now();
            generate(&model, &prompt, &options).block_on()?;
            generate_rates[index].push(args.gen_tokens as f64 / started.elapsed().as_secs_f64());
        }
    }
    let memory = match (rss_after_warmup, proc_status_mib("VmRSS:"), proc_status_mib("VmHWM:")) {
        (Some(rss_after_warmup_mib), Some(rss_at_end_mib), Some(peak_rss_mib)) => {
            Some(Memory { rss_after_warmup_mib, rss_at_end_mib, peak_rss_mib })
        }
        _ => None,
    };
    let train: Vec<f64> = train_rates.into_iter().map(median).collect();
    // Empty for a ViT: no figure rather than a made-up one.
    let generation: Vec<Option<f64>> = generate_rates.into_iter().map(|rates| (!rates.is_empty()).then(|| median(rates))).collect();
    let rows: Vec<BenchRow> = args
        .variants
        .iter()
        .enumerate()
        .map(|(i, &variant)| {
            let flops_per_token = training_flops_per_token(&runs[i].spec.model);
            BenchRow {
                variant,
                train_tokens_per_sec: train[i],
                train_ratio: train[i] / train[0],
                flops_per_token,
                train_gflops: flops_per_token * train[i] / 1e9,
                generate_tokens_per_sec: generation[i],
                generate_ratio: generation[i].zip(generation[0]).map(|(rate, reference)| rate / reference),
            }
        })
        .collect();
    let report = BenchReport {
        preset: args.preset,
        backend: args.backend,
        batch: batch_size,
        block: block_size,
        read_back_every: args.read_back_every,
        adapter,
        product,
        rows,
        memory,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, args);
    }
    Ok(())
}

/// The report as a table for a terminal.
fn print_report(report: &BenchReport, args: &BenchArgs) {
    println!(
        "{} on {:?}, batch {} × {}, median of {} rounds × {} steps (warm-up {} excluded), read back every {}",
        args.preset, args.backend, report.batch, report.block, args.rounds, args.steps, args.warmup, args.read_back_every
    );
    println!(
        "{:<16} {:>12} {:>8} {:>12} {:>10} {:>12} {:>8}",
        "variant", "train tok/s", "× ref", "MFLOP/tok", "GFLOP/s", "gen tok/s", "× ref"
    );
    let or_dash = |figure: Option<f64>, decimals: usize| figure.map_or("-".to_string(), |f| format!("{f:.decimals$}"));
    for r in &report.rows {
        println!(
            "{:<16} {:>12.0} {:>8.3} {:>12.2} {:>10.1} {:>12} {:>8}",
            r.variant.name(),
            r.train_tokens_per_sec,
            r.train_ratio,
            r.flops_per_token / 1e6,
            r.train_gflops,
            or_dash(r.generate_tokens_per_sec, 1),
            or_dash(r.generate_ratio, 3)
        );
    }
    if let Some(m) = &report.memory {
        println!(
            "memory: {:.0} MiB resident after warm-up, {:.0} MiB at the end, {:.0} MiB peak",
            m.rss_after_warmup_mib, m.rss_at_end_mib, m.peak_rss_mib
        );
    }
}
