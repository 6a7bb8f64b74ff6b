//! What a run records: what it is (its spec), each step and evaluation, and how it ended.

use serde::{Deserialize, Serialize};

use qkv_model::ModelConfig;

use crate::recipe::TrainingConfig;

/// What a run is: a name, a model and how to train it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub name: String,
    pub model: ModelConfig,
    pub training: TrainingConfig,
}

/// Metrics of one optimiser step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 1-based: the number of optimiser steps taken.
    pub step: usize,
    pub train_loss: f64,
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Training tokens seen so far.
    pub tokens: usize,
    pub tokens_per_sec: f64,
    /// Seconds this run has spent training so far.
    pub wall_secs: f64,
}

/// Metrics of one evaluation on the fixed validation batches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub step: usize,
    pub tokens: usize,
    pub wall_secs: f64,
    pub val_loss: f64,
    /// Per-token accuracy on the answer positions (synthetic tasks).
    pub accuracy: Option<f64>,
    /// Share of validation examples answered entirely right (synthetic tasks).
    pub sequence_accuracy: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub steps: Vec<StepRecord>,
    pub evals: Vec<EvalRecord>,
}

impl Metrics {
    pub fn best_val_loss(&self) -> Option<f64> {
        self.evals.iter().map(|e| e.val_loss).filter(|l| l.is_finite()).reduce(f64::min)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum RunStatus {
    Training,
    Finished,
    /// The loss became NaN or infinite at this step; the run stops, the others go on.
    Diverged {
        step: usize,
    },
}

/// As people read it, and as summaries and result tables write it: "training", "finished",
/// "diverged at step N".
impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunStatus::Training => f.write_str("training"),
            RunStatus::Finished => f.write_str("finished"),
            RunStatus::Diverged { step } => write!(f, "diverged at step {step}"),
        }
    }
}

/// A status that is not one [`RunStatus`] writes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown run status {0:?}: expected \"training\", \"finished\" or \"diverged at step N\"")]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for RunStatus {
    type Err = UnknownStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "training" => Ok(RunStatus::Training),
            "finished" => Ok(RunStatus::Finished),
            _ => text
                .strip_prefix("diverged at step ")
                .and_then(|step| step.parse().ok())
                .map(|step| RunStatus::Diverged { step })
                .ok_or_else(|| UnknownStatus(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_back_as_written() {
        for status in [RunStatus::Training, RunStatus::Finished, RunStatus::Diverged { step: 17 }] {
            assert_eq!(status.to_string().parse::<RunStatus>(), Ok(status));
        }
        assert_eq!(RunStatus::Diverged { step: 3 }.to_string(), "diverged at step 3");
        for text in ["", "Finished", "diverged", "diverged at step x"] {
            assert_eq!(text.parse::<RunStatus>(), Err(UnknownStatus(text.to_string())), "{text:?}");
        }
    }
}
