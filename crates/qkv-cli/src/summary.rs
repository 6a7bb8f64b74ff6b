//! summary.json: one run's outcome as `qkv train`, `compare` and `experiment` write it, and as the
//! reports read it back.

use serde::{Deserialize, Serialize};

use pollster::FutureExt as _;
use qkv_model::{AttentionVariant, ModelDiagnostics, ParamReport};
use qkv_train::{Batch, Run, RunStatus};

/// One run's outcome, as written to summary.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub variant: AttentionVariant,
    pub name: String,
    pub steps: usize,
    pub tokens: usize,
    pub final_train_loss: Option<f64>,
    pub final_val_loss: Option<f64>,
    pub best_val_loss: Option<f64>,
    pub tokens_per_sec: f64,
    pub wall_secs: f64,
    pub total_params: usize,
    pub kv_cache_bytes_per_token: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence_accuracy: Option<f64>,
    /// The trained model's loss and accuracy on the data's test split, measured once at the end
    /// (images with a test split apart from the validation one; absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_accuracy: Option<f64>,
    /// Finished, or diverged; written as text ("finished", "diverged at step N"), as summaries
    /// and saved seeds have always had it.
    #[serde(with = "status_as_text")]
    pub status: RunStatus,
    /// The trained model's attention diagnostics (docs/diagnostics.md); absent from summaries
    /// written before they existed, and where they could not be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<ModelDiagnostics>,
}

impl RunSummary {
    /// The run's outcome, its diagnostics measured on `val` (the experiment's validation
    /// batches), scored on `test` where the data have a test split. A run that diverged has no
    /// meaningful weights to diagnose or score.
    pub fn of(run: &Run, val: &[Batch], test: Option<&[Batch]>) -> Self {
        let last_eval = run.metrics.evals.last();
        let (diagnostics, test) = match run.status {
            RunStatus::Diverged { .. } => (None, None),
            RunStatus::Training | RunStatus::Finished => {
                (run.diagnose(val).block_on().ok(), test.and_then(|test| run.score(test).block_on().ok()))
            }
        };
        Self {
            variant: run.spec.model.attention.variant,
            name: run.spec.name.clone(),
            steps: run.step,
            tokens: run.tokens(),
            final_train_loss: run.metrics.steps.last().map(|s| s.train_loss),
            final_val_loss: last_eval.map(|e| e.val_loss),
            best_val_loss: run.metrics.best_val_loss(),
            tokens_per_sec: run.tokens() as f64 / run.wall_secs().max(1e-9),
            wall_secs: run.wall_secs(),
            total_params: ParamReport::new(&run.spec.model).total_params,
            kv_cache_bytes_per_token: qkv_model::accounting::kv_cache_bytes_per_token(&run.spec.model, qkv_model::CacheDType::F32),
            accuracy: last_eval.and_then(|e| e.accuracy),
            sequence_accuracy: last_eval.and_then(|e| e.sequence_accuracy),
            test_loss: test.map(|score| score.loss),
            test_accuracy: test.and_then(|score| score.accuracy),
            status: match run.status {
                diverged @ RunStatus::Diverged { .. } => diverged,
                RunStatus::Training | RunStatus::Finished => RunStatus::Finished,
            },
            diagnostics,
        }
    }
}

/// A [`RunStatus`] as the text its `Display` writes (JSON files stay readable and unchanged).
mod status_as_text {
    use qkv_train::RunStatus;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(status: &RunStatus, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(status)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunStatus, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}
