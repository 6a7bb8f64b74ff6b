//! Training a study's seeds: each seed resumable from its checkpoints, seeds up to `--jobs` at
//! once, finished seeds read back from `seeds/`.

use std::path::{Path, PathBuf};

use qkv_model::random::INITIAL_WEIGHTS_SCHEME;
use qkv_session::Message;
use qkv_train::checkpoint::{Checkpoint, to_bytes, write_atomically};
use qkv_train::plan::{ExperimentPlan, TrainingOverrides};
use qkv_train::{Experiment, Run, RunEvent};

use super::Settings;
use super::catalogue::Study;
use super::output::utc_date;
use super::seeds::{Outcome, SeedResult};
use crate::Failure;
use crate::compute::Compute;
use crate::interrupt::{Interrupted, Interrupts};
use crate::train::{headless_session, started_or_failed};
use pollster::FutureExt as _;

/// Trains one seed of a study, resuming from the checkpoints in `dir` when all of them are
/// there, and checkpointing at every evaluation; every batch is split across `compute`'s devices.
/// Ctrl-C or SIGTERM ends the seed after the step in flight, its checkpoints written, with
/// [`Interrupted`]: the same command run again resumes from them.
pub(super) fn train_seed(
    plan: &ExperimentPlan,
    compute: &Compute,
    dir: &Path,
    label: &str,
    interrupts: &Interrupts,
) -> Result<Experiment, Failure> {
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
    let mut session = headless_session(compute);
    started_or_failed(session.start(experiment, plan.data.clone()).block_on())?;
    crate::play::play_to_end(&mut session, |experiment, messages| {
        let mut evaluated = false;
        for message in messages {
            match message {
                Message::Run(RunEvent::Stepped { eval: Some(_), .. }) => evaluated = true,
                Message::Run(RunEvent::Stopped { run, error }) => {
                    let name = experiment.position(*run).map_or("a run", |at| experiment.runs[at].spec.name.as_str());
                    eprintln!("{label}: {name} stopped: {error}")
                }
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
///
/// Plain threads taking the next index, not a rayon pool: each job computes on a rayon pool of
/// its own, and a rayon worker waiting for another pool's `install` runs more of its own pool's
/// items meanwhile, so every seed of a study started at once and shared the cores that `jobs`
/// was meant to ration (ten seeds' runs on two cores, each slower for the crowding).
pub(super) fn in_parallel<T: Send>(count: usize, jobs: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.clamp(1, count.max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= count {
                            return done;
                        }
                        done.push((index, work(index)));
                    }
                })
            })
            .collect();
        // A job that panicked panics here too, as the rayon pool did.
        workers.into_iter().flat_map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    done.sort_by_key(|&(index, _)| index);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Where a study's seeds run (the invocation's settings: device, output folder) and the command
/// that ran them.
pub(super) struct Trainer<'a> {
    pub(super) settings: &'a Settings,
    pub(super) invocation: &'a str,
    pub(super) jobs: usize,
    pub(super) interrupts: &'a Interrupts,
}

impl Trainer<'_> {
    /// Every seed of `study`, trained or (when finished earlier) read from `seeds/`, up to
    /// `jobs` at once; with a line of provenance each.
    pub(super) fn seeds(&self, study: &Study, seeds: usize) -> Result<(Vec<Outcome>, String), Failure> {
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
            let test = experiment.test_batches();
            let outcomes: Vec<Outcome> =
                experiment.runs.iter().map(|r| Outcome::of(&study.name, seed, r, experiment.val_batches(), test.as_deref())).collect();
            let result = SeedResult {
                plan,
                finished: utc_date(),
                compute: self.settings.compute.describe(),
                command: self.invocation.to_string(),
                initial_weights: INITIAL_WEIGHTS_SCHEME,
                outcomes,
            };
            result.save(&results)?;
            Ok(result)
        };
        let mut outcomes = Vec::new();
        let mut provenance = String::new();
        for trained in in_parallel(seeds, self.jobs, train) {
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
