//! How the playground looks: presentation mode and the theme as the user chose them, set on the
//! context's style only when they change.

use crate::presentation::Look;

#[derive(Default)]
pub(super) struct Appearance {
    /// Presentation mode and the theme, as the user chose them.
    pub(super) chosen: Look,
    /// The style the shell gave the app, which each look starts from (taken at the first frame).
    pub(super) shell_style: Option<std::sync::Arc<egui::Style>>,
    /// The look the context's style was last set to.
    pub(super) applied: Option<Look>,
}

impl Appearance {
    /// Sets the context's style to the chosen look when it changed; whether it did.
    pub(super) fn apply(&mut self, ctx: &egui::Context) -> bool {
        if self.applied == Some(self.chosen) {
            return false;
        }
        let shell = self.shell_style.get_or_insert_with(|| ctx.global_style());
        ctx.set_global_style(self.chosen.style(shell));
        self.applied = Some(self.chosen);
        // This frame was laid out with the old style.
        ctx.request_repaint();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_style_is_set_once_per_change_of_look_from_the_shell_s() {
        let ctx = egui::Context::default();
        let shell_size = ctx.global_style().text_styles[&egui::TextStyle::Body].size;
        let mut appearance = Appearance::default();
        assert!(appearance.apply(&ctx), "the first frame sets it");
        assert!(!appearance.apply(&ctx), "unchanged: left alone");
        appearance.chosen.presenting = true;
        assert!(appearance.apply(&ctx));
        let presenting_size = ctx.global_style().text_styles[&egui::TextStyle::Body].size;
        assert!(presenting_size > shell_size, "presentation mode is larger: {presenting_size} against {shell_size}");
        appearance.chosen.presenting = false;
        assert!(appearance.apply(&ctx));
        assert_eq!(ctx.global_style().text_styles[&egui::TextStyle::Body].size, shell_size, "back to the shell's, not compounded");
    }
}
