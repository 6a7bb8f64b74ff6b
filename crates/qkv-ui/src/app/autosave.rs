//! Keeping the runs where the platform keeps them (the browser): a snapshot of every run each
//! [`AUTOSAVE_EVERY`] steps and when training ends, and the runs kept from an earlier start,
//! offered until continued or dismissed.

use crate::files::{KeptInbox, KeptRuns};

/// Steps between two autosaves of every run, where the platform keeps runs (the browser): a
/// checkpoint of the classroom demo's two runs is about 2.6 MB, written in the background.
pub(super) const AUTOSAVE_EVERY: usize = 50;

#[derive(Default)]
pub(super) struct Autosave {
    /// Where the platform hands over the runs it kept from an earlier start.
    pub(super) kept: KeptInbox,
    /// Those runs, offered until continued or dismissed.
    pub(super) offer: Option<KeptRuns>,
    /// The experiment step of the last snapshot asked for.
    pub(super) saved_at: usize,
}

impl Autosave {
    /// Whether to ask for a snapshot at experiment step `step`: every [`AUTOSAVE_EVERY`] steps,
    /// and once more when training has `finished` past the last one.
    pub(super) fn due(&self, step: usize, finished: bool) -> bool {
        step >= self.saved_at + AUTOSAVE_EVERY || (finished && step > self.saved_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_every_fifty_steps_and_at_the_end() {
        let autosave = Autosave { saved_at: 50, ..Autosave::default() };
        assert!(!autosave.due(99, false));
        assert!(autosave.due(100, false));
        assert!(autosave.due(73, true), "finished past the last snapshot");
        assert!(!autosave.due(50, true), "finished where the last one was taken");
    }
}
