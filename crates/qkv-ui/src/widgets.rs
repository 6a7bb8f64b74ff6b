//! Small widgets several panels share.

use egui::Ui;

/// A paragraph that wraps at the side panel's width (the panel scrolls sideways for its tables).
pub(crate) fn wrapped(ui: &mut Ui, text: &str) {
    ui.scope(|ui| {
        ui.set_max_width(400.0);
        ui.label(text);
    });
}
