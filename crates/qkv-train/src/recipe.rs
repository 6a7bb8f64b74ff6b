//! Training hyperparameters and the recipes behind each preset and variant.

use serde::{Deserialize, Serialize};

use qkv_model::{AttentionVariant, Preset};

/// Paper 1 trains the identity-query model with weight decay 2^-5 instead of 0.1.
pub const QUERY_IDENTITY_WEIGHT_DECAY: f64 = 0.031_25;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingConfig {
    /// Optimiser steps.
    pub steps: usize,
    /// Rows per micro-batch.
    pub batch_size: usize,
    /// Micro-batches whose gradients are summed into one step.
    pub grad_accum: usize,
    /// Peak learning rate, reached after the warmup.
    pub lr: f64,
    /// Learning rate at the end of the cosine decay.
    pub min_lr: f64,
    pub warmup_steps: usize,
    /// The cosine reaches `min_lr` at this step and stays there.
    pub decay_steps: usize,
    /// Decoupled AdamW decay, applied to parameters of rank ≥ `decay_min_rank` with no
    /// dimension of 1 only.
    pub weight_decay: f64,
    /// 2: matrices and embeddings decay, LayerNorm gains and biases do not (paper 1's rule).
    pub decay_min_rank: usize,
    pub beta1: f64,
    pub beta2: f64,
    /// Global gradient-norm clipping; `None` turns it off.
    pub grad_clip: Option<f64>,
    /// Evaluate every this many steps (and after the last).
    pub eval_interval: usize,
    /// Validation batches per evaluation (text data; synthetic tasks use the whole val set).
    pub eval_batches: usize,
    pub seed: u64,
    /// Images only: each training image is moved by up to this many pixels each way as it is
    /// drawn ([`crate::shift`]); 0 draws them as they are. Recipes saved before it read as 0.
    #[serde(default)]
    pub shift: usize,
}

impl TrainingConfig {
    /// The preset's recipe for the standard model.
    pub fn for_preset(preset: Preset) -> Self {
        // nanoGPT's Shakespeare settings: lr 1e-3 → 1e-4, warmup 100, beta2 0.99, decay 0.1.
        let shakespeare = |steps, batch_size, eval_batches| TrainingConfig {
            steps,
            batch_size,
            grad_accum: 1,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup_steps: 100,
            decay_steps: steps,
            weight_decay: 0.1,
            decay_min_rank: 2,
            beta1: 0.9,
            beta2: 0.99,
            grad_clip: Some(1.0),
            eval_interval: 250,
            eval_batches,
            seed: 1337,
            shift: 0,
        };
        // The papers' GPT-2-scale recipe: AdamW (0.9, 0.95), clip 1.0, cosine to lr/10.
        let gpt = |lr: f64, warmup_steps| TrainingConfig {
            steps: 10_000,
            batch_size: 8,
            grad_accum: 8,
            lr,
            min_lr: lr / 10.0,
            warmup_steps,
            decay_steps: 10_000,
            weight_decay: 0.1,
            decay_min_rank: 2,
            beta1: 0.9,
            beta2: 0.95,
            grad_clip: Some(1.0),
            eval_interval: 500,
            eval_batches: 20,
            seed: 1337,
            shift: 0,
        };
        match preset {
            Preset::ShakespeareCharCpu => shakespeare(2000, 12, 20),
            Preset::ShakespeareChar => shakespeare(5000, 64, 50),
            Preset::Classroom => TrainingConfig { lr: 3e-3, min_lr: 3e-4, warmup_steps: 20, eval_interval: 50, ..shakespeare(500, 16, 4) },
            Preset::Synthetic => TrainingConfig { eval_interval: 200, batch_size: 64, ..shakespeare(3000, 64, 1) },
            Preset::Theory => TrainingConfig { warmup_steps: 20, eval_interval: 50, ..shakespeare(500, 16, 4) },
            // 1,498 training digits: 2,000 steps of 64 is about 85 passes over them.
            Preset::VisionDigits => TrainingConfig { warmup_steps: 100, eval_interval: 100, ..shakespeare(2000, 64, 1) },
            Preset::Gpt2Small | Preset::Gpt2SmallRealloc => gpt(6e-4, 2000),
            Preset::Paper2_300m => gpt(2e-4, 500),
            Preset::Paper2_1_2b => gpt(6e-5, 1000),
        }
    }

    /// Paper 1's per-variant defaults: the identity-query model decays at 2^-5, and so do its
    /// ablations with an identity key or value, so that they differ from it in the one projection.
    /// (The halved attention scale is the model's own default, see
    /// `AttentionVariant::default_scale`.)
    pub fn for_variant(mut self, variant: AttentionVariant) -> Self {
        if variant.has_identity_projection() {
            self.weight_decay = QUERY_IDENTITY_WEIGHT_DECAY;
        }
        self
    }

    /// Learning rate at `step` (0-based): linear warmup, then cosine down to `min_lr`.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.lr * (step + 1) as f64 / (self.warmup_steps + 1) as f64;
        }
        if step >= self.decay_steps {
            return self.min_lr;
        }
        let progress = (step - self.warmup_steps) as f64 / (self.decay_steps - self.warmup_steps).max(1) as f64;
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.min_lr + cosine * (self.lr - self.min_lr)
    }

    /// Tokens consumed by one optimiser step.
    pub fn tokens_per_step(&self, time: usize) -> usize {
        self.batch_size * self.grad_accum * time
    }

    /// Every setting in its range, checked before anything is allocated.
    pub fn validate(&self) -> Result<(), TrainingConfigError> {
        let positive = [
            ("steps", self.steps),
            ("batch_size", self.batch_size),
            ("grad_accum", self.grad_accum),
            ("eval_interval", self.eval_interval),
        ];
        if let Some((name, _)) = positive.into_iter().find(|&(_, value)| value == 0) {
            return Err(TrainingConfigError::Zero(name));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(TrainingConfigError::LearningRate(self.lr));
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0 && self.min_lr <= self.lr) {
            return Err(TrainingConfigError::MinLearningRate { min_lr: self.min_lr, lr: self.lr });
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(TrainingConfigError::WeightDecay(self.weight_decay));
        }
        if let Some((name, value)) = [("beta1", self.beta1), ("beta2", self.beta2)].into_iter().find(|(_, beta)| !(0.0..1.0).contains(beta))
        {
            return Err(TrainingConfigError::Beta { name, value });
        }
        if let Some(clip) = self.grad_clip
            && !(clip.is_finite() && clip > 0.0)
        {
            return Err(TrainingConfigError::GradClip(clip));
        }
        Ok(())
    }
}

/// A training setting out of its range, with the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainingConfigError {
    #[error("{0} is 0: it must be at least 1")]
    Zero(&'static str),
    #[error("lr ({0}) must be a positive number, e.g. 1e-3")]
    LearningRate(f64),
    #[error("min_lr ({min_lr}) must lie in [0, lr = {lr}]")]
    MinLearningRate { min_lr: f64, lr: f64 },
    #[error("weight decay ({0}) must be ≥ 0")]
    WeightDecay(f64),
    #[error("{name} ({value}) must lie in [0, 1)")]
    Beta { name: &'static str, value: f64 },
    #[error("grad_clip ({0}) must be positive; leave it out to turn clipping off")]
    GradClip(f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_min_lr() {
        let c = TrainingConfig::for_preset(Preset::ShakespeareCharCpu);
        assert!(c.lr_at(0) < c.lr_at(50) && c.lr_at(50) < c.lr_at(99));
        assert!((c.lr_at(100) - c.lr).abs() < 1e-12);
        assert!(c.lr_at(1000) < c.lr && c.lr_at(1000) > c.min_lr);
        assert!((c.lr_at(1999) - c.min_lr).abs() < 1e-6);
        assert_eq!(c.lr_at(5000), c.min_lr);
    }

    #[test]
    fn identity_variant_decays_at_two_to_the_minus_five() {
        let c = TrainingConfig::for_preset(Preset::Gpt2Small);
        assert_eq!(c.clone().for_variant(AttentionVariant::Standard).weight_decay, 0.1);
        assert_eq!(c.for_variant(AttentionVariant::QueryIdentity).weight_decay, 2f64.powi(-5));
    }

    #[test]
    fn every_preset_recipe_is_valid_and_bad_values_are_named() {
        for preset in Preset::ALL {
            TrainingConfig::for_preset(preset).validate().unwrap();
        }
        let mut c = TrainingConfig::for_preset(Preset::Classroom);
        c.lr = -1.0;
        assert!(c.validate().unwrap_err().to_string().contains("lr"));
        c.lr = 1e-3;
        c.batch_size = 0;
        assert_eq!(c.validate(), Err(TrainingConfigError::Zero("batch_size")));
    }
}
