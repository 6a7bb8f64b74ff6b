//! One training run: a model, its optimiser and its metrics, advanced one optimiser step per
//! call, or several launched back to back and read back once ([`Run::train_steps`]).
//! Both are async: the browser awaits the read-back so that the UI thread never waits on the
//! GPU; a command line or a test waits on the future itself.

use burn::module::Module;
use burn::optim::GradientsAccumulator;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor, TensorData};
use web_time::Instant;

use qkv_model::diagnostics::{DiagnosticsError, ModelDiagnostics, diagnose};
use qkv_model::{ConfigError, Input, Model};

use crate::corpus::DataError;
use crate::dataset::{Batch, Dataset};
use crate::loss::{accuracy_counts, cross_entropy};
use crate::optimiser::Optimiser;
use crate::recipe::TrainingConfigError;
use crate::shards::{self, Shard};

pub use crate::records::{EvalRecord, Metrics, RunSpec, RunStatus, StepRecord, UnknownStatus};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("model configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("training configuration: the model's vocab_size {model} is smaller than the data's vocabulary {data}")]
    VocabTooSmall { model: usize, data: usize },
    #[error(
        "training configuration: run {run} differs from run {first} in block_size, batch_size, grad_accum or seed: runs \
         of one experiment share these so that they train on identical batches"
    )]
    BatchesDiffer { run: String, first: String },
    #[error("training configuration: an experiment needs at least one run")]
    NoRuns,
    #[error("training configuration: a step needs at least one batch")]
    NoBatch,
    #[error("training configuration: a group of steps needs at least one step")]
    NoSteps,
    #[error("training configuration: the prompt is empty: give at least one token to continue")]
    EmptyPrompt,
    #[error(
        "this model is an encoder: it reads a whole list and answers at every position, so it has no text to continue; give it a list to answer"
    )]
    NothingToContinue,
    #[error("training configuration: {0}")]
    TrainingConfig(#[from] TrainingConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("diverged at step {step}: the loss became {loss}; lower the learning rate or raise the weight decay")]
    Diverged { step: usize, loss: f64 },
    #[error("the run already finished its {0} steps")]
    Finished(usize),
    #[error(transparent)]
    ReadBack(#[from] qkv_kernels::ReadBackError),
    #[error("training configuration: {0}")]
    LaunchTooWide(#[from] qkv_kernels::LaunchTooWide),
}

impl RunError {
    /// Whether the run's settings cannot be (a model, recipe or data that does not fit), as
    /// opposed to a run that failed once started.
    pub fn is_setting(&self) -> bool {
        matches!(self, Self::Config(_) | Self::VocabTooSmall { .. } | Self::TrainingConfig(_) | Self::LaunchTooWide(_))
    }
}

pub struct Run {
    pub spec: RunSpec,
    model: Option<Model>,
    optimiser: Optimiser,
    /// The autodiff device the model trains on.
    device: Device,
    /// Further autodiff devices that each take a share of every batch (data parallel, see
    /// [`Run::spread_over`]); none: `device` takes it all.
    replicas: Vec<Device>,
    pub step: usize,
    pub metrics: Metrics,
    pub status: RunStatus,
    tokens: usize,
    wall_secs: f64,
}

/// Device-side results of a step that have not been read back yet: the loss and the gradient
/// norm, one value each.
struct PendingStep {
    values: [Tensor<1>; 2],
    lr: f64,
    tokens: usize,
}

/// A model's figures on a set of batches: mean loss over the batches, and where the batches mark
/// answers, the share of answers right and of rows right whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    pub loss: f64,
    pub accuracy: Option<f64>,
    pub sequence_accuracy: Option<f64>,
}

/// Device-side results of an evaluation: per-batch losses, then the accuracy counts.
struct PendingEval {
    values: Vec<Tensor<1>>,
    batches: usize,
    with_accuracy: bool,
}

impl PendingEval {
    /// The figures in `values`, read back from [`Self::values`].
    fn score(&self, values: &[f64]) -> Score {
        let losses = &values[..self.batches];
        let loss = losses.iter().sum::<f64>() / losses.len().max(1) as f64;
        let (accuracy, sequence_accuracy) = if self.with_accuracy {
            let c = &values[self.batches..];
            (Some(c[0] / c[1].max(1.0)), Some(c[2] / c[3].max(1.0)))
        } else {
            (None, None)
        };
        Score { loss, accuracy, sequence_accuracy }
    }
}

pub(crate) fn batch_tensors(batch: &Batch, device: &Device) -> (Input, Tensor<2, Int>, Option<Tensor<2>>) {
    let shape = [batch.rows, batch.time];
    let inputs = batch.inputs.to_input(batch.rows, device);
    let targets = Tensor::from_data(TensorData::new(batch.targets.clone(), shape), device);
    let mask = batch.loss_mask.as_ref().map(|m| Tensor::from_data(TensorData::new(m.clone(), shape), device));
    (inputs, targets, mask)
}

/// Each batch's mean loss under `model`, in order, with its accuracy counts where it has a loss
/// mask ([`accuracy_counts`]).
fn evaluate_batches(model: &Model, batches: &[Batch], device: &Device) -> Vec<(Tensor<1>, Option<Tensor<1>>)> {
    batches
        .iter()
        .map(|batch| {
            let (inputs, targets, mask) = batch_tensors(batch, device);
            let logits = model.forward(inputs);
            let counts = mask.as_ref().map(|mask| accuracy_counts(logits.clone(), targets.clone(), mask.clone()));
            (cross_entropy(logits, targets, mask), counts)
        })
        .collect()
}

/// `tensors`' values one after another, read back in one wait without copying them together.
async fn read_values(tensors: Vec<Tensor<1>>) -> Result<Vec<f64>, RunError> {
    let values = qkv_kernels::read_floats_together(tensors).await?;
    Ok(values.into_iter().map(f64::from).collect())
}

/// What a step of `spec` launches by, at its largest: the whole batch (a run spread over devices
/// gives each a share) at the model's longest context.
fn step_size(spec: &RunSpec) -> qkv_kernels::StepSize {
    let model = &spec.model;
    qkv_kernels::StepSize {
        batch: spec.training.batch_size,
        context: model.block_size,
        heads: model.n_head,
        width: model.n_embd,
        parameters: qkv_model::ParamReport::new(model).total_params,
    }
}

impl Run {
    /// Builds the model (seeded by the training seed) on `device` with autodiff.
    pub fn new(spec: RunSpec, dataset: &Dataset, device: &Device) -> Result<Self, RunError> {
        Self::with_model(spec, dataset, device, |spec, device| Ok(Model::new_seeded(&spec.model, device, spec.training.seed)?))
    }

    /// The run of `spec` on `device` (with autodiff), its model made by `model` once the spec
    /// and the data are checked.
    fn with_model(
        spec: RunSpec,
        dataset: &Dataset,
        device: &Device,
        model: impl FnOnce(&RunSpec, &Device) -> Result<Model, RunError>,
    ) -> Result<Self, RunError> {
        spec.training.validate()?;
        spec.model.validate()?;
        if spec.model.vocab_size < dataset.vocab_size() {
            return Err(RunError::VocabTooSmall { model: spec.model.vocab_size, data: dataset.vocab_size() });
        }
        dataset.check_fits(spec.model.block_size)?;
        dataset.check_model(&spec.model)?;
        qkv_kernels::check_launch_widths(device, step_size(&spec))?;
        let device = device.clone().autodiff();
        let model = model(&spec, &device)?;
        let optimiser = Optimiser::new(&spec.training);
        Ok(Self {
            spec,
            model: Some(model),
            optimiser,
            device,
            replicas: Vec::new(),
            step: 0,
            metrics: Metrics::default(),
            status: RunStatus::Training,
            tokens: 0,
            wall_secs: 0.0,
        })
    }

    /// A run that trains `model` (e.g. a converted one, in validation mode) from where
    /// `previous` stopped: step, tokens, time and metrics carry over so that curves continue; the
    /// optimiser starts fresh.
    pub fn from_model(spec: RunSpec, model: Model, previous: &Run, dataset: &Dataset) -> Result<Self, RunError> {
        let mut run = Self::starting_from(spec, model, dataset, &previous.device.clone().without_autodiff())?;
        run.restore(previous.step, previous.tokens, previous.wall_secs, previous.metrics.clone());
        run.replicas = previous.replicas.clone();
        Ok(run)
    }

    /// A run at step 0 whose model starts from `model`'s weights (e.g. an imported GPT-2) instead
    /// of a fresh initialisation; the optimiser starts fresh.
    pub fn starting_from(spec: RunSpec, model: Model, dataset: &Dataset, device: &Device) -> Result<Self, RunError> {
        Self::with_model(spec, dataset, device, |_, device| Ok(model.fork(device).train()))
    }

    pub fn model(&self) -> &Model {
        self.model.as_ref().expect("the model is only taken during a step")
    }

    /// Trains with every batch split across the run's own device and `others` (data parallel):
    /// each device takes a share of the rows through a copy of the model, and the shares'
    /// gradients meet on the run's device, where the optimiser steps and evaluation runs. The
    /// step is the same as on one device, up to the order in which floats are added.
    ///
    /// Why not Burn's collectives: in Burn 0.22 only CUDA implements `all_reduce` (cubecl's
    /// wgpu and CPU servers panic there, and flex has none), so the gradients travel to the run's
    /// device with `GradientsParams::to_device` instead, which every backend supports.
    pub fn spread_over(&mut self, others: &[Device]) {
        self.replicas = others.iter().map(|device| device.clone().autodiff()).collect();
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn is_active(&self) -> bool {
        self.status == RunStatus::Training
    }

    /// Why the run cannot step, if it cannot.
    fn check_active(&self) -> Result<(), RunError> {
        match self.status {
            RunStatus::Finished => Err(RunError::Finished(self.step)),
            RunStatus::Diverged { step } => Err(RunError::Diverged { step, loss: f64::NAN }),
            RunStatus::Training => Ok(()),
        }
    }

    /// Launches the step `ahead` steps after the last one read back (its learning rate is that
    /// step's), without waiting for its results.
    fn launch_step(&mut self, batches: &[Batch], ahead: usize) -> Result<PendingStep, RunError> {
        let model = self.model.take().expect("the model is present between steps");
        let mut accumulator = GradientsAccumulator::<Model>::new();
        let mut loss_sum: Option<Tensor<1>> = None;
        let micro = batches.len() as f64;
        let parts = self.shards_per_batch();
        let mut tokens = 0;
        for batch in batches {
            let shards = shards::split(batch, parts);
            for (loss, grads) in self.shard_steps(&model, &shards, micro) {
                accumulator.accumulate(&model, grads);
                loss_sum = Some(match loss_sum {
                    Some(sum) => sum + loss,
                    None => loss,
                });
            }
            tokens += batch.rows * batch.time;
        }
        let lr = self.spec.training.lr_at(self.step + ahead);
        let (model, grad_norm) = self.optimiser.step(model, accumulator.grads(), lr);
        self.model = Some(model);
        let loss = loss_sum.ok_or(RunError::NoBatch)?;
        Ok(PendingStep { values: [loss, grad_norm], lr, tokens })
    }

    /// Into how many shards a batch is split ([`shards`]): one per thread of the caller's pool on
    /// the CPU, one elsewhere (a GPU runs the whole batch at once).
    fn shards_per_batch(&self) -> usize {
        if !self.replicas.is_empty() {
            return 1 + self.replicas.len();
        }
        if qkv_kernels::is_flex(&self.device) {
            return rayon::current_num_threads();
        }
        1
    }

    /// Each shard's weighted loss (not tracked) and gradients, in order, on the run's device;
    /// shards beyond the first run on threads of their own, on devices of their own when the run
    /// is spread over several ([`Run::spread_over`]).
    fn shard_steps(&self, model: &Model, shards: &[Shard], micro: f64) -> Vec<(Tensor<1>, GradientsParams)> {
        let step = |model: &Model, shard: &Shard, device: &Device| {
            let (inputs, targets, mask) = batch_tensors(&shard.batch, device);
            let loss = cross_entropy(model.forward(inputs), targets, mask);
            // A whole batch in one shard weighs 1: multiplying by it would cost a GPU a launch
            // forward and one backward for nothing.
            let weight = shard.weight / micro;
            let loss = if weight == 1.0 { loss } else { loss * weight };
            let grads = GradientsParams::from_grads(loss.backward(), model);
            (loss.inner(), grads)
        };
        if shards.len() > 1 {
            let devices: Vec<&Device> = (0..shards.len()).map(|i| self.shard_device(i)).collect();
            let steps = shards::fan_out(model, shards, &devices, step);
            if self.replicas.is_empty() {
                return steps;
            }
            let home = self.device.clone().without_autodiff();
            return steps.into_iter().map(|(loss, grads)| (loss.to_device(&home), grads.to_device(&self.device, model))).collect();
        }
        shards.iter().map(|shard| step(model, shard, &self.device)).collect()
    }

    /// The device that trains shard `index` of a batch: the run's own, or a replica's.
    fn shard_device(&self, index: usize) -> &Device {
        match index {
            0 => &self.device,
            i => self.replicas.get(i - 1).unwrap_or(&self.device),
        }
    }

    /// Records a launched step from its read-back `[loss, grad_norm]` and the seconds it took.
    fn finish_step(&mut self, pending: &PendingStep, values: &[f64], elapsed: f64) -> Result<StepRecord, RunError> {
        let (loss, grad_norm) = (values[0], values[1]);
        self.step += 1;
        self.wall_secs += elapsed;
        self.tokens += pending.tokens;
        if !loss.is_finite() {
            self.status = RunStatus::Diverged { step: self.step };
            return Err(RunError::Diverged { step: self.step, loss });
        }
        let record = StepRecord {
            step: self.step,
            train_loss: loss,
            lr: pending.lr,
            grad_norm,
            tokens: self.tokens,
            tokens_per_sec: pending.tokens as f64 / elapsed.max(1e-9),
            wall_secs: self.wall_secs,
        };
        self.metrics.steps.push(record.clone());
        if self.step >= self.spec.training.steps {
            self.status = RunStatus::Finished;
        }
        Ok(record)
    }

    /// One optimiser step over `batches` (its `grad_accum` micro-batches); the loss read-back is
    /// awaited, never blocked on.
    pub async fn train_step(&mut self, batches: &[Batch]) -> Result<StepRecord, RunError> {
        let mut outcomes = self.train_steps(&[batches]).await;
        outcomes.pop().expect("a step yields a record or an error")
    }

    /// One optimiser step per entry of `steps` (each its micro-batches), launched back to back
    /// and read back once: a GPU runs them without waiting for the host in between, where a
    /// read-back per step would drain its queue every step. Stops at the run's last step.
    ///
    /// The outcomes are in step order, and an error ends them. A step whose loss is not finite
    /// stops the run there (steps launched after it have run too, but their records are
    /// dropped); the time of the group is shared equally among its steps.
    pub async fn train_steps(&mut self, steps: &[&[Batch]]) -> Vec<Result<StepRecord, RunError>> {
        if let Err(error) = self.check_active() {
            return vec![Err(error)];
        }
        let count = steps.len().min(self.spec.training.steps.saturating_sub(self.step));
        if count == 0 {
            return vec![Err(RunError::NoSteps)];
        }
        if steps[..count].iter().any(|batches| batches.is_empty()) {
            return vec![Err(RunError::NoBatch)];
        }
        let started = Instant::now();
        let mut pending = Vec::with_capacity(count);
        for (ahead, batches) in steps[..count].iter().enumerate() {
            match self.launch_step(batches, ahead) {
                Ok(step) => pending.push(step),
                Err(error) => return vec![Err(error)],
            }
        }
        let values = match read_values(pending.iter().flat_map(|p| p.values.clone()).collect()).await {
            Ok(values) => values,
            Err(error) => return vec![Err(error)],
        };
        let elapsed_each = started.elapsed().as_secs_f64() / count as f64;
        let mut outcomes = Vec::with_capacity(count);
        for (step, values) in pending.iter().zip(values.chunks(2)) {
            let outcome = self.finish_step(step, values, elapsed_each);
            let stop = outcome.is_err();
            outcomes.push(outcome);
            if stop {
                break;
            }
        }
        outcomes
    }

    /// How many steps can be taken before an evaluation is due (at least one): a group of
    /// steps read back together ends where the run needs its model evaluated.
    pub fn steps_to_next_eval(&self) -> usize {
        let interval = self.spec.training.eval_interval.max(1);
        let to_interval = interval - self.step % interval;
        to_interval.min(self.spec.training.steps.saturating_sub(self.step)).max(1)
    }

    fn launch_eval(&self, val: &[Batch]) -> PendingEval {
        let model = self.model().valid();
        let device = self.device.clone().without_autodiff();
        // On the CPU the batches are shared out over the caller's threads, as a step's shards
        // are: one op at a time over every core gains little there (see `shards`).
        let shares = if qkv_kernels::is_flex(&device) { rayon::current_num_threads() } else { 1 };
        let chunks: Vec<&[Batch]> = val.chunks(val.len().div_ceil(shares.max(1)).max(1)).collect();
        let evaluated: Vec<_> = match chunks.len() {
            0 | 1 => chunks.into_iter().map(|chunk| evaluate_batches(&model, chunk, &device)).collect(),
            n => crate::threads::on_threads(chunks, (shares / n).max(1), |chunk| evaluate_batches(&model, chunk, &device)),
        };
        let (mut parts, counts): (Vec<_>, Vec<_>) = evaluated.into_iter().flatten().unzip();
        let counts = counts.into_iter().flatten().reduce(|sum, c| sum + c);
        let with_accuracy = counts.is_some();
        parts.extend(counts);
        PendingEval { values: parts, batches: val.len(), with_accuracy }
    }

    fn finish_eval(&mut self, pending: &PendingEval, values: &[f64]) -> EvalRecord {
        let Score { loss: val_loss, accuracy, sequence_accuracy } = pending.score(values);
        let record = EvalRecord { step: self.step, tokens: self.tokens, wall_secs: self.wall_secs, val_loss, accuracy, sequence_accuracy };
        self.metrics.evals.push(record.clone());
        record
    }

    /// The model's loss and accuracy on `batches` (a test split's), without dropout and without
    /// a record: what the run's curves show stays the validation split's.
    pub async fn score(&self, batches: &[Batch]) -> Result<Score, RunError> {
        let pending = self.launch_eval(batches);
        let values = read_values(pending.values.clone()).await?;
        Ok(pending.score(&values))
    }

    /// Loss (and accuracy, for synthetic tasks) on the validation batches, without dropout.
    pub async fn evaluate(&mut self, val: &[Batch]) -> Result<EvalRecord, RunError> {
        let pending = self.launch_eval(val);
        let values = read_values(pending.values.clone()).await?;
        Ok(self.finish_eval(&pending, &values))
    }

    /// The model's attention diagnostics ([`qkv_model::diagnostics`]), the logit figures
    /// measured on the first rows of the first validation batch.
    pub async fn diagnose(&self, val: &[Batch]) -> Result<ModelDiagnostics, DiagnosticsError> {
        /// Rows of the batch the logit figures average over: enough text, little time.
        const ROWS: usize = 4;
        let batch = val.first().ok_or(DiagnosticsError::NoTokens)?.first_rows(ROWS);
        let device = self.device.clone().without_autodiff();
        let (input, _, _) = batch_tensors(&batch, &device);
        diagnose(&self.model().valid(), input).await
    }

    /// Whether an evaluation is due after the step just taken.
    pub fn eval_due(&self) -> bool {
        self.step > 0 && (self.step.is_multiple_of(self.spec.training.eval_interval) || self.step >= self.spec.training.steps)
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut Option<Model>, &mut Optimiser) {
        (&mut self.model, &mut self.optimiser)
    }

    pub(crate) fn restore(&mut self, step: usize, tokens: usize, wall_secs: f64, metrics: Metrics) {
        self.step = step;
        self.tokens = tokens;
        self.wall_secs = wall_secs;
        self.metrics = metrics;
        self.status = if step >= self.spec.training.steps { RunStatus::Finished } else { RunStatus::Training };
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    pub fn wall_secs(&self) -> f64 {
        self.wall_secs
    }

    pub(crate) fn optimiser(&self) -> &Optimiser {
        &self.optimiser
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::corpus::TextCorpus;
    use crate::experiment::{Experiment, RunEvent};
    use crate::recipe::TrainingConfig;
    use crate::run_id::RunId;
    use crate::tokenizer::TokenizerKind;
    use pollster::FutureExt as _;
    use qkv_model::{AttentionVariant, Preset};

    pub(crate) fn tiny_text() -> Dataset {
        let corpus = TextCorpus::from_bytes("tiny", &crate::corpus::shakespeare().as_bytes()[..20_000]).unwrap();
        Dataset::from_text(&corpus, &TokenizerKind::Char).unwrap()
    }

    pub(crate) fn tiny_spec(variant: AttentionVariant, dataset: &Dataset) -> RunSpec {
        let mut model = Preset::Classroom.config().with_variant(variant);
        model.vocab_size = dataset.vocab_size();
        model.block_size = 16;
        model.n_embd = 32;
        model.mlp_hidden = 64;
        let training = TrainingConfig {
            steps: 30,
            batch_size: 8,
            warmup_steps: 3,
            eval_interval: 10,
            eval_batches: 2,
            ..TrainingConfig::for_preset(Preset::Classroom)
        }
        .for_variant(variant);
        RunSpec { name: variant.name().into(), model, training }
    }

    /// Every variant, with GQA and MQA where the variant allows them, learns to tell the digits
    /// apart as a ViT, all on the same batches.
    #[test]
    fn a_vit_learns_the_digits_in_every_variant() {
        use crate::images::ImageSource;
        use crate::plan::{ExperimentPlan, RunPlan, TrainingOverrides};
        let mut runs: Vec<RunPlan> = AttentionVariant::ALL.into_iter().map(RunPlan::new).collect();
        runs.extend([
            RunPlan::new(AttentionVariant::Standard).with_kv_heads(2),
            RunPlan::new(AttentionVariant::SharedKeyValue).with_kv_heads(1),
        ]);
        let plan = ExperimentPlan {
            preset: Preset::VisionDigits,
            data: crate::DataSource::Images(ImageSource::Digits),
            training: TrainingOverrides {
                steps: Some(200),
                batch_size: Some(32),
                warmup_steps: Some(10),
                eval_interval: Some(200),
                ..Default::default()
            },
            runs,
            ..Default::default()
        };
        let mut experiment = plan.experiment(&Device::flex()).unwrap();
        assert_eq!(experiment.runs[0].spec.model.block_size, 17, "the class token and 16 patches of 2×2");
        while !experiment.is_done() {
            for event in experiment.step().block_on() {
                assert!(matches!(event, RunEvent::Stepped { .. }), "{event:?}");
            }
        }
        for run in &experiment.runs {
            let accuracy = run.metrics.evals.last().unwrap().accuracy.unwrap();
            // Chance is 10%; after 200 steps each is at 59% or more.
            assert!(accuracy > 0.4, "{} kv_heads {}: held-out accuracy {accuracy}", run.spec.name, run.spec.model.kv_heads());
        }
        let diagnostics = experiment.runs[0].diagnose(experiment.val_batches()).block_on().unwrap();
        assert_eq!(diagnostics.layers.len(), 3);
    }

    /// Images need a ViT, and a ViT needs images of its shape: each mismatch says how to fix it.
    #[test]
    fn images_and_tokens_go_to_the_model_that_reads_them() {
        use crate::images::ImageSource;
        let digits = Dataset::load(&crate::DataSource::Images(ImageSource::Digits), &crate::TokenizerKind::Char, 1).unwrap();
        let text = tiny_text();
        let mut gpt_on_images = tiny_spec(AttentionVariant::Standard, &text);
        gpt_on_images.model.vocab_size = 10;
        let error = Run::new(gpt_on_images, &digits, &Device::flex()).err().unwrap().to_string();
        assert!(error.contains("holds images") && error.contains("vision-digits"), "{error}");
        let vit = Preset::VisionDigits.config();
        let spec = |model| RunSpec { name: "vit".into(), model, training: TrainingConfig::for_preset(Preset::VisionDigits) };
        let error =
            Run::new(spec(qkv_model::ModelConfig { vocab_size: 80, ..vit.clone() }), &text, &Device::flex()).err().unwrap().to_string();
        assert!(error.contains("give it images"), "{error}");
        let mut other_shape = vit;
        other_shape.image = Some(qkv_model::ImageInput::new(4, 16, 1, 2));
        let error = Run::new(spec(other_shape), &digits, &Device::flex()).err().unwrap().to_string();
        assert!(error.contains("images are 8×8 but the model reads 4×16"), "{error}");
    }

    #[test]
    fn loss_falls_on_tiny_data_for_every_variant() {
        let dataset = tiny_text();
        let specs: Vec<RunSpec> = AttentionVariant::ALL.into_iter().map(|v| tiny_spec(v, &dataset)).collect();
        let mut experiment = Experiment::new(dataset, specs, &Device::flex()).unwrap();
        let before: Vec<f64> = pollster::block_on(experiment.evaluate_untrained()).into_iter().map(|(_, e)| e.unwrap().val_loss).collect();
        while !experiment.is_done() {
            for event in experiment.step().block_on() {
                assert!(matches!(event, RunEvent::Stepped { .. }), "{event:?}");
            }
        }
        for (run, before) in experiment.runs.iter().zip(before) {
            let after = run.metrics.evals.last().unwrap().val_loss;
            assert!(after < before - 0.5, "{}: val loss {before:.3} → {after:.3}", run.spec.name);
            assert_eq!(run.status, RunStatus::Finished);
            assert_eq!(run.metrics.steps.len(), 30);
        }
    }

    #[test]
    fn same_seed_gives_identical_losses() {
        let losses = || {
            let dataset = tiny_text();
            let spec = tiny_spec(AttentionVariant::SharedKeyValue, &dataset);
            let mut experiment = Experiment::new(dataset, vec![spec], &Device::flex()).unwrap();
            (0..5).for_each(|_| drop(experiment.step().block_on()));
            experiment.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>()
        };
        assert_eq!(losses(), losses());
    }

    #[test]
    fn dropout_runs_repeat_exactly_and_ignore_a_run_beside_them() {
        let dataset = tiny_text();
        let mut spec = tiny_spec(AttentionVariant::Standard, &dataset);
        spec.model.dropout = 0.2;
        let losses = |specs: Vec<RunSpec>| {
            let mut experiment = Experiment::new(dataset.clone(), specs, &Device::flex()).unwrap();
            (0..5).for_each(|_| drop(experiment.step().block_on()));
            experiment.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>()
        };
        let alone = losses(vec![spec.clone()]);
        assert_eq!(alone, losses(vec![spec.clone()]), "the same seed draws the same masks");
        // Beside another run (stepping concurrently where there are cores) the masks stay the
        // run's own; only the order of partial sums may differ with the thread count.
        let mut other = tiny_spec(AttentionVariant::QueryIdentity, &dataset);
        other.model.dropout = 0.2;
        let beside = losses(vec![spec.clone(), other]);
        for (a, b) in alone.iter().zip(&beside) {
            assert!((a - b).abs() < 1e-5, "alone {alone:?}, beside another run {beside:?}");
        }
        spec.model.dropout = 0.0;
        assert_ne!(alone, losses(vec![spec]), "dropout changes the losses");
    }

    /// A batch split over threads (one shard each) trains as it does in one piece, dropout
    /// masks included; only the order of float sums differs.
    #[test]
    fn a_batch_in_shards_trains_as_it_does_whole() {
        let dataset = tiny_text();
        let mut spec = tiny_spec(AttentionVariant::Standard, &dataset);
        spec.model.dropout = 0.2;
        let losses_on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let mut experiment = Experiment::new(dataset.clone(), vec![spec.clone()], &Device::flex()).unwrap();
                assert_eq!(experiment.runs[0].shards_per_batch(), threads);
                (0..4).for_each(|_| drop(experiment.step().block_on()));
                experiment.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>()
            })
        };
        let (whole, sharded) = (losses_on(1), losses_on(3));
        assert_eq!(whole.len(), 4);
        for (a, b) in whole.iter().zip(&sharded) {
            assert!((a - b).abs() < 1e-5, "whole {whole:?}, in shards {sharded:?}");
        }
    }

    /// Validation batches shared out over threads (3 threads, 5 batches: chunks of 2, 2 and 1)
    /// give the losses and accuracy counts of one thread.
    #[test]
    fn an_evaluation_over_threads_matches_one_on_a_single_thread() {
        use crate::synthetic::{Framing, SyntheticData, SyntheticTask};
        let dataset = Dataset::Synthetic(SyntheticData { task: SyntheticTask::Reverse, length: 6, seed: 3, framing: Framing::Decoder });
        let spec = tiny_spec(AttentionVariant::Standard, &dataset);
        let val = dataset.val_batches(1, 4, spec.model.block_size)[..5].to_vec();
        let evaluate_on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let mut run = Run::new(spec.clone(), &dataset, &Device::flex()).unwrap();
                let pending = run.launch_eval(&val);
                let values = read_values(pending.values.clone()).block_on().unwrap();
                let record = run.finish_eval(&pending, &values);
                (values, record)
            })
        };
        let ((one_values, one), (three_values, three)) = (evaluate_on(1), evaluate_on(3));
        assert_eq!(one_values.len(), 5 + 4, "a loss per batch, then four accuracy counts");
        for (a, b) in one_values.iter().zip(&three_values) {
            assert!((a - b).abs() < 1e-6, "one thread {one_values:?}, three {three_values:?}");
        }
        assert!(one.accuracy.is_some() && one.accuracy == three.accuracy && one.sequence_accuracy == three.sequence_accuracy);
    }

    /// A run whose learning rate makes its loss overflow within a few steps.
    fn exploding_spec(dataset: &Dataset) -> RunSpec {
        let mut exploding = tiny_spec(AttentionVariant::QueryIdentity, dataset);
        exploding.name = "exploding".into();
        exploding.training.lr = 1e30;
        exploding.training.min_lr = 1e29;
        exploding.training.warmup_steps = 0;
        exploding.training.grad_clip = None;
        exploding
    }

    #[test]
    fn a_diverging_run_stops_and_the_others_go_on() {
        let dataset = tiny_text();
        let healthy = tiny_spec(AttentionVariant::Standard, &dataset);
        let exploding = exploding_spec(&dataset);
        let mut experiment = Experiment::new(dataset, vec![healthy, exploding], &Device::flex()).unwrap();
        let mut diverged = None;
        for _ in 0..10 {
            for event in experiment.step().block_on() {
                if let RunEvent::Stopped { run: RunId(1), error } = event {
                    diverged = Some(error.to_string());
                }
            }
        }
        let message = diverged.expect("the exploding run diverges");
        assert!(message.starts_with("diverged at step"), "{message}");
        assert!(matches!(experiment.runs[1].status, RunStatus::Diverged { .. }));
        assert_eq!(experiment.runs[0].metrics.steps.len(), 10);
    }

    /// Steps launched back to back and read back once train exactly as steps read one by one,
    /// learning-rate schedule included, and a group stops at the run's last step.
    #[test]
    fn steps_read_back_together_train_as_steps_read_one_by_one() {
        let dataset = tiny_text();
        let spec = tiny_spec(AttentionVariant::Standard, &dataset);
        let mut rng = crate::rng::Rng::new(3);
        let steps: Vec<Vec<Batch>> = (0..spec.training.steps + 2).map(|_| vec![dataset.train_batch(&mut rng, 8, 16, 0)]).collect();
        let mut one_by_one = Run::new(spec.clone(), &dataset, &Device::flex()).unwrap();
        let singles: Vec<StepRecord> = steps[..spec.training.steps].iter().map(|b| one_by_one.train_step(b).block_on().unwrap()).collect();

        let mut grouped = Run::new(spec.clone(), &dataset, &Device::flex()).unwrap();
        let mut records = Vec::new();
        for group in steps.chunks(7) {
            let group: Vec<&[Batch]> = group.iter().map(Vec::as_slice).collect();
            for outcome in pollster::block_on(grouped.train_steps(&group)) {
                match outcome {
                    Ok(record) => records.push(record),
                    Err(error) => assert!(matches!(error, RunError::Finished(30)), "{error}"),
                }
            }
        }
        assert_eq!(records.len(), spec.training.steps, "the group that crosses the end stops there");
        assert_eq!(grouped.status, RunStatus::Finished);
        for (a, b) in singles.iter().zip(&records) {
            assert_eq!((a.step, a.train_loss, a.lr, a.grad_norm, a.tokens), (b.step, b.train_loss, b.lr, b.grad_norm, b.tokens));
        }
        assert_eq!(grouped.steps_to_next_eval(), 1);
    }

    #[test]
    fn an_experiment_reads_back_in_groups_that_end_at_each_evaluation() {
        let dataset = tiny_text();
        let exploding = exploding_spec(&dataset);
        let specs = vec![tiny_spec(AttentionVariant::Standard, &dataset), exploding];
        let mut grouped = Experiment::new(dataset.clone(), specs.clone(), &Device::flex()).unwrap();
        let mut stepped = Experiment::new(dataset, specs, &Device::flex()).unwrap();
        // Evaluations every 10 steps: groups of up to 4 stop at 4, 8, 10, 14, ...
        let mut ends = Vec::new();
        let mut stopped = None;
        while !grouped.is_done() {
            for event in pollster::block_on(grouped.steps(4)) {
                match event {
                    RunEvent::Stepped { run: RunId(0), record, eval } => {
                        if let Some(eval) = eval {
                            assert_eq!(eval.step, record.step);
                            ends.push(record.step);
                        }
                    }
                    RunEvent::Stopped { run: RunId(1), error } => stopped = Some(error.to_string()),
                    RunEvent::Stepped { run: RunId(1), .. } => {}
                    other => panic!("{other:?}"),
                }
            }
        }
        while !stepped.is_done() {
            drop(stepped.step().block_on());
        }
        assert_eq!(ends, [10, 20, 30]);
        assert!(stopped.is_some_and(|e| e.starts_with("diverged at step")), "the exploding run stops");
        assert_eq!(grouped.runs[1].status, stepped.runs[1].status, "it stops at the same step");
        // The healthy run's batches and schedule are the same; only the order of float sums may
        // differ, as its shards follow the cores the other run leaves it.
        let losses = |e: &Experiment| e.runs[0].metrics.steps.iter().map(|s| (s.step, s.train_loss)).collect::<Vec<_>>();
        let evals = |e: &Experiment| e.runs[0].metrics.evals.iter().map(|v| (v.step, v.val_loss)).collect::<Vec<_>>();
        for (a, b) in losses(&grouped).into_iter().chain(evals(&grouped)).zip(losses(&stepped).into_iter().chain(evals(&stepped))) {
            assert!(a.0 == b.0 && (a.1 - b.1).abs() < 1e-5, "grouped {a:?}, step by step {b:?}");
        }
        assert_eq!(grouped.runs[0].metrics.steps.len(), 30);
        assert_eq!(grouped.runs[0].metrics.evals.len(), 3);
    }

    #[test]
    fn a_run_diagnoses_its_model_on_validation_text() {
        let dataset = tiny_text();
        let spec = tiny_spec(AttentionVariant::SharedQueryKey, &dataset);
        let val = dataset.val_batches(1, 8, 16);
        let run = Run::new(spec.clone(), &dataset, &Device::flex()).unwrap();
        let diagnostics = run.diagnose(&val).block_on().unwrap();
        assert_eq!(diagnostics.layers.len(), spec.model.n_layer);
        assert!(diagnostics.layers.iter().flat_map(|l| &l.symmetry).all(|s| (s - 1.0).abs() < 1e-6), "{diagnostics:?}");
        assert!(matches!(run.diagnose(&[]).block_on(), Err(DiagnosticsError::NoTokens)));
    }

    #[test]
    fn runs_that_cannot_share_batches_are_refused() {
        let dataset = tiny_text();
        let a = tiny_spec(AttentionVariant::Standard, &dataset);
        let mut b = tiny_spec(AttentionVariant::SharedKeyValue, &dataset);
        b.training.batch_size = 4;
        let err = Experiment::new(dataset, vec![a, b], &Device::flex()).err().unwrap().to_string();
        assert!(err.contains("identical batches"), "{err}");
    }

    #[test]
    fn weight_decay_spares_norms_and_biases() {
        // With zero gradients (lr only decays), rank-1 parameters must stay where they are.
        let dataset = tiny_text();
        let mut spec = tiny_spec(AttentionVariant::Standard, &dataset);
        spec.model.bias = true;
        spec.training.weight_decay = 0.5;
        let mut run = Run::new(spec, &dataset, &Device::flex()).unwrap();
        let gain_before = run.model().layers().next().unwrap().ln_1.as_ref().unwrap().gamma.val().into_data();
        let batch = dataset.train_batch(&mut crate::rng::Rng::new(0), 4, 16, 0);
        run.train_step(&[batch]).block_on().unwrap();
        let gain_after = run.model().layers().next().unwrap().ln_1.as_ref().unwrap().gamma.val().into_data();
        // AdamW moves every parameter by ~lr·sign(grad); decay would add lr·wd·1 on top. The
        // update of a gain of 1 is then at most lr (plus rounding), never lr·(1 + wd).
        let lr = run.spec.training.lr_at(0);
        let before = gain_before.try_into_vec_as::<f32>().unwrap();
        let after = gain_after.try_into_vec_as::<f32>().unwrap();
        let max_move = before.iter().zip(&after).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
        assert!(max_move <= lr * 1.01, "gain moved {max_move}, lr {lr}");
    }
}
