//! Paper 1's change of basis on a trained run: pick a standard run, and the converted model
//! (W_Q = I) joins as a new run; the report says how exactly it matches. The theory is in
//! docs/theory.md.

use egui::{RichText, Ui};

use qkv_session::RunId;

use crate::intent::Intent;
use crate::view::{RunView, SessionView};

#[derive(Default)]
pub struct TheoryPanel;

/// A run whose W_Q can be eliminated: the standard variant, GQA and MQA included.
fn has_w_q(run: &&RunView) -> bool {
    run.info.spec.model.attention.variant == qkv_model::AttentionVariant::Standard
}

impl TheoryPanel {
    /// An "Eliminate W_Q" button per standard run, highlighted as Train is where `highlight`
    /// (the lesson paused for it to be pressed); the run whose button was pressed.
    pub fn buttons(ui: &mut Ui, view: &SessionView, highlight: bool) -> Option<RunId> {
        let mut convert = None;
        ui.horizontal_wrapped(|ui| {
            for run in view.runs.iter().filter(has_w_q) {
                let text = format!("Eliminate W_Q from {}", run.label());
                let visuals = ui.visuals();
                let button = if highlight {
                    egui::Button::new(RichText::new(text).strong().color(visuals.selection.stroke.color)).fill(visuals.selection.bg_fill)
                } else {
                    egui::Button::new(text)
                };
                if ui.add(button).clicked() {
                    convert = Some(run.info.id);
                }
            }
        });
        convert
    }

    /// Returns the run whose W_Q the user asked to eliminate.
    /// `highlight`: the lesson paused for the button to be pressed.
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView, highlight: bool) -> Option<Intent> {
        crate::widgets::wrapped(
            ui,
            "Any invertible matrix T can be folded into the layer's input: X becomes XT and each of W_Q, W_K, W_V \
             becomes T^-1 W. With T = W_Q the query weight becomes I. Exact without LayerNorm, for one layer, \
             without the MLP skip, or with shared layers; approximate with LayerNorm.",
        );
        let standard = view.runs.iter().any(|run| has_w_q(&run));
        if !standard {
            ui.label(RichText::new("No standard run to convert: add one, or open the lesson 'Is W_Q needed?'.").weak());
        }
        let convert = Self::buttons(ui, view, highlight);
        if let Some((from, report)) = &view.conversion {
            let name = view.run(*from).map_or("?", |r| r.label());
            let change = 100.0 * (report.params_after as f64 - report.params_before as f64) / report.params_before as f64;
            egui::Grid::new("theory_report").num_columns(2).show(ui, |ui| {
                ui.label("converted");
                ui.label(format!(
                    "{name} at step {} ({}, {})",
                    report.steps,
                    report.case,
                    if report.exact { "exact" } else { "approximate" }
                ));
                ui.end_row();
                ui.label("parameters");
                ui.label(format!("{} -> {} ({change:+.2}%)", report.params_before, report.params_after));
                ui.end_row();
                ui.label("max |logit difference|");
                ui.label(format!("{:.2e} (mean {:.2e})", report.max_abs_logit_diff, report.mean_abs_logit_diff));
                ui.end_row();
                ui.label("val loss");
                ui.label(format!("{:.4} -> {:.4}", report.val_loss_before, report.val_loss_after));
                ui.end_row();
                if let Some(plain) = &report.without_fit {
                    ui.label("without the fit");
                    ui.label(format!("{:.4} (max |logit difference| {:.2e})", plain.val_loss_after, plain.max_abs_logit_diff))
                        .on_hover_text("the same conversion without fitting each head's basis to bring W_Q near the identity first");
                    ui.end_row();
                }
                ui.label("condition of W_Q");
                ui.label(report.condition_numbers.iter().map(|c| format!("{c:.1}")).collect::<Vec<_>>().join(", "));
                ui.end_row();
            });
        }
        convert.map(Intent::EliminateQuery)
    }
}
