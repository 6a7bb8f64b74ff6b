//! What the playground lays over its panels: the note for the user, the list of keys, the QR
//! code of the demo's link, and the developers' readouts.

use crate::frame_timer::FrameTimer;

#[derive(Default)]
pub(super) struct Overlays {
    /// The latest note for the user (saved files, errors of the shell's own work), and whether
    /// it reports a problem.
    pub(super) notice: Option<(String, bool)>,
    /// The list of keys is open (`?`).
    pub(super) show_keys: bool,
    /// The QR code of the demo's link is open (`Q`).
    pub(super) show_qr: bool,
    /// The link the QR code drawn in the last frame holds (for tests).
    pub(super) qr_shown: Option<String>,
    /// The developers' readouts (frame time) are shown in the top bar.
    pub(super) show_readouts: bool,
    pub(super) frames: FrameTimer,
}

impl Overlays {
    /// The note, and whether it reports a problem.
    pub(super) fn notice(&self) -> Option<(&str, bool)> {
        self.notice.as_ref().map(|(text, is_problem)| (text.as_str(), *is_problem))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_note_replaces_the_one_before() {
        let mut overlays = Overlays::default();
        assert_eq!(overlays.notice(), None);
        overlays.notice = Some(("saved loss.svg".into(), false));
        overlays.notice = Some(("cannot write loss.png".into(), true));
        assert_eq!(overlays.notice(), Some(("cannot write loss.png", true)));
    }
}
