//! Small widgets several panels share.

use egui::Ui;

use crate::figures::{Export, Figure};

/// A paragraph that wraps at the side panel's width (the panel scrolls sideways for its tables).
pub(crate) fn wrapped(ui: &mut Ui, text: &str) {
    ui.scope(|ui| {
        ui.set_max_width(400.0);
        ui.label(text);
    });
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
