//! `qkv train` and `qkv compare`: train variants on identical batches with progress bars, then
//! write metrics, summaries, checkpoints, and for a comparison a report with a loss plot.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use qkv_model::{AttentionVariant, Preset};
use qkv_session::{CheckpointFile, Command, Message, Session};
use qkv_train::checkpoint::{to_bytes, write_atomically};
use qkv_train::lesson_plans::lesson_plan;
use qkv_train::plan::{ExperimentPlan, RunPlan};
use qkv_train::{DataSource, Experiment, Run, RunEvent, TokenizerKind};

use crate::Failure;
use crate::compute::{Backend, Compute, SpreadArgs};
use crate::interrupt::{Caught, Interrupted, Interrupts, Signal};
use crate::report;
use crate::summary::RunSummary;
use pollster::FutureExt as _;
use qkv_train::folder_lock::FolderLock;

/// Settings shared by `train` and `compare`.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Architecture and recipe preset (not with `compare --lesson`, whose lesson sets it).
    #[arg(long, required = true)]
    pub preset: Option<Preset>,
    /// Data: shakespeare (embedded), synthetic:TASK[:L][:encoder] (copy, reverse, sort, swap, sub, rotate; :encoder
    /// reads the list with attention both ways and answers at every position), digits (embedded 8×8 handwritten digits,
    /// for a vision preset), relations (generated images: where a bright square is from a dim one), mnist:DIR, fashion-mnist:DIR or cifar10:DIR (their published files in DIR, unpacked; the
    /// test files are held out), a path to a UTF-8 text file, or nanoGPT's token files (path/to/train.bin, uint16
    /// ids, val.bin beside it).
    #[arg(long, default_value = "shakespeare")]
    pub data: DataSource,
    /// Tokenizer: char, bpe:N (byte-level BPE with N tokens, trained on the text), or a Hugging Face tokenizer.json
    /// (for token files: what their ids mean; without one their ids are the vocabulary).
    #[arg(long, default_value = "char")]
    pub tokenizer: TokenizerKind,
    /// Optimiser steps [default: the preset's recipe].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Rows per batch [default: the preset's recipe].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Peak learning rate; the cosine ends at a tenth of it [default: the preset's recipe].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Weight decay for every run [default: 0.1, and 2^-5 for wq-identity].
    #[arg(long)]
    pub wd: Option<f64>,
    /// Key/value heads (GQA/MQA) for every run.
    #[arg(long)]
    pub kv_heads: Option<usize>,
    /// Seed for initialisation and batches.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Dropout rate in [0, 1) [default: the preset's].
    #[arg(long)]
    pub dropout: Option<f64>,
    /// Images only: move each training image by up to this many pixels each way as it is drawn (0: as they are)
    /// [default: the preset's].
    #[arg(long)]
    pub shift: Option<usize>,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Compute backend: flex (CPU) or wgpu (GPU; lavapipe on a machine without one); cuda, rocm, metal and vulkan when
    /// qkv was built with that feature.
    #[arg(long, default_value = "flex")]
    pub backend: Backend,
    #[command(flatten)]
    pub spread: SpreadArgs,
    /// Output folder.
    #[arg(long, default_value = "runs/latest")]
    pub out: PathBuf,
}

/// The model's shape, where it differs from the preset's: the app's "model" row, on the command
/// line. A shape that cannot be (heads that do not divide the width) is refused before anything
/// is allocated, with the fix.
#[derive(Args, Debug, Clone, Default)]
pub struct ShapeArgs {
    /// Transformer blocks [default: the preset's].
    #[arg(long)]
    pub layers: Option<usize>,
    /// Attention heads per block [default: the preset's].
    #[arg(long)]
    pub heads: Option<usize>,
    /// Width of the residual stream (n_embd); the MLP keeps the preset's ratio to it [default: the
    /// preset's].
    #[arg(long)]
    pub width: Option<usize>,
    /// Context length in tokens (block_size) [default: the preset's].
    #[arg(long)]
    pub context: Option<usize>,
    /// Vision presets: pixels each patch's token also reads beyond its patch on every side (0: disjoint patches; 1:
    /// each 2×2 patch's token reads the 4×4 window around it) [default: the preset's].
    #[arg(long)]
    pub overlap: Option<usize>,
}

impl TrainArgs {
    /// The experiment these flags describe: one run per variant, the flags shared by all.
    pub fn plan(&self, variants: &[AttentionVariant]) -> ExperimentPlan {
        let runs = variants.iter().map(|&variant| RunPlan::new(variant).named(variant.name())).collect();
        self.laid_over(ExperimentPlan {
            preset: self.preset.expect("clap asks for --preset wherever no lesson sets it"),
            data: self.data.clone(),
            tokenizer: self.tokenizer.clone(),
            runs,
            ..ExperimentPlan::default()
        })
    }

    /// `plan` with each setting given on the command line laid over its own (for a lesson's
    /// setup: `qkv compare --lesson 3 --steps 100`); what the flags leave out stays as it was.
    pub fn laid_over(&self, mut plan: ExperimentPlan) -> ExperimentPlan {
        let model = &mut plan.model;
        model.n_layer = self.shape.layers.or(model.n_layer);
        model.n_head = self.shape.heads.or(model.n_head);
        model.n_embd = self.shape.width.or(model.n_embd);
        model.block_size = self.shape.context.or(model.block_size);
        model.patch_overlap = self.shape.overlap.or(model.patch_overlap);
        model.dropout = self.dropout.or(model.dropout);
        let training = &mut plan.training;
        training.steps = self.steps.or(training.steps);
        training.batch_size = self.batch.or(training.batch_size);
        training.lr = self.lr.or(training.lr);
        training.weight_decay = self.wd.or(training.weight_decay);
        training.seed = self.seed.or(training.seed);
        training.shift = self.shift.or(training.shift);
        if let Some(kv_heads) = self.kv_heads {
            plan.runs.iter_mut().for_each(|run| run.kv_heads = Some(kv_heads));
        }
        plan
    }
}

fn progress_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {msg}").expect("valid template").progress_chars("=> ")
}

/// What a `train` or `compare` trained: the experiment, in how many seconds, and the signal that
/// stopped it early, if one did.
pub struct Trained {
    pub experiment: Experiment,
    pub wall: f64,
    pub stopped_by: Option<Signal>,
}

impl Trained {
    /// Ok once written, where training ran to its end; else the interruption, saying where the
    /// run so far was written (`wrote`).
    fn outcome(&self, wrote: String) -> Result<(), Failure> {
        match self.stopped_by {
            None => Ok(()),
            Some(signal) => Err(Box::new(Interrupted { signal, step: self.experiment.step, wrote })),
        }
    }
}

/// Trains `plan`'s runs on the compute `args` name, writing the runs so far into `to` at every
/// evaluation (a run killed outright loses at most the steps since) and stopping early, after the
/// step in flight, on Ctrl-C or SIGTERM.
pub fn train_into(args: &TrainArgs, plan: &ExperimentPlan, to: &Outputs) -> Result<Trained, Failure> {
    let interrupts = Interrupts::catch()?;
    let save = |experiment: &Experiment| write_runs(to, experiment);
    train_plan(plan, &args.spread.compute(args.backend)?, &interrupts, save)
}

/// Trains every run of `plan` on identical batches with progress bars (plain lines in logs), each
/// run at `compute`'s home with its batches split across the replicas too; `save` after every
/// evaluation, and a stop after the step in flight once `interrupts` caught a signal.
pub fn train_plan(
    plan: &ExperimentPlan,
    compute: &Compute,
    interrupts: &Interrupts,
    save: impl Fn(&Experiment) -> Result<(), Failure>,
) -> Result<Trained, Failure> {
    let device = &compute.home;
    let started = std::time::Instant::now();
    if let TokenizerKind::Bpe { .. } = plan.tokenizer {
        eprintln!("training the {} tokenizer on the training split…", plan.tokenizer);
    }
    let mut session = headless_session(compute);
    let mut experiment = plan.experiment(device)?;
    if let Some(line) = compute.devices_line() {
        eprintln!("{line}");
    }
    experiment.spread_over(&compute.replicas);
    started_or_failed(session.start(experiment, plan.data.clone()).block_on())?;
    play(session, started, interrupts, save)
}

/// Trains the session's experiment to its end, or until `interrupts` caught a signal, with
/// progress bars; `save` after every evaluation.
fn play(
    mut session: Session,
    started: std::time::Instant,
    interrupts: &Interrupts,
    save: impl Fn(&Experiment) -> Result<(), Failure>,
) -> Result<Trained, Failure> {
    let plain_log = !std::io::stderr().is_terminal();
    let bars = MultiProgress::new();
    let experiment = session.experiment().expect("just started");
    let runs: Vec<ProgressBar> = experiment
        .runs
        .iter()
        .map(|run| {
            let bar = bars.add(ProgressBar::new(run.spec.training.steps as u64));
            // A resumed run starts where it stood.
            bar.set_position(run.step as u64);
            bar.set_style(progress_style());
            bar.set_prefix(run.spec.name.clone());
            bar
        })
        .collect();
    let played = crate::play::play_to_end(&mut session, |experiment, messages| {
        // Once every run is done the caller writes every output anyway.
        let evaluated =
            messages.iter().any(|m| matches!(m, Message::Run(RunEvent::Stepped { eval: Some(_), .. }) | Message::Evaluated { .. }));
        if evaluated && !experiment.is_done() {
            save(experiment)?;
        }
        if let Some(signal) = interrupts.caught() {
            return Err(Box::new(Caught(signal)) as Failure);
        }
        for message in messages {
            match message {
                Message::Run(RunEvent::Stepped { run, record, eval }) => {
                    let Some(at) = experiment.position(*run) else { continue };
                    let bar = &runs[at];
                    bar.set_position(record.step as u64);
                    let val = experiment.runs[at].metrics.evals.last().map(|e| e.val_loss).unwrap_or(f64::NAN);
                    bar.set_message(format!("loss {:.4}  val {:.4}  {:.0} tok/s", record.train_loss, val, record.tokens_per_sec));
                    if let Some(accuracy) = eval.as_ref().and_then(|e| e.accuracy) {
                        bar.set_message(format!("loss {:.4}  val {val:.4}  acc {:.2}%", record.train_loss, 100.0 * accuracy));
                    }
                    // Progress bars only draw on a terminal; logs get a line per evaluation.
                    if plain_log && eval.is_some() {
                        eprintln!(
                            "{} step {}/{}: {}",
                            experiment.runs[at].spec.name,
                            record.step,
                            experiment.runs[at].spec.training.steps,
                            bar.message()
                        );
                    }
                }
                Message::Run(RunEvent::Stopped { run, error }) => {
                    let Some(at) = experiment.position(*run) else { continue };
                    if plain_log {
                        eprintln!("{} stopped: {error}", experiment.runs[at].spec.name);
                    }
                    runs[at].abandon_with_message(error.to_string());
                }
                _ => {}
            }
        }
        Ok::<(), Failure>(())
    });
    let stopped_by = match played {
        Ok(()) => None,
        Err(failure) => Some(failure.downcast::<Caught>()?.0),
    };
    for bar in &runs {
        if stopped_by.is_some() { bar.abandon() } else { bar.finish() }
    }
    let experiment = session.into_experiment().expect("trained");
    Ok(Trained { experiment, wall: started.elapsed().as_secs_f64(), stopped_by })
}

/// A session on `compute` for a driver without a screen: no attention maps.
pub fn headless_session(compute: &Compute) -> Session {
    let mut session = Session::new(compute.home.clone(), compute.id.clone());
    session.handle(Command::AttentionEvery(0)).block_on();
    session
}

/// The messages of a start, or the first run that could not be evaluated.
pub fn started_or_failed(messages: Vec<Message>) -> Result<(), Failure> {
    match messages.into_iter().find_map(|m| if let Message::Run(RunEvent::Stopped { error, .. }) = m { Some(error) } else { None }) {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

/// Where a `train` (one run, `checkpoint.qkv`) or `compare` (a checkpoint per run, by name)
/// writes, and the data source its checkpoints name.
pub struct Outputs {
    pub out: PathBuf,
    pub data: String,
    pub single: bool,
}

impl Outputs {
    fn checkpoint(&self, run: &Run) -> PathBuf {
        if self.single { self.out.join(SINGLE_CHECKPOINT) } else { self.out.join(format!("{}.qkv", run.spec.name)) }
    }
}

/// The checkpoint of a `train` folder.
const SINGLE_CHECKPOINT: &str = "checkpoint.qkv";

/// metrics.csv and one checkpoint per run, each written whole or not at all: what training writes
/// at every evaluation.
fn write_runs(to: &Outputs, experiment: &Experiment) -> Result<(), Failure> {
    let out = &to.out;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    write_atomically(&out.join("metrics.csv"), qkv_train::csv::metrics_csv(&experiment.runs).as_bytes())?;
    for run in &experiment.runs {
        write_atomically(&to.checkpoint(run), &to_bytes(run, experiment.dataset(), &to.data).block_on()?)?;
    }
    Ok(())
}

/// metrics.csv, summary.json and one checkpoint per run; returns the summaries.
pub fn write_outputs(to: &Outputs, experiment: &Experiment) -> Result<Vec<RunSummary>, Failure> {
    write_runs(to, experiment)?;
    let test = experiment.test_batches();
    let summaries: Vec<RunSummary> =
        experiment.runs.iter().map(|run| RunSummary::of(run, experiment.val_batches(), test.as_deref())).collect();
    let summary_json = if to.single { serde_json::to_string_pretty(&summaries[0]) } else { serde_json::to_string_pretty(&summaries) }?;
    write_atomically(&to.out.join("summary.json"), summary_json.as_bytes())?;
    Ok(summaries)
}

/// `qkv train`.
#[derive(Args, Debug)]
pub struct TrainCommand {
    #[command(flatten)]
    pub args: TrainArgs,
    /// Attention variant.
    #[arg(long, default_value = "standard")]
    pub variant: AttentionVariant,
}

pub fn run_train(command: &TrainCommand) -> Result<(), Failure> {
    let to = Outputs { out: command.args.out.clone(), data: command.args.data.to_string(), single: true };
    let _lock = FolderLock::take(&to.out)?;
    let trained = train_into(&command.args, &command.args.plan(&[command.variant]), &to)?;
    finish_train(&trained, &to)
}

/// Writes a `train` run's outputs and says what it trained.
fn finish_train(trained: &Trained, to: &Outputs) -> Result<(), Failure> {
    let (experiment, wall) = (&trained.experiment, trained.wall);
    let summaries = write_outputs(to, experiment)?;
    let s = &summaries[0];
    // A ViT's "tokens" are its images: one answer each.
    let (unit, accuracy) =
        if experiment.runs[0].spec.model.is_vision() { ("images", "validation accuracy") } else { ("tokens", "accuracy") };
    println!(
        "{}: {} steps, {} {unit} in {wall:.1} s ({:.0} {unit}/s); final train loss {}, final val loss {}, best val loss {}{}{}",
        s.name,
        s.steps,
        s.tokens,
        s.tokens_per_sec,
        report::fmt_loss(s.final_train_loss),
        report::fmt_loss(s.final_val_loss),
        report::fmt_loss(s.best_val_loss),
        s.accuracy.map(|a| format!(", {accuracy} {:.2}%", 100.0 * a)).unwrap_or_default(),
        s.test_accuracy.map(|a| format!(", test accuracy {:.2}%", 100.0 * a)).unwrap_or_default()
    );
    let wrote = format!("{}/{{metrics.csv, summary.json, checkpoint.qkv}}", to.out.display());
    println!("wrote {wrote}");
    trained.outcome(wrote)
}

/// `qkv compare`.
#[derive(Args, Debug)]
#[command(mut_arg("preset", |preset| preset.required(false).required_unless_present("lesson")))]
pub struct CompareCommand {
    #[command(flatten)]
    pub args: TrainArgs,
    /// Comma-separated variants, e.g. standard,wq-identity.
    #[arg(long, value_delimiter = ',', required_unless_present = "lesson")]
    pub variants: Vec<AttentionVariant>,
    /// Train lesson N's setup (1-5, as the app numbers its lessons) headless: its preset, data,
    /// model and runs; --steps, --seed, --batch and the other training and shape flags still
    /// apply on top.
    #[arg(long, conflicts_with_all = ["preset", "variants", "data", "tokenizer", "kv_heads"])]
    pub lesson: Option<usize>,
}

impl CompareCommand {
    /// The experiment to train: the lesson's, or one run per variant.
    fn plan(&self) -> Result<ExperimentPlan, Failure> {
        match self.lesson {
            Some(number) => Ok(self.args.laid_over(lesson_plan(number)?)),
            None => Ok(self.args.plan(&self.variants)),
        }
    }
}

pub fn run_compare(command: &CompareCommand, invocation: &str) -> Result<(), Failure> {
    let plan = command.plan()?;
    let to = Outputs { out: command.args.out.clone(), data: plan.data.to_string(), single: false };
    let _lock = FolderLock::take(&to.out)?;
    let trained = train_into(&command.args, &plan, &to)?;
    finish_compare(&trained, &to, invocation, command.args.backend)
}

/// Writes a `compare`'s outputs and report, and prints its table.
fn finish_compare(trained: &Trained, to: &Outputs, invocation: &str, backend: Backend) -> Result<(), Failure> {
    let (experiment, wall) = (&trained.experiment, trained.wall);
    let summaries = write_outputs(to, experiment)?;
    let out = &to.out;
    let context = report::ReportContext {
        command: invocation.to_string(),
        backend: backend.name().to_string(),
        data: to.data.clone(),
        wall_secs: wall,
        images: experiment.runs[0].spec.model.is_vision(),
    };
    let markdown = report::report_markdown(&summaries, &context);
    std::fs::write(out.join("report.md"), &markdown).map_err(|e| format!("cannot write report.md: {e}"))?;
    report::loss_svg(&experiment.runs.iter().map(report::LossCurve::of).collect::<Vec<_>>(), &out.join("loss.svg"))?;
    print!("{}", report::summary_table(&summaries, context.images));
    let wrote = format!("{}/{{report.md, metrics.csv, summary.json, loss.svg, *.qkv}}", out.display());
    println!("wrote {wrote}");
    trained.outcome(wrote)
}

/// `qkv resume`.
#[derive(Args, Debug)]
pub struct ResumeCommand {
    /// The folder of a `qkv train` or `qkv compare` that was stopped (or killed: it goes on from
    /// the last evaluation).
    pub folder: PathBuf,
    /// Compute backend to go on with.
    #[arg(long, default_value = "flex")]
    pub backend: Backend,
    #[command(flatten)]
    pub spread: SpreadArgs,
}

/// Continues a stopped `train` or `compare` from its checkpoints to the end of its recipe, with
/// the batches and dropout masks an uninterrupted run would have had, into the same folder.
pub fn run_resume(command: &ResumeCommand, invocation: &str) -> Result<(), Failure> {
    let folder = &command.folder;
    let (files, single) = checkpoints_in(folder)?;
    let _lock = FolderLock::take(folder)?;
    let compute = command.spread.compute(command.backend)?;
    let interrupts = Interrupts::catch()?;
    let started = std::time::Instant::now();
    let mut session = headless_session(&compute);
    let answers = session.handle(Command::Import { files, upload: None }).block_on();
    if let Some(failed) = answers.iter().find_map(|m| if let Message::Failed(why) = m { Some(why.clone()) } else { None }) {
        return Err(format!("cannot resume {}: {failed}", folder.display()).into());
    }
    // The data source as the checkpoints name it, which the ones written from here name too.
    let data = answers.iter().find_map(|m| if let Message::Loaded { data, .. } = m { Some(data.to_string()) } else { None });
    let to = Outputs { out: folder.clone(), data: data.unwrap_or_default(), single };
    started_or_failed(answers)?;
    let step = session.experiment().map_or(0, |e| e.step);
    // A folder whose runs have all ended is left as it is: training nothing would rewrite its
    // outputs and report a rate over no time.
    if session.experiment().is_some_and(Experiment::is_done) {
        eprintln!("{}: every run had already ended (step {step}): nothing to resume; its outputs are as they were", folder.display());
        return Ok(());
    }
    eprintln!("resuming {} at step {step}", folder.display());
    let trained = play(session, started, &interrupts, |experiment: &Experiment| write_runs(&to, experiment))?;
    if single { finish_train(&trained, &to) } else { finish_compare(&trained, &to, invocation, command.backend) }
}

/// The checkpoints of a `train` folder (its one) or a `compare` folder (one per run, in the
/// runs' order as its summary lists them), and whether it is a `train` folder.
fn checkpoints_in(folder: &Path) -> Result<(Vec<CheckpointFile>, bool), Failure> {
    let read = |path: PathBuf| -> Result<CheckpointFile, Failure> {
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(CheckpointFile { name: path.display().to_string(), bytes })
    };
    let single = folder.join(SINGLE_CHECKPOINT);
    if single.exists() {
        return Ok((vec![read(single)?], true));
    }
    let names: Vec<String> = std::fs::read_to_string(folder.join("summary.json"))
        .ok()
        .and_then(|json| serde_json::from_str::<Vec<RunSummary>>(&json).ok())
        .map(|summaries| summaries.into_iter().map(|s| s.name).collect())
        .unwrap_or_default();
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(folder) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "qkv")).collect(),
        Err(e) => return Err(crate::usage(format!("cannot read the folder {}: {e}", folder.display()))),
    };
    // The summary's order where it has the run, else by name.
    let rank = |path: &PathBuf| {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        (names.iter().position(|n| *n == stem).unwrap_or(usize::MAX), stem)
    };
    paths.sort_by_key(rank);
    if paths.is_empty() {
        return Err(crate::usage(format!(
            "{} holds no checkpoint to resume: give the --out folder of a `qkv train` or `qkv compare`",
            folder.display()
        )));
    }
    Ok((paths.into_iter().map(read).collect::<Result<_, _>>()?, false))
}
