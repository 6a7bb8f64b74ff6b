//! What a seed of a study leaves behind: each run's outcome, saved once the seed finishes so
//! that a study can be finished seed by seed, over several sittings or machines.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use qkv_model::random::INITIAL_WEIGHTS_SCHEME;
use qkv_train::checkpoint::write_atomically;
use qkv_train::plan::ExperimentPlan;
use qkv_train::{Batch, Run};

use crate::Failure;
use crate::report::LossCurve;
use crate::summary::RunSummary;

/// A run's outcome in one seed: what `qkv train` summarises, where it stood, and its curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Outcome {
    pub(super) study: String,
    pub(super) seed: u64,
    pub(super) kv_heads: Option<usize>,
    pub(super) weight_decay: f64,
    pub(super) summary: RunSummary,
    pub(super) curve: LossCurve,
    /// (step, held-out accuracy) at every evaluation that measured one (a task with answers);
    /// empty in seeds saved before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) accuracy: Vec<(usize, f64)>,
}

/// The per-token accuracy a run must reach for a task to count as learned.
pub(super) const LEARNED: f64 = 0.99;

/// The studies `outcomes` belong to, in the order they first appear.
pub(super) fn studies_of(outcomes: &[Outcome]) -> Vec<&str> {
    let mut studies: Vec<&str> = Vec::new();
    for o in outcomes {
        if !studies.contains(&o.study.as_str()) {
            studies.push(&o.study);
        }
    }
    studies
}

/// A finished seed of a study, saved the moment it finishes. A later invocation reports it
/// without training it again, even where its checkpoints are gone: a study that takes longer
/// than one sitting (or one machine) is finished seed by seed, and nothing finished is lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SeedResult {
    /// The plan the seed trained with, seed included: a result is reused for this plan only.
    pub(super) plan: ExperimentPlan,
    /// When, where and by which command it finished (a study's seeds may come from several
    /// sittings and machines).
    pub(super) finished: String,
    pub(super) compute: String,
    pub(super) command: String,
    /// How the seed's initial weights were drawn ([`INITIAL_WEIGHTS_SCHEME`]; files written
    /// before it was recorded drew them in order, scheme 1).
    #[serde(default = "first_scheme")]
    pub(super) initial_weights: u32,
    pub(super) outcomes: Vec<Outcome>,
}

fn first_scheme() -> u32 {
    1
}

impl SeedResult {
    pub(super) fn path(out: &Path, study: &str, seed: u64) -> PathBuf {
        out.join("seeds").join(study).join(format!("seed-{seed}.json"))
    }

    /// The result saved at `path` for `plan`, or None where that seed has not finished.
    pub(super) fn load(path: &Path, plan: &ExperimentPlan) -> Result<Option<SeedResult>, Failure> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
        };
        let saved: SeedResult = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a finished seed's results ({e}): delete it to train that seed again", path.display()))?;
        if saved.initial_weights != INITIAL_WEIGHTS_SCHEME {
            return Err(format!(
                "{} holds a seed whose initial weights were drawn another way (scheme {}, now {INITIAL_WEIGHTS_SCHEME}): its runs \
                 would not pair with new ones; give another --out, or delete it to train that seed again",
                path.display(),
                saved.initial_weights
            )
            .into());
        }
        if saved.plan != *plan {
            return Err(format!(
                "{} holds a seed trained with another plan (other steps, data or runs): give another --out, \
                 or delete it to train that seed again",
                path.display()
            )
            .into());
        }
        Ok(Some(saved))
    }

    pub(super) fn save(&self, path: &Path) -> Result<(), Failure> {
        let json = serde_json::to_string(self).map_err(|e| format!("cannot encode {}: {e}", path.display()))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        Ok(write_atomically(path, json.as_bytes())?)
    }
}

impl Outcome {
    /// The run's outcome, its diagnostics measured on `val`.
    pub(super) fn of(study: &str, seed: u64, run: &Run, val: &[Batch], test: Option<&[Batch]>) -> Self {
        Self {
            study: study.to_string(),
            seed,
            kv_heads: run.spec.model.attention.kv_heads,
            weight_decay: run.spec.training.weight_decay,
            summary: RunSummary::of(run, val, test),
            curve: LossCurve::of(run),
            accuracy: run.metrics.evals.iter().filter_map(|e| Some((e.step, e.accuracy?))).collect(),
        }
    }

    /// The first evaluated step at which the run's accuracy reached [`LEARNED`]; None where it
    /// never did (or measured none).
    pub(super) fn steps_to_learn(&self) -> Option<usize> {
        self.accuracy.iter().find(|(_, accuracy)| *accuracy >= LEARNED).map(|(step, _)| *step)
    }

    /// The trained model's symmetry score, mean over layers and heads (docs/diagnostics.md).
    pub(super) fn symmetry(&self) -> Option<f64> {
        self.summary.diagnostics.as_ref()?.mean_symmetry()
    }
}
