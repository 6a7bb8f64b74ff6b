//! What the screen shows: the tab, and the controls a link (or the command line) hid.

use super::Tab;
use crate::hidden::Hidden;

pub(super) struct Shown {
    pub(super) tab: Tab,
    /// The controls the link or the command line hid.
    pub(super) hidden: Hidden,
}

impl Default for Shown {
    fn default() -> Self {
        Self { tab: Tab::Playground, hidden: Hidden::default() }
    }
}
