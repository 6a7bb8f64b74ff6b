//! Small widgets several panels share.

use egui::{Color32, Response, RichText, Ui};

use crate::figures::{Export, Figure};

/// A paragraph that wraps at the side panel's width (the panel scrolls sideways for its tables).
pub(crate) fn wrapped(ui: &mut Ui, text: &str) {
    ui.scope(|ui| {
        // No wider than the panel either: inside a collapsing section it has less than 400.
        ui.set_max_width(ui.available_width().min(400.0));
        ui.label(text);
    });
}

/// `text` in a run's `colour`, in the shade of it that reads on the panel (a run's own colour
/// can be too light on the light theme, or too dark on the dark one).
pub(crate) fn coloured(ui: &mut Ui, colour: Color32, text: impl Into<RichText>) -> Response {
    let shade = crate::palette::readable(colour, ui.visuals().panel_fill);
    ui.label(text.into().color(shade))
}

/// "SVG", "PNG" (and "CSV" where `csv`) buttons exporting `figure`; the one pressed.
pub(crate) fn export_buttons(ui: &mut Ui, figure: Figure, csv: bool) -> Option<Export> {
    let mut export = None;
    ui.label("export");
    if ui.small_button("SVG").on_hover_text(format!("the {} as a vector drawing", figure.stem())).clicked() {
        export = Some(Export::Svg(figure));
    }
    if ui.small_button("PNG").on_hover_text(format!("the {} as on screen", figure.stem())).clicked() {
        export = Some(Export::Png(figure));
    }
    if csv && ui.small_button("CSV").on_hover_text("every run's metrics, a row per step").clicked() {
        export = Some(Export::Csv);
    }
    export
}
