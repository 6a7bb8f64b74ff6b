//! `qkv bench`: training and generation throughput per variant, warm-up excluded. A benchmark
//! reports ratios against the first variant measured in the same process, never a verdict.

use std::time::Instant;

use clap::Args;
use serde::Serialize;

use qkv_model::AttentionVariant;
use qkv_model::burn::module::Module;
use qkv_train::generate::{SampleOptions, generate};
use qkv_train::rng::Rng;
use qkv_train::{DataSource, Run, TokenizerKind};

use crate::train::{Backend, TrainArgs};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long)]
    preset: qkv_model::Preset,
    /// Comma-separated variants; the first is the reference for the ratios.
    #[arg(long, value_delimiter = ',', default_value = "standard,wq-identity")]
    variants: Vec<AttentionVariant>,
    #[arg(long, default_value = "flex")]
    backend: Backend,
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
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct BenchRow {
    variant: AttentionVariant,
    train_tokens_per_sec: f64,
    train_ratio: f64,
    generate_tokens_per_sec: f64,
    generate_ratio: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if args.steps == 0 || args.rounds == 0 {
        return Err("--steps and --rounds must be at least 1".into());
    }
    let train_args = TrainArgs {
        preset: args.preset,
        data: DataSource::Shakespeare,
        tokenizer: TokenizerKind::Char,
        steps: Some(args.warmup + args.steps * args.rounds + 1),
        batch: args.batch,
        lr: None,
        wd: None,
        kv_heads: None,
        seed: None,
        backend: args.backend,
        out: Default::default(),
    };
    let plan = train_args.plan(&args.variants);
    let dataset = plan.dataset()?;
    let device = args.backend.device()?;
    let mut runs: Vec<Run> = plan
        .specs(&dataset)?
        .into_iter()
        .map(|spec| Run::new(spec, &dataset, &device).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let batch_size = runs[0].spec.training.batch_size;
    let block_size = runs[0].spec.model.block_size;
    let mut rng = Rng::new(7);
    let batch = dataset.train_batch(&mut rng, batch_size, block_size);
    let tokens_per_step = (batch_size * block_size) as f64;

    for run in &mut runs {
        for _ in 0..args.warmup {
            run.train_step(std::slice::from_ref(&batch)).map_err(|e| e.to_string())?;
        }
    }
    let mut train_rates = vec![Vec::new(); runs.len()];
    let mut generate_rates = vec![Vec::new(); runs.len()];
    let prompt = [0u32];
    for round in 0..args.rounds {
        eprintln!("round {}/{}", round + 1, args.rounds);
        for (index, run) in runs.iter_mut().enumerate() {
            let started = Instant::now();
            for _ in 0..args.steps {
                run.train_step(std::slice::from_ref(&batch)).map_err(|e| e.to_string())?;
            }
            train_rates[index].push(tokens_per_step * args.steps as f64 / started.elapsed().as_secs_f64());

            let model = run.model().valid();
            let options = SampleOptions { max_new_tokens: args.gen_tokens, seed: round as u64, ..Default::default() };
            generate(&model, &prompt, &SampleOptions { max_new_tokens: 4, ..options.clone() }).map_err(|e| e.to_string())?;
            let started = Instant::now();
            generate(&model, &prompt, &options).map_err(|e| e.to_string())?;
            generate_rates[index].push(args.gen_tokens as f64 / started.elapsed().as_secs_f64());
        }
    }
    let train: Vec<f64> = train_rates.into_iter().map(median).collect();
    let generation: Vec<f64> = generate_rates.into_iter().map(median).collect();
    let rows: Vec<BenchRow> = args
        .variants
        .iter()
        .enumerate()
        .map(|(i, &variant)| BenchRow {
            variant,
            train_tokens_per_sec: train[i],
            train_ratio: train[i] / train[0],
            generate_tokens_per_sec: generation[i],
            generate_ratio: generation[i] / generation[0],
        })
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
    } else {
        println!(
            "{} on {:?}, batch {batch_size} × {block_size}, median of {} rounds × {} steps (warm-up {} excluded)",
            args.preset, args.backend, args.rounds, args.steps, args.warmup
        );
        println!("{:<16} {:>14} {:>10} {:>14} {:>10}", "variant", "train tok/s", "× ref", "gen tok/s", "× ref");
        for r in &rows {
            println!(
                "{:<16} {:>14.0} {:>10.3} {:>14.1} {:>10.3}",
                r.variant.name(),
                r.train_tokens_per_sec,
                r.train_ratio,
                r.generate_tokens_per_sec,
                r.generate_ratio
            );
        }
    }
    Ok(())
}
