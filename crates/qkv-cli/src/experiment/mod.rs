//! `qkv experiment paper1|paper2`: the two papers' comparisons at a chosen scale, several seeds,
//! every run of a seed on identical batches, with a report that records how it was made and
//! says where the result differs from the paper.

mod findings;
mod seeds;
mod stats;
mod sweep;

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use qkv_model::{AttentionVariant, GptConfig, ParamReport, Preset};
use qkv_session::Message;
use qkv_train::checkpoint::{Checkpoint, to_bytes, write_atomically};
use qkv_train::csv;
use qkv_train::plan::{ExperimentPlan, ModelOverrides, RunPlan, TrainingOverrides};
use qkv_train::{DataSource, Experiment, Run, SyntheticTask, TokenizerKind, TrainingConfig};

use crate::Failure;
use crate::compute::{Backend, Compute, SpreadArgs};
use crate::interrupt::{Interrupted, Interrupts};
use crate::report::LossCurve;
use crate::train::{headless_session, started_or_failed};
use findings::{diagnostics_section, paper1_report, paper2_against_paper, paper2_report};
use pollster::FutureExt as _;
use seeds::{Outcome, SeedResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExperimentKind {
    /// Karbevski & Mijoski: W_Q = I, with and without the parameters moved to the MLP.
    Paper1,
    /// Kayyam et al.: shared projections and KV heads, on text.
    Paper2,
    /// Paper 2's synthetic list tasks swept over the list length, where the variants part ways.
    Paper2Synthetic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The classroom model for 300 steps: minutes on a laptop, for trying the command.
    Tiny,
    /// nanoGPT's CPU Shakespeare recipe (4×4×128, 2000 steps).
    Laptop,
    /// GPT-2 small on your own data (`--data PATH --tokenizer bpe:N`, or nanoGPT's `--data train.bin`) on a wgpu GPU; resumable.
    Gpu,
}

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    pub paper: ExperimentKind,
    #[arg(long, value_enum, default_value = "laptop")]
    pub scale: Scale,
    /// Seeds (different initialisation and batch order) [default: 3, 1 at gpu scale].
    #[arg(long)]
    pub seeds: Option<usize>,
    /// Optimiser steps per run [default: the scale's].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Text data or nanoGPT token files (train.bin) [default: shakespeare; required at gpu scale].
    #[arg(long)]
    pub data: Option<DataSource>,
    /// char, bpe:N or a Hugging Face tokenizer.json (see `qkv train --help`).
    #[arg(long, default_value = "char")]
    pub tokenizer: TokenizerKind,
    /// [default: flex, wgpu at gpu scale]
    #[arg(long)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub spread: SpreadArgs,
    /// Output folder [default: runs/PAPER-SCALE].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// paper2-synthetic: list lengths to sweep, e.g. 16,64,128 [default: the scale's].
    #[arg(long, value_delimiter = ',')]
    pub lengths: Option<Vec<usize>>,
    /// paper2-synthetic: tasks to sweep, e.g. reverse,swap [default: the scale's].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<SyntheticTask>>,
    /// Seeds trained at once, each with a share of the cores. On a CPU with fewer cores than a
    /// seed has runs (a laptop), 2 or more is a little faster and takes about a third of the
    /// memory, with the same results; where there are more cores than runs, 1 spreads each run
    /// over several.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
}

/// One comparison: a plan trained once per seed.
struct Study {
    name: String,
    plan: ExperimentPlan,
}

impl Scale {
    fn preset(self) -> Preset {
        match self {
            Scale::Tiny => Preset::Classroom,
            Scale::Laptop => Preset::ShakespeareCharCpu,
            Scale::Gpu => Preset::Gpt2Small,
        }
    }

    fn synthetic_preset(self) -> Preset {
        match self {
            Scale::Tiny => Preset::Classroom,
            _ => Preset::Synthetic,
        }
    }

    /// Heads of paper 2's models: 8 at laptop scale (d_k 16), so that GQA can share key/value
    /// heads 4 to 1 as the paper does; the preset's elsewhere.
    fn paper2_heads(self) -> Option<usize> {
        match self {
            Scale::Laptop => Some(8),
            _ => None,
        }
    }

    fn default_steps(self) -> Option<usize> {
        match self {
            Scale::Tiny => Some(300),
            _ => None,
        }
    }
}

/// What `paper2-synthetic` sweeps at a scale, unless told otherwise.
struct SweepDefaults {
    tasks: Vec<SyntheticTask>,
    lengths: Vec<usize>,
    steps: Option<usize>,
    batch_size: Option<usize>,
}

impl Scale {
    /// Tiny: two lengths the classroom model learns in a few minutes. Laptop: the
    /// direction-dependent tasks at L = 16 and 64, batches of 16 for 300 steps: measured here,
    /// reverse and swap at L = 64 go from about 14% at 150 steps (Q-K-V barely above chance) to
    /// 100% at 300 for every variant but Q=K=V, so 300 steps is where the variants' learning
    /// speeds show. L = 128 costs several times L = 64 (a context of 256), more than the hour
    /// on two cores allows: `--lengths 16,64,128`, or the gpu scale. Gpu: every task at paper
    /// 2's lengths with the recipe's 3000 steps.
    fn sweep(self) -> SweepDefaults {
        use SyntheticTask::*;
        match self {
            Scale::Tiny => SweepDefaults { tasks: vec![Reverse, Swap], lengths: vec![8, 16], steps: Some(200), batch_size: None },
            Scale::Laptop => SweepDefaults { tasks: vec![Reverse, Swap], lengths: vec![16, 64], steps: Some(300), batch_size: Some(16) },
            Scale::Gpu => SweepDefaults { tasks: SyntheticTask::ALL.to_vec(), lengths: vec![16, 64, 128], steps: None, batch_size: None },
        }
    }
}

/// The MLP width that brings `config` (with `variant`) closest to `target` parameters.
fn mlp_matching(config: &GptConfig, variant: AttentionVariant, target: usize) -> usize {
    let params = |hidden: usize| {
        let mut c = config.clone().with_variant(variant);
        c.mlp_hidden = hidden;
        ParamReport::new(&c).total_params
    };
    (1..=config.mlp_hidden * 2).min_by_key(|&h| params(h).abs_diff(target)).expect("a non-empty range")
}

/// Paper 1's comparison and its ablations: W_Q = I against standard, with the freed parameters
/// moved to the MLP and the standard model shrunk to the same count; W_Q = I at the standard
/// scale (the halved scale alone); W_K = I and W_V = I instead of W_Q; and a short weight-decay
/// sweep of standard and W_Q = I, each trying the other's decay and none.
fn paper1_runs(preset: Preset) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let config = preset.config();
    let standard = ParamReport::new(&config.clone().with_variant(Standard)).total_params;
    let identity = ParamReport::new(&config.clone().with_variant(QueryIdentity)).total_params;
    let wide = mlp_matching(&config, QueryIdentity, standard);
    let narrow = mlp_matching(&config, Standard, identity);
    let standard_scale = Standard.default_scale(config.head_dim());
    let decay = |variant: AttentionVariant| TrainingConfig::for_preset(preset).for_variant(variant).weight_decay;
    let swept = |variant: AttentionVariant, other: AttentionVariant| {
        [0.0, decay(other)].map(move |wd| RunPlan { weight_decay: Some(wd), ..RunPlan::new(variant) }.named(format!("{variant} wd={wd}")))
    };
    [
        RunPlan::new(Standard).named("standard"),
        RunPlan::new(QueryIdentity).named("wq-identity"),
        RunPlan { mlp_hidden: Some(wide), ..RunPlan::new(QueryIdentity) }.named("wq-identity-wide-mlp"),
        RunPlan { mlp_hidden: Some(narrow), ..RunPlan::new(Standard) }.named("standard-narrow-mlp"),
        RunPlan { scale: Some(standard_scale), ..RunPlan::new(QueryIdentity) }.named(STANDARD_SCALE_RUN),
        RunPlan::new(KeyIdentity).named("wk-identity"),
        RunPlan::new(ValueIdentity).named("wv-identity"),
    ]
    .into_iter()
    .chain(swept(Standard, QueryIdentity))
    .chain(swept(QueryIdentity, Standard))
    .collect()
}

/// wq-identity at standard's attention scale 1/√d_k instead of its 1/(2√d_k).
const STANDARD_SCALE_RUN: &str = "wq-identity at standard scale";

/// The study of [`paper1_scale_runs`], beside the main one ("text").
const PAPER1_SCALE_STUDY: &str = "scale";

/// wk-identity at standard's scale 1/√d_k instead of its 1/(2√d_k).
const WK_STANDARD_SCALE_RUN: &str = "wk-identity at standard scale";

/// wv-identity at the identity models' scale 1/(2√d_k) instead of standard's 1/√d_k.
const WV_HALVED_SCALE_RUN: &str = "wv-identity at halved scale";

/// W_K = I and W_V = I each at the other attention scale: wk-identity takes wq-identity's halved
/// scale by the same argument, wv-identity keeps standard's, so each ablation's change from
/// standard mixes its projection with its scale until it is also seen at the other one. A study
/// of its own: its runs pair seed by seed with the main study's (same seeds, data and batch
/// shape, so the same batches; every seed is validated on the same batches), and since a study's
/// seeds are trained and kept whole, it is added without training the main study's runs again.
fn paper1_scale_runs(preset: Preset) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let d_k = preset.config().head_dim();
    vec![
        RunPlan { scale: Some(Standard.default_scale(d_k)), ..RunPlan::new(KeyIdentity) }.named(WK_STANDARD_SCALE_RUN),
        RunPlan { scale: Some(QueryIdentity.default_scale(d_k)), ..RunPlan::new(ValueIdentity) }.named(WV_HALVED_SCALE_RUN),
    ]
}

/// Paper 2's runs for a model of `n_head` heads. Head sharing is named by its ratio of key/value
/// heads to heads; GQA shares 4 heads' keys and values as the paper's 4 of 16 do, or 2 where
/// that would leave fewer than 2 key/value heads.
fn paper2_runs(n_head: usize) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let gqa = if n_head / 4 >= 2 { n_head / 4 } else { (n_head / 2).max(1) };
    let mut runs = paper2_projection_runs();
    runs.extend([
        RunPlan::new(Standard).with_kv_heads(gqa).named(format!("GQA {gqa}/{n_head}")),
        RunPlan::new(Standard).with_kv_heads(1).named(format!("MQA 1/{n_head}")),
        RunPlan::new(SharedKeyValue).with_kv_heads(gqa).named(format!("Q-K=V + GQA {gqa}/{n_head}")),
        RunPlan::new(SharedKeyValue).with_kv_heads(1).named(format!("Q-K=V + MQA 1/{n_head}")),
    ]);
    runs
}

/// Paper 2's projection variants, Q-K-V first (the reference every change is paired against).
fn paper2_projection_runs() -> Vec<RunPlan> {
    use AttentionVariant::*;
    vec![
        RunPlan::new(Standard).named("Q-K-V"),
        RunPlan::new(SharedQueryKey).named("Q=K-V"),
        RunPlan::new(SharedQueryKeyAsym).named("(Q=K-V)+"),
        RunPlan::new(SharedKeyValue).named("Q-K=V"),
        RunPlan::new(SharedAll).named("Q=K=V"),
    ]
}

fn studies(args: &ExperimentArgs) -> Result<Vec<Study>, Failure> {
    let steps = args.steps.or(args.scale.default_steps());
    let data = match (&args.data, args.scale) {
        (Some(data), _) => data.clone(),
        (None, Scale::Gpu) => {
            return Err(
                "--scale gpu trains GPT-2 small on your own data: give --data PATH (a text with --tokenizer bpe:N, or nanoGPT's train.bin)"
                    .into(),
            );
        }
        (None, _) => DataSource::Shakespeare,
    };
    let plan = |preset: Preset, data: DataSource, runs: Vec<RunPlan>| ExperimentPlan {
        preset,
        data,
        tokenizer: args.tokenizer.clone(),
        model: Default::default(),
        training: TrainingOverrides { steps, ..Default::default() },
        runs,
    };
    let preset = args.scale.preset();
    Ok(match args.paper {
        ExperimentKind::Paper1 => vec![
            Study { name: "text".into(), plan: plan(preset, data.clone(), paper1_runs(preset)) },
            Study { name: PAPER1_SCALE_STUDY.into(), plan: plan(preset, data, paper1_scale_runs(preset)) },
        ],
        ExperimentKind::Paper2Synthetic => {
            let defaults = args.scale.sweep();
            let preset = args.scale.synthetic_preset();
            let mut studies = Vec::new();
            for &task in args.tasks.as_ref().unwrap_or(&defaults.tasks) {
                for &length in args.lengths.as_ref().unwrap_or(&defaults.lengths) {
                    if length < 2 {
                        return Err(crate::usage(format!(
                            "--lengths: lists of {length} cannot be reversed or swapped: use lengths of 2 or more"
                        )));
                    }
                    // The context holds exactly the list and its answer.
                    let model = ModelOverrides { block_size: Some(2 * length), ..Default::default() };
                    let training =
                        TrainingOverrides { steps: args.steps.or(defaults.steps), batch_size: defaults.batch_size, ..Default::default() };
                    let data = DataSource::Synthetic { task, length };
                    let plan = ExperimentPlan { model, training, ..plan(preset, data, paper2_projection_runs()) };
                    studies.push(Study { name: sweep::study_name(task, length), plan });
                }
            }
            studies
        }
        // The list tasks at one short length measure nothing (every variant solves them):
        // paper2-synthetic sweeps them over the lengths where the variants part ways.
        ExperimentKind::Paper2 => {
            let model = ModelOverrides { n_head: args.scale.paper2_heads(), ..Default::default() };
            let heads = model.n_head.unwrap_or(preset.config().n_head);
            let text = ExperimentPlan { model, ..plan(preset, data, paper2_runs(heads)) };
            vec![Study { name: "text".into(), plan: text }]
        }
    })
}

/// Trains one seed of a study, resuming from the checkpoints in `dir` when all of them are
/// there, and checkpointing at every evaluation; every batch is split across `compute`'s devices.
/// Ctrl-C or SIGTERM ends the seed after the step in flight, its checkpoints written, with
/// [`Interrupted`]: the same command run again resumes from them.
fn train_seed(plan: &ExperimentPlan, compute: &Compute, dir: &Path, label: &str, interrupts: &Interrupts) -> Result<Experiment, Failure> {
    let device = &compute.home;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dataset = plan.dataset()?;
    let specs = plan.specs(&dataset)?;
    let path = |name: &str| dir.join(format!("{}.qkv", name.replace(['/', ' ', '='], "_")));
    let saved: Vec<PathBuf> = specs.iter().map(|s| path(&s.name)).filter(|p| p.exists()).collect();
    let mut experiment = if saved.len() == specs.len() {
        let runs = specs
            .iter()
            .map(|spec| Checkpoint::read(&path(&spec.name)).and_then(|c| c.into_run(&dataset, device)))
            .collect::<Result<Vec<Run>, _>>()?;
        eprintln!("{label}: resuming at step {} from {}", runs[0].step, dir.display());
        Experiment::from_runs(dataset, runs)?
    } else {
        Experiment::new(dataset, specs, device)?
    };
    experiment.spread_over(&compute.replicas);
    let data = plan.data.to_string();
    let mut session = headless_session(device);
    started_or_failed(session.start(experiment, data.clone()).block_on())?;
    crate::play::play_to_end(&mut session, |experiment, messages| {
        let mut evaluated = false;
        for message in messages {
            match message {
                Message::Stepped { eval: Some(_), .. } => evaluated = true,
                Message::Stopped { run, error } => eprintln!("{label}: {} stopped: {error}", experiment.runs[*run].spec.name),
                _ => {}
            }
        }
        let caught = interrupts.caught();
        if evaluated || experiment.is_done() {
            let losses: Vec<String> = experiment
                .runs
                .iter()
                .map(|r| format!("{} {}", r.spec.name, r.metrics.evals.last().map_or("-".into(), |e| format!("{:.4}", e.val_loss))))
                .collect();
            eprintln!("{label} step {}: val {}", experiment.step, losses.join(", "));
        }
        if evaluated || experiment.is_done() || caught.is_some() {
            for run in &experiment.runs {
                let bytes = to_bytes(run, experiment.dataset(), &data).block_on()?;
                write_atomically(&path(&run.spec.name), &bytes)?;
            }
        }
        if let Some(signal) = caught {
            let wrote = format!("{} (run the same command again to resume)", dir.display());
            return Err(Box::new(Interrupted { signal, step: experiment.step, wrote }) as Failure);
        }
        Ok::<(), Failure>(())
    })?;
    Ok(session.into_experiment().expect("trained"))
}

/// `work(0..count)` on up to `jobs` threads at once, results in index order.
fn in_parallel<T: Send>(count: usize, jobs: usize, work: impl Fn(usize) -> T + Sync + Send) -> Result<Vec<T>, Failure> {
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build().map_err(|e| format!("cannot start {jobs} job threads: {e}"))?;
    Ok(pool.install(|| (0..count).into_par_iter().map(work).collect()))
}

/// Now, to the minute, as the reports write it: "2026-11-30 09:55 UTC".
fn utc_date() -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // "2026-11-30T09:55:12Z": the date, then hours and minutes.
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// Where a study's seeds run (the invocation's settings: device, output folder) and the command
/// that ran them.
struct Trainer<'a> {
    settings: &'a Settings,
    invocation: &'a str,
    jobs: usize,
    interrupts: &'a Interrupts,
}

impl Trainer<'_> {
    /// Every seed of `study`, trained or (when finished earlier) read from `seeds/`, up to
    /// `jobs` at once; with a line of provenance each.
    fn seeds(&self, study: &Study, seeds: usize) -> Result<(Vec<Outcome>, String), Failure> {
        // Each job computes on a pool of its own, with its share of the cores: jobs sharing one
        // pool would queue for the same workers.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads_per_job = (cores / self.jobs).max(1);
        let train = |seed_index: usize| -> Result<SeedResult, Failure> {
            let seed = study.plan.seed() + seed_index as u64;
            let plan =
                ExperimentPlan { training: TrainingOverrides { seed: Some(seed), ..study.plan.training.clone() }, ..study.plan.clone() };
            let label = format!("{} seed {seed}", study.name);
            let results = SeedResult::path(&self.settings.out, &study.name, seed);
            if let Some(saved) = SeedResult::load(&results, &plan)? {
                eprintln!("{label}: finished earlier, reporting {}", results.display());
                return Ok(saved);
            }
            let dir = self.settings.out.join("checkpoints").join(&study.name).join(format!("seed-{seed}"));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads_per_job)
                .build()
                .map_err(|e| format!("cannot start {threads_per_job} compute threads: {e}"))?;
            let experiment = pool.install(|| train_seed(&plan, &self.settings.compute, &dir, &label, self.interrupts))?;
            let outcomes: Vec<Outcome> =
                experiment.runs.iter().map(|r| Outcome::of(&study.name, seed, r, experiment.val_batches())).collect();
            let result = SeedResult {
                plan,
                finished: utc_date(),
                compute: self.settings.compute.describe(),
                command: self.invocation.to_string(),
                outcomes,
            };
            result.save(&results)?;
            Ok(result)
        };
        let mut outcomes = Vec::new();
        let mut provenance = String::new();
        for trained in in_parallel(seeds, self.jobs, train)? {
            let result = trained?;
            provenance += &format!(
                "- {} seed {}: finished {} on {} after {:.0} s of training (its runs' clocks), by `{}`\n",
                study.name,
                result.plan.seed(),
                result.finished,
                result.compute,
                result.outcomes.iter().map(|o| o.summary.wall_secs).sum::<f64>(),
                result.command
            );
            outcomes.extend(result.outcomes);
        }
        Ok((outcomes, provenance))
    }
}

/// results.csv: one row per run and seed.
fn results_csv(outcomes: &[Outcome]) -> String {
    let header = [
        "study",
        "run",
        "seed",
        "variant",
        "kv_heads",
        "weight_decay",
        "total_params",
        "kv_cache_bytes_per_token",
        "final_val_loss",
        "best_val_loss",
        "accuracy",
        "status",
    ];
    let rows = outcomes.iter().map(|o| {
        [
            o.study.clone(),
            o.summary.name.clone(),
            o.seed.to_string(),
            o.summary.variant.to_string(),
            o.kv_heads.map_or(String::new(), |k| k.to_string()),
            o.weight_decay.to_string(),
            o.summary.total_params.to_string(),
            o.summary.kv_cache_bytes_per_token.to_string(),
            csv::optional(o.summary.final_val_loss),
            csv::optional(o.summary.best_val_loss),
            csv::optional(o.summary.accuracy),
            o.summary.status.to_string(),
        ]
    });
    csv::table(&header, rows)
}

/// loss-STUDY.svg for each study (its first seed's curves); returns the report's links to them.
fn loss_plots(studies: &[Study], outcomes: &[Outcome], out: &Path) -> Result<String, Failure> {
    let mut plots = String::new();
    for study in studies {
        let first_seed = study.plan.seed();
        let curves: Vec<LossCurve> =
            outcomes.iter().filter(|o| o.study == study.name && o.seed == first_seed).map(|o| o.curve.clone()).collect();
        let file = format!("loss-{}.svg", study.name);
        crate::report::loss_svg(&curves, &out.join(&file))?;
        plots += &format!("\n![{} loss curves, first seed]({file})\n", study.name);
    }
    Ok(plots)
}

impl ExperimentKind {
    /// The name on the command line (clap's, from the variant's) and in the report.
    fn name(self) -> String {
        self.to_possible_value().map(|value| value.get_name().to_string()).unwrap_or_default()
    }
}

/// What an invocation settles before training: its arguments checked, defaults filled in.
struct Settings {
    seeds: usize,
    compute: Compute,
    scale: String,
    out: PathBuf,
}

impl Settings {
    fn of(args: &ExperimentArgs) -> Result<Self, Failure> {
        let seeds = args.seeds.unwrap_or(if args.scale == Scale::Gpu { 1 } else { 3 });
        if seeds == 0 {
            return Err(crate::usage("--seeds must be at least 1"));
        }
        if args.jobs == 0 {
            return Err(crate::usage("--jobs must be at least 1"));
        }
        if args.paper != ExperimentKind::Paper2Synthetic && (args.lengths.is_some() || args.tasks.is_some()) {
            return Err(crate::usage(
                "--lengths and --tasks choose what paper2-synthetic sweeps: use them with `qkv experiment paper2-synthetic`",
            ));
        }
        let backend = args.backend.unwrap_or(if args.scale == Scale::Gpu { Backend::Wgpu } else { Backend::Flex });
        let compute = args.spread.compute(backend)?;
        let scale = format!("{:?}", args.scale).to_lowercase();
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/{}-{scale}", args.paper.name())));
        Ok(Self { seeds, compute, scale, out })
    }
}

/// What was trained, for the report.
struct Trained<'a> {
    studies: &'a [Study],
    outcomes: &'a [Outcome],
    /// A line per seed: when, where and by which command it was trained.
    provenance: &'a str,
    /// Seconds this invocation ran, and seconds of training by the runs' own clocks.
    wall_secs: f64,
    training_secs: f64,
}

/// report.md: how the study was made, the paper's findings, the plots, the diagnostics.
fn report_markdown(args: &ExperimentArgs, invocation: &str, settings: &Settings, trained: &Trained, body: &str, plots: &str) -> String {
    let Trained { studies, outcomes, provenance, wall_secs, training_secs } = trained;
    let (paper, scale, compute, seeds) = (args.paper.name(), &settings.scale, settings.compute.describe(), settings.seeds);
    let preset = studies[0].plan.preset;
    let diagnostics = diagnostics_section(outcomes);
    let mut heads = studies[0].plan.model.n_head.map_or(String::new(), |n| {
        format!(" with {n} heads (d_k {}) so that GQA can share key/value heads 4 to 1 as paper 2 does", preset.config().n_embd / n)
    });
    if args.paper == ExperimentKind::Paper2Synthetic {
        let batch = studies[0].plan.training.batch_size.unwrap_or(qkv_train::TrainingConfig::for_preset(preset).batch_size);
        heads += &format!(" with a context of 2L for lists of L, batches of {batch} lists");
    }
    format!(
        "# QKV Lab: {paper} at {scale} scale\n\n\
         - command: `{invocation}`\n- date: {}\n- backend: {compute}\n- wall time: {wall_secs:.0} s this invocation (finished seeds are reported from seeds/, not trained again); {training_secs:.0} s of training in all (the runs' own clocks, across resumes)\n\
         - model: {} ({}){heads}, {seeds} seeds; every run of a seed trains on the same batches, and every seed is validated on the same batches\n\n\
         Losses are mean ± standard deviation over seeds of each run's validation loss.\n\n{body}\n{plots}\n{diagnostics}\
         ## Seeds\n\nEach seed's results are in `seeds/`; a rerun reports a finished seed from there.\n\n{provenance}",
        utc_date(),
        preset.name(),
        preset.description(),
    )
}

/// `qkv experiment`: every study's seeds trained (or read back from an earlier invocation), then
/// results.csv, the loss plots and report.md written.
pub fn run(args: &ExperimentArgs, invocation: &str) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let settings = Settings::of(args)?;
    let studies = studies(args)?;
    let out = &settings.out;
    let interrupts = Interrupts::catch()?;
    let trainer = Trainer { settings: &settings, invocation, jobs: args.jobs, interrupts: &interrupts };
    let mut outcomes = Vec::new();
    let mut provenance = String::new();
    for study in &studies {
        let (study_outcomes, study_provenance) = trainer.seeds(study, settings.seeds)?;
        outcomes.extend(study_outcomes);
        provenance += &study_provenance;
    }
    let trained = Trained {
        studies: &studies,
        outcomes: &outcomes,
        provenance: &provenance,
        wall_secs: started.elapsed().as_secs_f64(),
        // The runs' own clocks, which survive resumes (this invocation may have started midway).
        training_secs: outcomes.iter().map(|o| o.summary.wall_secs).sum(),
    };
    let write = |name: &str, text: &str| {
        std::fs::write(out.join(name), text).map_err(|e| format!("cannot write {}: {e}", out.join(name).display()))
    };
    write("results.csv", &results_csv(&outcomes))?;
    let plots = loss_plots(&studies, &outcomes, out)?;
    let body = match args.paper {
        ExperimentKind::Paper1 => paper1_report(&outcomes),
        ExperimentKind::Paper2 => paper2_report(&outcomes, &studies) + &paper2_against_paper(&outcomes),
        ExperimentKind::Paper2Synthetic => sweep::sweep_report(&outcomes, &studies) + &sweep::accuracy_plots(&outcomes, &studies, out)?,
    };
    write("report.md", &report_markdown(args, invocation, &settings, &trained, &body, &plots))?;
    println!("{body}");
    println!("wrote {}/{{report.md, results.csv, loss-*.svg, checkpoints/}}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matched_mlp_widths_balance_the_parameter_counts() {
        let runs = paper1_runs(Preset::Gpt2Small);
        let config = Preset::Gpt2Small.config();
        let params = |run: &RunPlan| {
            let mut c = config.clone().with_variant(run.variant);
            c.mlp_hidden = run.mlp_hidden.unwrap_or(c.mlp_hidden);
            ParamReport::new(&c).total_params
        };
        // GPT-2 small: the reallocated MLP is 3072 + 768/2 wide, as in paper 1.
        assert_eq!(runs[2].mlp_hidden, Some(3456));
        assert_eq!(params(&runs[2]), params(&runs[0]));
        assert_eq!(params(&runs[3]), params(&runs[1]));
        // The ablations: the halved scale undone, and the identity moved to the key or the value.
        assert_eq!(runs[4].scale, Some(1.0 / 8.0));
        assert_eq!((runs[5].variant, runs[6].variant), (AttentionVariant::KeyIdentity, AttentionVariant::ValueIdentity));
        // Each of standard and wq-identity without decay and with the other's.
        let sweep: Vec<(&str, Option<f64>)> = runs[7..].iter().map(|r| (r.name.as_str(), r.weight_decay)).collect();
        assert_eq!(
            sweep,
            [
                ("standard wd=0", Some(0.0)),
                ("standard wd=0.03125", Some(0.03125)),
                ("wq-identity wd=0", Some(0.0)),
                ("wq-identity wd=0.1", Some(0.1))
            ]
        );
        // The identities of W_K and W_V each at the other scale (GPT-2 small: d_k 64).
        let other_scales: Vec<_> = paper1_scale_runs(Preset::Gpt2Small).iter().map(|r| (r.variant, r.scale)).collect();
        assert_eq!(other_scales, [(AttentionVariant::KeyIdentity, Some(1.0 / 8.0)), (AttentionVariant::ValueIdentity, Some(1.0 / 16.0))]);
    }

    /// `qkv experiment PAPER` at laptop scale with every default.
    fn laptop_args(paper: ExperimentKind) -> ExperimentArgs {
        ExperimentArgs {
            paper,
            scale: Scale::Laptop,
            seeds: None,
            steps: None,
            data: None,
            tokenizer: TokenizerKind::Char,
            backend: None,
            spread: SpreadArgs::default(),
            out: None,
            lengths: None,
            tasks: None,
            jobs: 1,
        }
    }

    #[test]
    fn paper2_at_laptop_scale_trains_eight_heads_on_text_with_the_papers_sharing_ratios() {
        let studies = studies(&laptop_args(ExperimentKind::Paper2)).unwrap();
        assert_eq!(studies.len(), 1, "the list tasks are paper2-synthetic's");
        let text = &studies[0];
        assert_eq!((text.name.as_str(), &text.plan.data), ("text", &DataSource::Shakespeare));
        assert_eq!(text.plan.model.n_head, Some(8));
        let names: Vec<&str> = text.plan.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Q-K-V", "Q=K-V", "(Q=K-V)+", "Q-K=V", "Q=K=V", "GQA 2/8", "MQA 1/8", "Q-K=V + GQA 2/8", "Q-K=V + MQA 1/8"]);
    }

    #[test]
    fn the_synthetic_sweep_gives_each_task_and_length_its_study_and_context() {
        let args = ExperimentArgs {
            lengths: Some(vec![16, 128]),
            tasks: Some(vec![SyntheticTask::Reverse]),
            ..laptop_args(ExperimentKind::Paper2Synthetic)
        };
        let sweep = studies(&args).unwrap();
        let names: Vec<&str> = sweep.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["reverse-L16", "reverse-L128"]);
        assert_eq!(sweep[1].plan.model.block_size, Some(256));
        assert_eq!(sweep[1].plan.data, DataSource::Synthetic { task: SyntheticTask::Reverse, length: 128 });
        assert_eq!((sweep[0].plan.training.steps, sweep[0].plan.training.batch_size), (Some(300), Some(16)));
        assert_eq!(sweep[0].plan.runs.len(), 5);

        let too_short = ExperimentArgs { lengths: Some(vec![1]), ..args };
        let error = studies(&too_short).err().unwrap().to_string();
        assert!(error.contains("lengths of 2 or more"), "{error}");
        let paper1 =
            ExperimentArgs { paper: ExperimentKind::Paper1, scale: Scale::Tiny, lengths: Some(vec![16]), tasks: None, ..too_short };
        let error = run(&paper1, "qkv experiment paper1 --lengths 16").unwrap_err().to_string();
        assert!(error.contains("paper2-synthetic"), "{error}");
    }

    #[test]
    fn parallel_jobs_do_every_index_once_in_order() {
        for jobs in [1, 2, 5] {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let squares = in_parallel(4, jobs, |i| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i * i
            });
            assert_eq!(squares.unwrap(), vec![0, 1, 4, 9], "jobs {jobs}");
            assert_eq!(calls.into_inner(), 4, "jobs {jobs}");
        }
    }

    #[test]
    fn a_finished_seed_is_reported_again_without_its_checkpoints() {
        let out = std::env::temp_dir().join(format!("qkv-experiment-seeds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let args = |steps: usize| ExperimentArgs {
            paper: ExperimentKind::Paper1,
            scale: Scale::Tiny,
            seeds: Some(1),
            steps: Some(steps),
            data: None,
            tokenizer: TokenizerKind::Char,
            backend: Some(Backend::Flex),
            spread: SpreadArgs::default(),
            out: Some(out.clone()),
            lengths: None,
            tasks: None,
            jobs: 1,
        };
        run(&args(2), "qkv experiment paper1 --scale tiny --seeds 1 --steps 2").unwrap();
        let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
        assert_eq!(results.lines().count(), 1 + 11 + 2, "{results}");
        let seed_file = SeedResult::path(&out, "text", qkv_train::TrainingConfig::for_preset(Preset::Classroom).seed);
        assert!(seed_file.exists());

        // The checkpoints are gone (cleaned up, or another machine): the report comes back the same.
        std::fs::remove_dir_all(out.join("checkpoints")).unwrap();
        std::fs::remove_file(out.join("results.csv")).unwrap();
        run(&args(2), "again").unwrap();
        assert_eq!(std::fs::read_to_string(out.join("results.csv")).unwrap(), results);
        assert!(!out.join("checkpoints").exists(), "the finished seed trained again");
        assert!(std::fs::read_to_string(out.join("report.md")).unwrap().contains("wq-identity"));

        // Another plan is not mixed with it, and a damaged file is named, not trusted.
        let error = run(&args(3), "other steps").unwrap_err().to_string();
        assert!(error.contains("another plan") && error.contains("seed-"), "{error}");
        std::fs::write(&seed_file, "{ not json").unwrap();
        let error = run(&args(2), "damaged").unwrap_err().to_string();
        assert!(error.contains("delete it to train that seed again"), "{error}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn dates_are_civil() {
        let date = utc_date();
        let b = date.as_bytes();
        assert!(date.starts_with("20") && date.ends_with(" UTC") && date.len() == 20, "{date}");
        assert!(b[4] == b'-' && b[7] == b'-' && b[10] == b' ' && b[13] == b':', "{date}");
    }
}
