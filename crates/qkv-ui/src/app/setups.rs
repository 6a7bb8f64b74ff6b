//! The setup the user edits, and the one the session was last loaded with.

use crate::setup_panel::Setup;

pub(super) struct Setups {
    /// The setup being edited.
    pub(super) edited: Setup,
    /// The setup the session was last loaded with (what a shared link opens).
    pub(super) applied: Option<Setup>,
}

impl Setups {
    /// The edited setup differs from the loaded one: Apply (or Train) would load it.
    pub(super) fn changed(&self) -> bool {
        self.applied.as_ref().is_some_and(|applied| applied != &self.edited)
    }

    /// The edited setup still waits to be loaded (never loaded, or changed since).
    pub(super) fn unloaded(&self) -> bool {
        self.applied.as_ref() != Some(&self.edited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_is_changed_once_edited_after_loading() {
        let mut setups = Setups { edited: Setup::default(), applied: None };
        assert!(setups.unloaded() && !setups.changed(), "nothing loaded yet is not a change");
        setups.applied = Some(setups.edited.clone());
        assert!(!setups.unloaded() && !setups.changed());
        setups.edited.plan.training.steps = Some(7);
        assert!(setups.unloaded() && setups.changed());
    }
}
