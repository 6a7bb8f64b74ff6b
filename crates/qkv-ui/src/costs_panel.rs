//! What each run costs: parameters split by component as stacked bars, totals and the change
//! against the standard run, and the KV cache per token and at a chosen context and dtype.
//! Every figure comes from the model crate's accounting.

use egui::{Color32, ComboBox, DragValue, Grid, RichText, Sense, Stroke, Ui, vec2};
use qkv_model::accounting::kv_cache_bytes_per_token;
use qkv_model::{CacheDType, ParamReport};

use crate::palette;
use crate::view::SessionView;

/// Component groups of the bars, in drawing order.
const GROUPS: [(&str, Color32, &[&str]); 8] = [
    ("embeddings", Color32::from_rgb(150, 150, 150), &["token embedding", "position embedding", "LM head"]),
    ("W_Q", palette::W_Q, &["W_Q"]),
    ("W_K", palette::W_K, &["W_K"]),
    ("W_V", palette::W_V, &["W_V"]),
    ("shared W", palette::SHARED_W, &["W_QK", "W_KV", "W_QKV"]),
    ("W_O", palette::W_O, &["W_O", "attention biases", "asymmetry term"]),
    ("MLP", Color32::from_rgb(86, 180, 233), &["MLP in", "MLP out", "MLP biases"]),
    ("norms", Color32::from_rgb(240, 228, 66), &["block norms", "final norm"]),
];

/// Parameters of `report` in each of [`GROUPS`].
pub fn group_params(report: &ParamReport) -> [usize; GROUPS.len()] {
    GROUPS.map(|(_, _, names)| report.components.iter().filter(|c| names.contains(&c.name.as_str())).map(|c| c.params).sum())
}

pub struct CostsPanel {
    pub context: usize,
    pub dtype: CacheDType,
}

impl Default for CostsPanel {
    fn default() -> Self {
        Self { context: 2048, dtype: CacheDType::F16 }
    }
}

fn human_bytes(bytes: f64) -> String {
    match bytes {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

fn percent(value: usize, reference: usize) -> String {
    if reference == 0 {
        return String::new();
    }
    format!("{:+.2}%", 100.0 * (value as f64 - reference as f64) / reference as f64)
}

/// Below this width (a phone) the parameter table gives totals in millions only, the exact
/// count on hover, so that its columns fit.
const NARROW: f32 = 400.0;

/// The width of a table's bars in `ui`: what its other columns leave, given as `columns` times
/// the body text's size (300 points for the parameter table's at egui's usual 12.5-point text,
/// more at presentation mode's larger text), and no less than `least`.
fn bar_width(ui: &Ui, columns: f32, least: f32) -> f32 {
    let body = egui::TextStyle::Body.resolve(ui.style()).size;
    (ui.available_width() - columns * body).max(least)
}

impl CostsPanel {
    /// Every run's parameters by component, then its KV cache.
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) {
        if !view.is_loaded() {
            ui.label("Apply a setup to see what each run costs.");
            return;
        }
        self.params_ui(ui, view);
        ui.separator();
        self.kv_cache_ui(ui, view, 14.0);
    }

    /// Every run's parameters as a bar by component, its total, and the change against the
    /// reference run.
    pub fn params_ui(&mut self, ui: &mut Ui, view: &SessionView) {
        let Some(reference) = view.reference() else { return };
        let widest = view.runs.iter().map(|r| r.info.params.total_params).max().unwrap_or(1).max(1);

        ui.horizontal_wrapped(|ui| {
            for (name, colour, _) in GROUPS {
                let (rect, _) = ui.allocate_exact_size(vec2(12.0, 12.0), Sense::hover());
                ui.painter().rect_filled(rect, 2.0, colour);
                ui.label(name);
            }
        });
        let narrow = ui.available_width() < NARROW;
        let bar_width = if narrow { bar_width(ui, 18.0, 40.0) } else { bar_width(ui, 24.0, 80.0) };
        Grid::new("costs_bars").num_columns(4).spacing([10.0, 6.0]).show(ui, |ui| {
            ui.label(RichText::new("run").weak());
            ui.label(RichText::new("parameters by component").weak());
            ui.label(RichText::new("total").weak());
            ui.label(RichText::new(format!("vs {}", reference.label())).weak());
            ui.end_row();
            for run in &view.runs {
                crate::widgets::coloured(ui, run.colour, run.label()).on_hover_text(run.name());
                let groups = group_params(&run.info.params);
                let total = run.info.params.total_params;
                let (rect, response) = ui.allocate_exact_size(vec2(bar_width, 18.0), Sense::hover());
                let mut x = rect.left();
                let mut hovered = None;
                for (i, &params) in groups.iter().enumerate() {
                    let w = bar_width * params as f32 / widest as f32;
                    let segment = egui::Rect::from_min_size(egui::pos2(x, rect.top()), vec2(w, rect.height()));
                    ui.painter().rect_filled(segment, 0.0, GROUPS[i].1);
                    if response.hover_pos().is_some_and(|p| segment.contains(p)) {
                        hovered = Some(i);
                    }
                    x += w;
                }
                ui.painter().rect_stroke(rect, 0.0, Stroke::new(1.0, ui.visuals().weak_text_color()), egui::StrokeKind::Inside);
                if let Some(i) = hovered {
                    response.on_hover_text(format!(
                        "{}: {} parameters ({:.1}% of the model)",
                        GROUPS[i].0,
                        groups[i],
                        100.0 * groups[i] as f64 / total as f64
                    ));
                }
                if narrow {
                    ui.label(format!("{:.3} M", total as f64 / 1e6)).on_hover_text(format!("{total} parameters"));
                } else {
                    ui.label(format!("{total} ({:.3} M)", total as f64 / 1e6));
                }
                ui.label(percent(total, reference.info.params.total_params));
                ui.end_row();
            }
        });
    }

    /// Every run's KV cache per token and per sequence at the chosen context and precision, as
    /// bars `bar_height` points high (a lesson about the cache draws them large).
    pub fn kv_cache_ui(&mut self, ui: &mut Ui, view: &SessionView, bar_height: f32) {
        let Some(reference) = view.reference() else { return };
        if view.runs.iter().all(|run| run.info.spec.model.attention.bidirectional) {
            ui.label(RichText::new("KV cache").strong());
            ui.label("none: these models are encoders, which read their whole input at once and generate nothing");
            return;
        }
        let bar_width = bar_width(ui, 26.0, 30.0);
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new("KV cache").strong());
            ui.label("at context");
            ui.add(DragValue::new(&mut self.context).range(1..=1_000_000)).accessible_name("context length");
            ComboBox::from_id_salt("costs_dtype")
                .selected_text(self.dtype.to_string())
                .show_ui(ui, |ui| {
                    for dtype in [CacheDType::F32, CacheDType::F16, CacheDType::Bf16] {
                        ui.selectable_value(&mut self.dtype, dtype, dtype.to_string());
                    }
                })
                .response
                .accessible_name("cache dtype");
        });
        let reference_bytes = kv_cache_bytes_per_token(&reference.info.spec.model, self.dtype);
        let widest = view.runs.iter().map(|r| kv_cache_bytes_per_token(&r.info.spec.model, self.dtype)).max().unwrap_or(1).max(1);
        Grid::new("costs_kv").num_columns(5).spacing([10.0, 6.0]).show(ui, |ui| {
            for header in ["run", "", "per token", "per sequence", "change"] {
                ui.label(RichText::new(header).weak());
            }
            ui.end_row();
            for run in &view.runs {
                let per_token = kv_cache_bytes_per_token(&run.info.spec.model, self.dtype);
                crate::widgets::coloured(ui, run.colour, run.label()).on_hover_text(run.name());
                let (rect, _) = ui.allocate_exact_size(vec2(bar_width, bar_height), Sense::hover());
                let filled = egui::Rect::from_min_size(rect.min, vec2(rect.width() * per_token as f32 / widest as f32, rect.height()));
                ui.painter().rect_filled(filled, 0.0, run.colour);
                ui.label(human_bytes(per_token as f64));
                ui.label(human_bytes(per_token as f64 * self.context as f64));
                ui.label(percent(per_token, reference_bytes));
                ui.end_row();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qkv_model::AttentionVariant;
    use qkv_model::Preset;

    #[test]
    fn the_groups_hold_every_parameter_exactly_once() {
        for variant in AttentionVariant::ALL {
            for preset in [Preset::Classroom, Preset::Theory, Preset::Synthetic] {
                let report = ParamReport::new(&preset.config().with_variant(variant));
                assert_eq!(group_params(&report).iter().sum::<usize>(), report.total_params, "{variant} {preset}");
            }
        }
        let identity = ParamReport::new(&Preset::Classroom.config().with_variant(AttentionVariant::QueryIdentity));
        assert_eq!(group_params(&identity)[1], 0, "no W_Q bar for Q = I");
    }
}
