//! Several runs trained on the very same batch sequence. On the CPU (natively) the runs of a step
//! train at the same time, each on its share of the cores; elsewhere they step in turn.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::dataset::{Batch, Dataset};
use crate::problem::Problem;
use crate::rng::Rng;
use crate::run::{EvalRecord, Run, RunError, RunSpec, StepRecord};
use crate::run_id::RunId;

/// Steps of one run, one per entry of `steps` and read back together, with an evaluation after
/// the last if one is due (a group never runs past a due evaluation).
async fn steps_of_one(id: RunId, run: &mut Run, steps: &[&[Batch]], val_batches: &[Batch]) -> Vec<RunEvent> {
    let mut events = Vec::with_capacity(steps.len());
    for outcome in run.train_steps(steps).await {
        events.push(match outcome {
            Ok(record) => RunEvent::Stepped { run: id, record, eval: None },
            Err(error) => RunEvent::Stopped { run: id, error: Problem::of(&error) },
        });
    }
    if let Some(RunEvent::Stepped { eval, .. }) = events.last_mut()
        && run.eval_due()
    {
        match run.evaluate(val_batches).await {
            Ok(record) => *eval = Some(record),
            Err(error) => events.push(RunEvent::Stopped { run: id, error: Problem::of(&error) }),
        }
    }
    events
}

/// What one experiment step did to one run: what the engine reports and what a session passes
/// on to its front end as it is (`Message::Run`), so it is data (serialisable; a stop's error as
/// a [`Problem`] with its causes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RunEvent {
    Stepped {
        run: RunId,
        record: StepRecord,
        eval: Option<EvalRecord>,
    },
    /// The run stopped (diverged, or an error); the others continue.
    Stopped {
        run: RunId,
        error: Problem,
    },
}

fn check_shared_batches(specs: &[RunSpec]) -> Result<(), RunError> {
    let first = specs.first().ok_or(RunError::NoRuns)?;
    let shape = |s: &RunSpec| (s.model.block_size, s.training.batch_size, s.training.grad_accum, s.training.seed, s.training.shift);
    match specs.iter().find(|s| shape(s) != shape(first)) {
        Some(spec) => Err(RunError::BatchesDiffer { run: spec.name.clone(), first: first.name.clone() }),
        None => Ok(()),
    }
}

pub struct Experiment {
    pub runs: Vec<Run>,
    /// Each run's id, in the runs' order: what its events name it by.
    ids: Vec<RunId>,
    dataset: Dataset,
    rng: Rng,
    val_batches: Vec<Batch>,
    block_size: usize,
    batch_size: usize,
    grad_accum: usize,
    /// Training images are moved by up to this many pixels ([`crate::recipe::TrainingConfig::shift`]).
    shift: usize,
    pub step: usize,
}

impl Experiment {
    /// All runs must share the context, the batch shape and the seed, so that they can see the
    /// same batches; everything else (variant, sizes, optimiser settings) may differ.
    pub fn new(dataset: Dataset, specs: Vec<RunSpec>, device: &Device) -> Result<Self, RunError> {
        check_shared_batches(&specs)?;
        let runs = specs.into_iter().map(|spec| Run::new(spec, &dataset, device)).collect::<Result<Vec<_>, _>>()?;
        Self::from_runs(dataset, runs)
    }

    /// An experiment of existing runs (e.g. loaded from checkpoints). The batch stream goes on
    /// where the runs left it: a resumed experiment sees the batches an uninterrupted one would
    /// have seen (and the runs' dropout masks go on where their checkpoints left them).
    pub fn from_runs(dataset: Dataset, runs: Vec<Run>) -> Result<Self, RunError> {
        let specs: Vec<RunSpec> = runs.iter().map(|r| r.spec.clone()).collect();
        check_shared_batches(&specs)?;
        let first = &specs[0];
        let (block_size, batch_size, grad_accum, seed, eval_batches, shift) = (
            first.model.block_size,
            first.training.batch_size,
            first.training.grad_accum,
            first.training.seed,
            first.training.eval_batches,
            first.training.shift,
        );
        let val_batches = dataset.val_batches(eval_batches, batch_size, block_size);
        let step = runs.iter().map(|r| r.step).max().unwrap_or(0);
        // Drawing the batches of the steps already taken costs microseconds a step.
        let mut rng = Rng::new(seed);
        for _ in 0..step * grad_accum {
            dataset.train_batch(&mut rng, batch_size, block_size, shift);
        }
        let ids = (0..runs.len()).map(RunId).collect();
        Ok(Self { runs, ids, rng, val_batches, dataset, block_size, batch_size, grad_accum, shift, step })
    }

    /// Adds a run, named `id`, that joins at the current step (e.g. a converted model continuing
    /// another's curve); it must share the others' batch shape and seed.
    pub fn add_run(&mut self, run: Run, id: RunId) -> Result<(), RunError> {
        let mut specs: Vec<RunSpec> = self.runs.iter().map(|r| r.spec.clone()).collect();
        specs.push(run.spec.clone());
        check_shared_batches(&specs)?;
        self.runs.push(run);
        self.ids.push(id);
        Ok(())
    }

    /// Each run's id, in the runs' order.
    pub fn ids(&self) -> &[RunId] {
        &self.ids
    }

    /// Names the runs, in order (a share of a larger experiment names them by their positions
    /// in the whole). There must be one id a run.
    pub fn name_runs(&mut self, ids: Vec<RunId>) {
        assert_eq!(ids.len(), self.runs.len(), "one id a run");
        self.ids = ids;
    }

    /// Where run `id` is in `runs`.
    pub fn position(&self, id: RunId) -> Option<usize> {
        self.ids.iter().position(|&i| i == id)
    }

    /// Splits every run's batches across its own device and `others` ([`Run::spread_over`]).
    pub fn spread_over(&mut self, others: &[Device]) {
        self.runs.iter_mut().for_each(|run| run.spread_over(others));
    }

    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    pub fn val_batches(&self) -> &[Batch] {
        &self.val_batches
    }

    /// The data's test split in batches, for a final figure; None where it has none
    /// ([`Dataset::test_batches`]).
    pub fn test_batches(&self) -> Option<Vec<Batch>> {
        self.dataset.test_batches(self.batch_size)
    }

    pub fn is_done(&self) -> bool {
        self.runs.iter().all(|r| !r.is_active())
    }

    /// The micro-batches of the next step, drawn once and shared by every run.
    fn next_batches(&mut self) -> Vec<Batch> {
        self.step += 1;
        (0..self.grad_accum).map(|_| self.dataset.train_batch(&mut self.rng, self.batch_size, self.block_size, self.shift)).collect()
    }

    /// One step of every active run on the same batches, with an evaluation where one is due;
    /// every read-back is awaited (the browser cannot block on its GPU).
    pub async fn step(&mut self) -> Vec<RunEvent> {
        self.steps(1).await
    }

    /// Up to `max_steps` steps of every active run, each run's read back once at the end
    /// ([`Run::train_steps`]), and fewer where an evaluation falls due sooner; the events
    /// are each run's steps in order. Every run sees the batches it would see step by step.
    /// Async for the GPU's read-backs; where runs train side by side on the CPU the calling
    /// thread blocks until they are done (each on threads of its own, [`crate::threads::block_on`]).
    pub async fn steps(&mut self, max_steps: usize) -> Vec<RunEvent> {
        let active = self.runs.iter().filter(|run| run.is_active());
        let count = active.map(Run::steps_to_next_eval).min().unwrap_or(1).min(max_steps).max(1);
        let step_batches: Vec<Vec<Batch>> = (0..count).map(|_| self.next_batches()).collect();
        let steps: Vec<&[Batch]> = step_batches.iter().map(Vec::as_slice).collect();
        if let Some(events) = self.step_concurrently(&steps) {
            return events;
        }
        let mut events = Vec::new();
        for (&id, run) in self.ids.iter().zip(self.runs.iter_mut()) {
            if run.is_active() {
                events.extend(steps_of_one(id, run, &steps, &self.val_batches).await);
            }
        }
        events
    }

    /// Steps the active runs at the same time ([`Experiment::on_runs_together`]). A run's result
    /// does not depend on it (its dropout masks come from its own seeds), beyond the order in
    /// which a thread count adds partial sums.
    fn step_concurrently(&mut self, steps: &[&[Batch]]) -> Option<Vec<RunEvent>> {
        let events = self
            .on_runs_together(Run::is_active, |id, run, val_batches| crate::threads::block_on(steps_of_one(id, run, steps, val_batches)))?;
        Some(events.into_iter().flatten().collect())
    }

    /// `work` on every run that `picks` picks, given its id and the validation batches, at the
    /// same time, each on a pool of its share of the threads the caller computes with, when that
    /// can help: on the CPU, with two or more such runs and threads to share. The results come
    /// in the runs' order.
    fn on_runs_together<R: Send>(
        &mut self,
        picks: impl Fn(&Run) -> bool,
        work: impl Fn(RunId, &mut Run, &[Batch]) -> R + Sync,
    ) -> Option<Vec<R>> {
        let (picked, threads) = (self.runs.iter().filter(|run| picks(run)).count(), rayon::current_num_threads());
        let on_cpu = self.runs.iter().all(|r| qkv_kernels::is_flex(r.device()));
        if picked < 2 || threads < 2 || !on_cpu {
            return None;
        }
        let val_batches = &self.val_batches;
        let runs: Vec<(RunId, &mut Run)> = self.ids.iter().copied().zip(self.runs.iter_mut()).filter(|(_, run)| picks(run)).collect();
        Some(crate::threads::on_threads(runs, (threads / picked).max(1), |(id, run)| work(id, run, val_batches)))
    }

    /// Evaluates the runs that have not trained yet (the step-0 point of their curves), by id;
    /// at the same time where that helps, as their steps are (blocking the calling thread then).
    pub async fn evaluate_untrained(&mut self) -> Vec<(RunId, Result<EvalRecord, RunError>)> {
        let untrained = |run: &Run| run.step == 0;
        let together = self.on_runs_together(untrained, |id, run, val_batches| (id, crate::threads::block_on(run.evaluate(val_batches))));
        if let Some(records) = together {
            return records;
        }
        let mut records = Vec::new();
        for (&id, run) in self.ids.iter().zip(self.runs.iter_mut()).filter(|(_, run)| untrained(run)) {
            records.push((id, run.evaluate(&self.val_batches).await));
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{Checkpoint, to_bytes};
    use crate::run::tests::{tiny_spec, tiny_text};
    use pollster::FutureExt as _;
    use qkv_model::AttentionVariant;

    #[test]
    fn a_resumed_experiment_trains_as_an_uninterrupted_one() {
        let dataset = tiny_text();
        let mut spec = tiny_spec(AttentionVariant::Standard, &dataset);
        spec.model.dropout = 0.0;
        let device = Device::flex();
        let losses = |experiment: &mut Experiment, steps: usize| -> Vec<f64> {
            (0..steps)
                .flat_map(|_| experiment.step().block_on())
                .map(|event| match event {
                    RunEvent::Stepped { record, .. } => record.train_loss,
                    RunEvent::Stopped { error, .. } => panic!("{error}"),
                })
                .collect()
        };
        let mut whole = Experiment::new(dataset.clone(), vec![spec.clone()], &device).unwrap();
        let uninterrupted = losses(&mut whole, 6);

        let mut first = Experiment::new(dataset.clone(), vec![spec], &device).unwrap();
        losses(&mut first, 3);
        let bytes = to_bytes(&first.runs[0], first.dataset(), "tiny").block_on().unwrap();
        let run = Checkpoint::from_bytes("tiny.qkv", &bytes).unwrap().into_run(&dataset, &device).unwrap();
        let mut resumed = Experiment::from_runs(dataset, vec![run]).unwrap();
        let after_resume = losses(&mut resumed, 3);
        for (step, (a, b)) in uninterrupted[3..].iter().zip(&after_resume).enumerate() {
            assert!((a - b).abs() < 1e-5, "step {}: {a} uninterrupted, {b} resumed", step + 4);
        }
    }

    #[test]
    fn untrained_runs_evaluated_together_give_what_each_gives_alone() {
        let dataset = tiny_text();
        let specs = [AttentionVariant::Standard, AttentionVariant::QueryIdentity].map(|variant| tiny_spec(variant, &dataset));
        let device = Device::flex();
        let val_loss = |result: &Result<EvalRecord, RunError>| result.as_ref().unwrap().val_loss;
        let mut both = Experiment::new(dataset.clone(), specs.to_vec(), &device).unwrap();
        let together: Vec<(RunId, f64)> =
            pollster::block_on(both.evaluate_untrained()).iter().map(|(run, result)| (*run, val_loss(result))).collect();
        assert_eq!(together.iter().map(|(run, _)| *run).collect::<Vec<_>>(), [RunId(0), RunId(1)], "by run, in order");
        for (run, spec) in specs.into_iter().enumerate() {
            let mut alone = Experiment::new(dataset.clone(), vec![spec], &device).unwrap();
            let records = pollster::block_on(alone.evaluate_untrained());
            assert!((val_loss(&records[0].1) - together[run].1).abs() < 1e-6, "run {run}");
        }
    }
}
