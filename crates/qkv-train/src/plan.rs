//! An experiment as a user describes it: a base (preset, data, shared recipe overrides) and a
//! list of runs, each an attention variant with its own overrides. The CLI builds one from its
//! flags, the app from its setup panel (and persists it); both turn it into [`RunSpec`]s here,
//! so a run means the same thing everywhere.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use qkv_model::{AttentionVariant, ConfigError, ModelConfig, Preset};

use crate::corpus::DataError;
use crate::dataset::{DataSource, Dataset};
use crate::experiment::Experiment;
use crate::recipe::{TrainingConfig, TrainingConfigError};
use crate::run::{RunError, RunSpec};
use crate::tokenizer::TokenizerKind;

/// Changes to the preset's architecture, shared by every run (runs of one experiment must see
/// the same batches, so the context is shared too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelOverrides {
    pub n_layer: Option<usize>,
    pub n_head: Option<usize>,
    pub n_embd: Option<usize>,
    pub block_size: Option<usize>,
    /// The skip connection around the MLP (the theory's telescoping case turns it off).
    pub mlp_skip: Option<bool>,
    /// One block's weights reused by every layer.
    pub shared_layers: Option<bool>,
    /// The dropout rate (left out of saved setups that keep the preset's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropout: Option<f64>,
    /// Whether the output head reuses the token embedding (left out of saved setups that keep
    /// the preset's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tie_embeddings: Option<bool>,
    /// A ViT's patch overlap ([`qkv_model::ImageInput::overlap`]; a plan for a GPT that sets one
    /// is refused; left out of saved setups that keep the preset's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_overlap: Option<usize>,
}

impl ModelOverrides {
    /// `preset` with these changes: the model every run starts from.
    pub fn applied_to(&self, preset: ModelConfig) -> ModelConfig {
        let mut model = preset;
        model.n_layer = self.n_layer.unwrap_or(model.n_layer);
        model.n_head = self.n_head.unwrap_or(model.n_head);
        model.block_size = self.block_size.unwrap_or(model.block_size);
        model.mlp_skip = self.mlp_skip.unwrap_or(model.mlp_skip);
        model.shared_layers = self.shared_layers.unwrap_or(model.shared_layers);
        model.dropout = self.dropout.unwrap_or(model.dropout);
        model.tie_embeddings = self.tie_embeddings.unwrap_or(model.tie_embeddings);
        if let (Some(image), Some(overlap)) = (&mut model.image, self.patch_overlap) {
            image.overlap = overlap;
        }
        if let Some(n_embd) = self.n_embd {
            // The MLP keeps the preset's width ratio unless the run sets its own.
            model.mlp_hidden = model.mlp_hidden * n_embd / model.n_embd.max(1);
            model.n_embd = n_embd;
        }
        model
    }
}

/// Changes to the preset's recipe, shared by every run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainingOverrides {
    pub steps: Option<usize>,
    pub batch_size: Option<usize>,
    /// Peak learning rate; the cosine ends at a tenth of it.
    pub lr: Option<f64>,
    /// Weight decay for every run that sets none of its own.
    pub weight_decay: Option<f64>,
    pub seed: Option<u64>,
    /// Steps of linear warm-up to the peak learning rate (left out of saved setups that keep
    /// the recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<usize>,
    /// Validation is measured every this many steps (left out of saved setups that keep the
    /// recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_interval: Option<usize>,
    /// Images only: how far each training image may be moved, in pixels (left out of saved
    /// setups that keep the recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shift: Option<usize>,
    /// Where the cosine ends [default: a tenth of the peak] (left out of saved setups that keep
    /// the recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_lr: Option<f64>,
    /// Adam's second-moment decay (left out of saved setups that keep the recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta2: Option<f64>,
    /// The global gradient norm gradients are clipped to (left out of saved setups that keep
    /// the recipe's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_clip: Option<f64>,
}

/// One run: a variant and what it changes for itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunPlan {
    /// Unique within the experiment; the variant's name when empty.
    pub name: String,
    pub variant: AttentionVariant,
    /// Key/value heads (GQA, MQA); `None` for one per query head.
    pub kv_heads: Option<usize>,
    /// Attention scale; `None` for the variant's default.
    pub scale: Option<f64>,
    /// Overrides the recipe's (and the variant's) weight decay.
    pub weight_decay: Option<f64>,
    pub mlp_hidden: Option<usize>,
}

impl Default for RunPlan {
    fn default() -> Self {
        Self::new(AttentionVariant::Standard)
    }
}

impl RunPlan {
    pub fn new(variant: AttentionVariant) -> Self {
        Self { name: String::new(), variant, kv_heads: None, scale: None, weight_decay: None, mlp_hidden: None }
    }

    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        self.kv_heads = Some(kv_heads);
        self
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The name shown for the run: its own, or one built from the variant and head sharing.
    pub fn display_name(&self) -> String {
        if !self.name.trim().is_empty() {
            return self.name.trim().to_string();
        }
        match self.kv_heads {
            Some(1) => format!("{}+mqa", self.variant.name()),
            Some(k) => format!("{}+gqa{k}", self.variant.name()),
            None => self.variant.name().to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExperimentPlan {
    pub preset: Preset,
    pub data: DataSource,
    pub tokenizer: TokenizerKind,
    pub model: ModelOverrides,
    pub training: TrainingOverrides,
    pub runs: Vec<RunPlan>,
}

impl Default for ExperimentPlan {
    /// The desktop app's first screen: does attention need W_Q, on Shakespeare, in seconds.
    fn default() -> Self {
        Self {
            preset: Preset::Classroom,
            data: DataSource::Shakespeare,
            tokenizer: TokenizerKind::Char,
            model: ModelOverrides::default(),
            training: TrainingOverrides::default(),
            runs: vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::QueryIdentity)],
        }
    }
}

impl ExperimentPlan {
    /// The seed batches and initialisation use.
    pub fn seed(&self) -> u64 {
        self.training.seed.unwrap_or_else(|| TrainingConfig::for_preset(self.preset).seed)
    }

    /// Loads (or generates) the plan's data.
    pub fn dataset(&self) -> Result<Dataset, DataError> {
        Dataset::load(&self.data, &self.tokenizer, self.seed())
    }

    /// The plan's experiment on `device`: its data loaded and every run built, nothing trained
    /// or evaluated yet. What the app, `qkv train` and `qkv compare` start from.
    pub fn experiment(&self, device: &Device) -> Result<Experiment, StartError> {
        self.experiment_of_runs(device, |specs| specs)
    }

    /// The experiment of the runs `keep` keeps of the plan's (a session's share of them): every
    /// run is still validated, and named as in the whole experiment.
    pub fn experiment_of_runs(&self, device: &Device, keep: impl FnOnce(Vec<RunSpec>) -> Vec<RunSpec>) -> Result<Experiment, StartError> {
        let dataset = self.dataset()?;
        let specs = keep(self.specs(&dataset)?);
        Ok(Experiment::new(dataset, specs, device)?)
    }

    /// Every run's spec, its vocabulary fitted to `dataset`. Each error names the run and the
    /// setting to change.
    pub fn specs(&self, dataset: &Dataset) -> Result<Vec<RunSpec>, PlanError> {
        if self.runs.is_empty() {
            return Err(PlanError::NoRuns);
        }
        let mut names: Vec<String> = Vec::new();
        self.runs
            .iter()
            .map(|run| {
                let mut name = run.display_name();
                // Two runs of the same variant get distinct names, so reports and files differ.
                let base = name.clone();
                let mut n = 2;
                while names.contains(&name) {
                    name = format!("{base}-{n}");
                    n += 1;
                }
                names.push(name.clone());
                self.spec(run, name, dataset)
            })
            .collect()
    }

    fn spec(&self, run: &RunPlan, name: String, dataset: &Dataset) -> Result<RunSpec, PlanError> {
        let mut model = self.model.applied_to(self.preset.config()).with_variant(run.variant);
        if self.model.patch_overlap.is_some_and(|o| o > 0) && !model.is_vision() {
            return Err(PlanError::OverlapWithoutImages { preset: self.preset });
        }
        model.vocab_size = dataset.vocab_size();
        // An encoder's lists are read whole, a ViT's patches too: their attention sees both ways.
        model.attention.bidirectional = dataset.is_encoder() || model.is_vision();
        // A vision preset reads the data's images whatever their size, in its own patches.
        if let (Some(input), Some(images)) = (&mut model.image, dataset.images()) {
            (input.height, input.width, input.channels) = (images.shape.height, images.shape.width, images.shape.channels);
            model.block_size = input.tokens();
        }
        model.mlp_hidden = run.mlp_hidden.unwrap_or(model.mlp_hidden);
        model.attention.kv_heads = run.kv_heads;
        model.attention.scale = run.scale;
        if let Err(error) = model.validate() {
            return Err(PlanError::Model { run: name, error });
        }

        let mut training = TrainingConfig::for_preset(self.preset).for_variant(run.variant);
        let t = &self.training;
        if let Some(steps) = t.steps {
            training.steps = steps;
            training.decay_steps = steps;
            training.warmup_steps = training.warmup_steps.min(steps / 10);
            training.eval_interval = training.eval_interval.min(steps.max(1));
        }
        training.warmup_steps = t.warmup_steps.unwrap_or(training.warmup_steps);
        training.eval_interval = t.eval_interval.unwrap_or(training.eval_interval);
        training.batch_size = t.batch_size.unwrap_or(training.batch_size);
        training.shift = t.shift.unwrap_or(training.shift);
        if let Some(lr) = t.lr {
            training.lr = lr;
            training.min_lr = lr / 10.0;
        }
        training.min_lr = t.min_lr.unwrap_or(training.min_lr);
        training.beta2 = t.beta2.unwrap_or(training.beta2);
        training.grad_clip = t.grad_clip.or(training.grad_clip);
        training.weight_decay = run.weight_decay.or(t.weight_decay).unwrap_or(training.weight_decay);
        training.seed = self.seed();
        if let Err(error) = training.validate() {
            return Err(PlanError::Training { run: name, error });
        }
        Ok(RunSpec { name, model, training })
    }
}

/// A plan that cannot become runs: which run, and the setting to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("the experiment has no runs: add at least one")]
    NoRuns,
    #[error("{run}: {error}")]
    Model { run: String, error: ConfigError },
    #[error("{run}: {error}")]
    Training { run: String, error: TrainingConfigError },
    #[error("a patch overlap is for vision transformers, and {preset} is a GPT: leave the overlap out or pick a vision preset")]
    OverlapWithoutImages { preset: Preset },
}

/// Why a plan did not become an experiment: its data, its settings, or a run that failed to build.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Run(#[from] RunError),
}

impl StartError {
    /// Whether the plan's settings cannot be (the plan's own, or a run's that does not fit,
    /// [`RunError::is_setting`]), as opposed to data that could not be read or a run that failed.
    pub fn is_setting(&self) -> bool {
        match self {
            Self::Plan(_) => true,
            Self::Run(run) => run.is_setting(),
            Self::Data(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{Framing, SyntheticData, SyntheticTask};

    fn digits() -> Dataset {
        Dataset::Synthetic(SyntheticData { task: SyntheticTask::Reverse, length: 8, seed: 1, framing: Framing::Decoder })
    }

    #[test]
    fn runs_get_their_own_overrides_and_distinct_names() {
        let mut plan = ExperimentPlan {
            runs: vec![
                RunPlan::new(AttentionVariant::Standard),
                RunPlan::new(AttentionVariant::Standard),
                RunPlan { weight_decay: Some(0.0), mlp_hidden: Some(100), ..RunPlan::new(AttentionVariant::QueryIdentity) },
                RunPlan::new(AttentionVariant::SharedKeyValue).with_kv_heads(1),
            ],
            ..ExperimentPlan::default()
        };
        plan.model.n_embd = Some(32);
        plan.training.steps = Some(40);
        let specs = plan.specs(&digits()).unwrap();
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["standard", "standard-2", "wq-identity", "shared-kv+mqa"]);
        assert!(specs.iter().all(|s| s.model.vocab_size == 11 && s.training.steps == 40 && s.model.n_embd == 32));
        // The classroom MLP is 4× wide; the narrower embedding keeps the ratio...
        assert_eq!(specs[0].model.mlp_hidden, 128);
        // ...unless the run sets its own width, and its own decay beats the variant's 2^-5.
        assert_eq!(specs[2].model.mlp_hidden, 100);
        assert_eq!(specs[2].training.weight_decay, 0.0);
        assert_eq!(specs[3].model.attention.kv_heads, Some(1));
        assert!(specs.iter().all(|s| !s.model.attention.bidirectional));
        let encoder = Dataset::Synthetic(SyntheticData { task: SyntheticTask::Rotate, length: 8, seed: 1, framing: Framing::Encoder });
        assert!(plan.specs(&encoder).unwrap().iter().all(|s| s.model.attention.bidirectional), "an encoder's runs see both ways");
        // A patch overlap names a ViT's input: on a GPT it is refused with the fix.
        plan.model.patch_overlap = Some(1);
        let refused = plan.specs(&digits()).unwrap_err().to_string();
        assert!(refused.contains("pick a vision preset"), "{refused}");
    }

    #[test]
    fn a_plan_can_set_the_optimiser_and_head_that_another_recipe_uses() {
        let mut plan = ExperimentPlan::default();
        let preset = TrainingConfig::for_preset(plan.preset);
        let kept = plan.specs(&digits()).unwrap().remove(0);
        assert_eq!((kept.training.min_lr, kept.training.beta2, kept.training.grad_clip), (preset.min_lr, preset.beta2, preset.grad_clip));
        assert!(kept.model.tie_embeddings);
        plan.training = TrainingOverrides { min_lr: Some(0.0), beta2: Some(0.999), grad_clip: Some(5.0), ..Default::default() };
        plan.model.tie_embeddings = Some(false);
        let spec = plan.specs(&digits()).unwrap().remove(0);
        assert_eq!((spec.training.min_lr, spec.training.beta2, spec.training.grad_clip), (0.0, 0.999, Some(5.0)));
        assert!(!spec.model.tie_embeddings);
        // Saved setups that keep the recipe's do not name them, so older plans compare equal.
        let text = serde_json::to_string(&ExperimentPlan::default()).unwrap();
        assert!(["min_lr", "beta2", "grad_clip", "tie_embeddings"].iter().all(|field| !text.contains(field)), "{text}");
    }

    #[test]
    fn bad_settings_name_the_run() {
        let plan =
            ExperimentPlan { runs: vec![RunPlan::new(AttentionVariant::SharedQueryKey).with_kv_heads(2)], ..ExperimentPlan::default() };
        let err = plan.specs(&digits()).unwrap_err();
        assert!(matches!(&err, PlanError::Model { run, .. } if run == "shared-qk+gqa2"), "{err:?}");
        assert!(err.to_string().starts_with("shared-qk+gqa2:"), "{err}");
        let empty = ExperimentPlan { runs: vec![], ..ExperimentPlan::default() };
        assert_eq!(empty.specs(&digits()), Err(PlanError::NoRuns));
    }

    #[test]
    fn a_plan_starts_its_experiment_or_says_which_part_failed() {
        let data = DataSource::Synthetic { task: SyntheticTask::Reverse, length: 8, framing: Framing::Decoder };
        let plan = ExperimentPlan { data, ..ExperimentPlan::default() };
        let experiment = plan.experiment(&Device::flex()).unwrap();
        let names: Vec<_> = experiment.runs.iter().map(|r| r.spec.name.as_str()).collect();
        assert_eq!(names, ["standard", "wq-identity"]);
        assert_eq!((experiment.step, experiment.dataset().vocab_size()), (0, 11));
        let bad = ExperimentPlan { runs: vec![RunPlan::new(AttentionVariant::SharedQueryKey).with_kv_heads(2)], ..plan };
        let error = bad.experiment(&Device::flex()).err().unwrap();
        assert!(matches!(error, StartError::Plan(PlanError::Model { .. })), "{error:?}");
    }

    #[test]
    fn a_plan_survives_json() {
        let plan = ExperimentPlan::default();
        let text = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<ExperimentPlan>(&text).unwrap(), plan);
        // Settings saved by an older app (fields missing) still load.
        let old: ExperimentPlan = serde_json::from_str(r#"{"preset":"classroom"}"#).unwrap();
        assert_eq!(old.runs, ExperimentPlan::default().runs);
    }
}
