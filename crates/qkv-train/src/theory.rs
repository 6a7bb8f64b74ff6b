//! The theory lab: train a standard model, eliminate its W_Q by a change of basis, and measure
//! how far the converted model's logits and loss moved (nowhere, in the exact cases).

use std::fmt;
use std::str::FromStr;

use burn::module::Module;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use qkv_model::reparam::{
    Conversion, Eliminated, ReparamCase, ReparamError, eliminate_in_layer, eliminate_query, eliminate_query_approx, eliminate_query_fitted,
};
use qkv_model::{Gpt, Model, ModelConfig, Norm, ParamReport, Preset};

use crate::dataset::{Batch, Dataset};
use crate::loss::cross_entropy;
use crate::run::{Run, RunError, RunSpec};

/// The architectures the theory covers, and a LayerNorm model for the approximate mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TheoryCase {
    /// One layer, no normalisation.
    Single,
    /// The theory preset's layers without the MLP skip: one Θ per layer.
    NoMlpSkip,
    /// The theory preset's layers sharing one set of weights.
    Shared,
    /// The theory preset as it is (skips around attention and MLP, no normalisation): the middle
    /// layer's W_Q eliminated inside the deep network, the whole residual stream moved into its
    /// basis; the other layers keep theirs.
    Deep,
    /// The theory preset with LayerNorm: no exact conversion, the approximate mode, each head's
    /// basis first fitted to bring W_Q near the identity (`reparam::fit_query_heads`).
    #[serde(rename = "layernorm")]
    LayerNorm,
}

impl TheoryCase {
    pub const ALL: [TheoryCase; 5] =
        [TheoryCase::Single, TheoryCase::NoMlpSkip, TheoryCase::Shared, TheoryCase::Deep, TheoryCase::LayerNorm];

    pub fn name(self) -> &'static str {
        match self {
            TheoryCase::Single => "single",
            TheoryCase::NoMlpSkip => "no-mlp-skip",
            TheoryCase::Shared => "shared",
            TheoryCase::Deep => "deep",
            TheoryCase::LayerNorm => "layernorm",
        }
    }

    pub fn is_exact(self) -> bool {
        self != TheoryCase::LayerNorm
    }

    /// `preset` (normally `theory`) shaped for this case, its vocabulary fitted to the data.
    pub fn config(self, preset: Preset, vocab_size: usize) -> ModelConfig {
        let mut config = preset.config();
        config.vocab_size = vocab_size;
        match self {
            TheoryCase::Single => config.n_layer = 1,
            TheoryCase::NoMlpSkip => config.mlp_skip = false,
            TheoryCase::Shared => config.shared_layers = true,
            TheoryCase::Deep => {}
            TheoryCase::LayerNorm => config.norm = Norm::LayerNorm,
        }
        config
    }

    pub fn convert(self, model: &Gpt, config: &ModelConfig) -> Result<Conversion, ReparamError> {
        match self {
            TheoryCase::Deep => eliminate_in_layer(model, config, Eliminated::Query, self.layer(config).unwrap_or(0)),
            TheoryCase::LayerNorm => eliminate_query_fitted(model, config),
            _ => eliminate_query(model, config),
        }
    }

    /// The one layer whose W_Q goes, where only one does: the middle layer of the deep case.
    pub fn layer(self, config: &ModelConfig) -> Option<usize> {
        (self == TheoryCase::Deep).then_some(config.n_layer / 2)
    }
}

impl From<ReparamCase> for TheoryCase {
    fn from(case: ReparamCase) -> Self {
        match case {
            ReparamCase::Single => TheoryCase::Single,
            ReparamCase::NoMlpSkip => TheoryCase::NoMlpSkip,
            ReparamCase::Shared => TheoryCase::Shared,
        }
    }
}

impl fmt::Display for TheoryCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown case '{0}': use {names}", names = TheoryCase::ALL.map(TheoryCase::name).join(", "))]
pub struct UnknownCase(pub String);

impl FromStr for TheoryCase {
    type Err = UnknownCase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TheoryCase::ALL.into_iter().find(|c| c.name() == s.trim()).ok_or_else(|| UnknownCase(s.to_string()))
    }
}

/// How two models differ on the same batches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Agreement {
    pub max_abs_logit_diff: f64,
    pub mean_abs_logit_diff: f64,
    pub loss_a: f64,
    pub loss_b: f64,
}

/// Logit differences and losses of two (validation-mode) models on `batches`.
pub fn compare(a: &Model, b: &Model, batches: &[Batch], device: &Device) -> Agreement {
    let (mut max, mut sum, mut count, mut loss_a, mut loss_b) = (0.0f64, 0.0f64, 0usize, 0.0, 0.0);
    for batch in batches {
        let (inputs, targets, mask) = crate::run::batch_tensors(batch, device);
        let logits_a = a.forward(inputs.clone());
        let logits_b = b.forward(inputs);
        let diff = (logits_a.clone() - logits_b.clone()).abs();
        count += diff.shape().num_elements();
        let stats: Vec<f32> = burn::tensor::Tensor::cat(
            vec![
                diff.clone().max().reshape([1]),
                diff.sum().reshape([1]),
                cross_entropy(logits_a, targets.clone(), mask.clone()),
                cross_entropy(logits_b, targets, mask),
            ],
            0,
        )
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32 read-back");
        max = max.max(stats[0] as f64);
        sum += stats[1] as f64;
        loss_a += stats[2] as f64 / batches.len() as f64;
        loss_b += stats[3] as f64 / batches.len() as f64;
    }
    Agreement { max_abs_logit_diff: max, mean_abs_logit_diff: sum / count.max(1) as f64, loss_a, loss_b }
}

/// What `qkv reparam` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReparamReport {
    pub case: TheoryCase,
    /// The one layer whose W_Q went (the deep case); `None` where every layer's did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<usize>,
    pub exact: bool,
    pub steps: usize,
    pub params_before: usize,
    pub params_after: usize,
    pub max_abs_logit_diff: f64,
    pub mean_abs_logit_diff: f64,
    pub val_loss_before: f64,
    pub val_loss_after: f64,
    /// 1-norm condition number of each layer's W_Q (Θ).
    pub condition_numbers: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finetune_steps: Option<usize>,
    /// Val loss of the converted model after `finetune_steps` more steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub val_loss_after_finetune: Option<f64>,
    /// The approximate case: the same conversion without fitting each head's basis first, for
    /// comparison (the figures above are with the fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_fit: Option<Unfitted>,
}

/// How far the approximate conversion without the fit moved the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Unfitted {
    pub max_abs_logit_diff: f64,
    pub val_loss_after: f64,
}

/// Converts `original`, the run's model in validation mode (on its own device or a copy on the
/// CPU), and measures the conversion on `val`.
pub fn convert_and_measure(
    case: TheoryCase,
    run: &Run,
    original: &Model,
    val: &[Batch],
) -> Result<(Conversion, ReparamReport), ReparamError> {
    let Model::Gpt(gpt) = original else { return Err(ReparamError::Vision) };
    let conversion = case.convert(gpt, &run.spec.model)?;
    let device = original.devices().first().cloned().unwrap_or_else(|| run.device().clone().without_autodiff());
    let agreement = compare(original, &Model::Gpt(conversion.model.clone()), val, &device);
    let without_fit = match case {
        TheoryCase::LayerNorm => {
            let plain = eliminate_query_approx(gpt, &run.spec.model)?;
            let agreement = compare(original, &Model::Gpt(plain.model), val, &device);
            Some(Unfitted { max_abs_logit_diff: agreement.max_abs_logit_diff, val_loss_after: agreement.loss_b })
        }
        _ => None,
    };
    let report = ReparamReport {
        case,
        layer: case.layer(&run.spec.model),
        exact: case.is_exact(),
        steps: run.step,
        params_before: ParamReport::new(&run.spec.model).total_params,
        params_after: ParamReport::new(&conversion.config).total_params,
        max_abs_logit_diff: agreement.max_abs_logit_diff,
        mean_abs_logit_diff: agreement.mean_abs_logit_diff,
        val_loss_before: agreement.loss_a,
        val_loss_after: agreement.loss_b,
        condition_numbers: conversion.conditions.clone(),
        finetune_steps: None,
        val_loss_after_finetune: None,
        without_fit,
    };
    Ok((conversion, report))
}

/// A run that continues training a converted model: its own spec (the converted architecture),
/// the original's metrics so curves continue, a fresh optimiser.
pub fn continue_converted(original: &Run, conversion: Conversion, name: &str, dataset: &Dataset) -> Result<Run, RunError> {
    let spec = RunSpec { name: name.to_string(), model: conversion.config, training: original.spec.training.clone() };
    Run::from_model(spec, Model::Gpt(conversion.model), original, dataset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Experiment;
    use crate::recipe::TrainingConfig;
    use crate::run::tests::tiny_text;
    use pollster::FutureExt as _;

    fn trained(case: TheoryCase, steps: usize) -> Experiment {
        let dataset = tiny_text();
        let mut model = case.config(Preset::Theory, dataset.vocab_size());
        model.block_size = 16;
        let training =
            TrainingConfig { steps: 1000, batch_size: 8, warmup_steps: 5, eval_batches: 2, ..TrainingConfig::for_preset(Preset::Theory) };
        let spec = RunSpec { name: "standard".into(), model, training };
        let mut experiment = Experiment::new(dataset, vec![spec], &Device::flex()).unwrap();
        (0..steps).for_each(|_| drop(experiment.step().block_on()));
        experiment
    }

    #[test]
    fn trained_models_convert_exactly_in_every_exact_case() {
        for case in [TheoryCase::Single, TheoryCase::NoMlpSkip, TheoryCase::Shared] {
            let experiment = trained(case, 30);
            let (conversion, report) =
                convert_and_measure(case, &experiment.runs[0], &experiment.runs[0].model().valid(), experiment.val_batches()).unwrap();
            assert!(report.max_abs_logit_diff < 1e-4, "{case}: {report:?}");
            assert!((report.val_loss_before - report.val_loss_after).abs() < 1e-4, "{case}: {report:?}");
            assert!(report.params_after < report.params_before);
            assert!(conversion.model.blocks.iter().all(|b| b.attn.w_q.is_none()));
        }
    }

    #[test]
    fn a_trained_deep_model_loses_its_middle_layers_query_exactly() {
        let experiment = trained(TheoryCase::Deep, 30);
        let run = &experiment.runs[0];
        let config = &run.spec.model;
        assert!(config.mlp_skip && config.n_layer > 1, "skips around both attention and MLP: {config:?}");
        let (conversion, report) = convert_and_measure(TheoryCase::Deep, run, &run.model().valid(), experiment.val_batches()).unwrap();
        assert!(report.exact && report.max_abs_logit_diff < 1e-4, "{report:?}");
        assert!((report.val_loss_before - report.val_loss_after).abs() < 1e-4, "{report:?}");
        let layer = TheoryCase::Deep.layer(config).unwrap();
        let w_q = conversion.model.blocks[layer].attn.w_q.as_ref().unwrap().weight.val().into_data().try_to_vec::<f32>().unwrap();
        let n = config.n_embd;
        assert!(w_q.iter().enumerate().all(|(i, &v)| v == if i / n == i % n { 1.0 } else { 0.0 }), "W_Q of layer {layer} is I");
    }

    #[test]
    fn a_converted_model_keeps_training_from_where_it_was() {
        let experiment = trained(TheoryCase::LayerNorm, 30);
        let original = &experiment.runs[0];
        let (conversion, report) =
            convert_and_measure(TheoryCase::LayerNorm, original, &original.model().valid(), experiment.val_batches()).unwrap();
        assert!(report.max_abs_logit_diff > 1e-3, "LayerNorm makes the conversion approximate: {report:?}");
        let without_fit = report.without_fit.expect("the approximate case compares with the plain conversion");
        assert!(without_fit.max_abs_logit_diff > 1e-3 && without_fit.val_loss_after.is_finite(), "{report:?}");
        // Measured on this seed: the fit keeps the whole of each head's own block of W_Q, the
        // plain conversion only its diagonal.
        assert!(report.max_abs_logit_diff < without_fit.max_abs_logit_diff, "{report:?}");
        let mut run = continue_converted(original, conversion, "converted", experiment.dataset()).unwrap();
        assert_eq!(run.step, 30);
        assert_eq!(run.metrics.steps.len(), 30, "the curve continues the original's");
        let mut rng = crate::rng::Rng::new(5);
        let before = run.evaluate(experiment.val_batches()).block_on().unwrap().val_loss;
        for _ in 0..40 {
            let batch = experiment.dataset().train_batch(&mut rng, 8, 16, 0);
            run.train_step(&[batch]).block_on().unwrap();
        }
        let after = run.evaluate(experiment.val_batches()).block_on().unwrap().val_loss;
        assert!(after < before, "fine-tuning recovers: {before} → {after}");
    }

    #[test]
    fn cases_parse_by_name() {
        assert_eq!("no-mlp-skip".parse::<TheoryCase>().unwrap(), TheoryCase::NoMlpSkip);
        assert!("both".parse::<TheoryCase>().unwrap_err().to_string().contains("single"));
    }
}
