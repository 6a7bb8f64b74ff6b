//! A run's name in an experiment, from the engine's events up to the front end's messages.

use serde::{Deserialize, Serialize};

/// A run, by the same number in every event and message for as long as its experiment is loaded:
/// by default its position in the experiment; a session that trains a share of a larger one
/// names its runs by their positions in the whole, and a run added later by the number its
/// command gave it (`Experiment::name_runs`, `Experiment::add_run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub usize);

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
