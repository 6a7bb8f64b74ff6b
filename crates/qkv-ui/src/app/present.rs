//! Presentation mode: what a class at the back of the room needs and nothing else. The lesson's
//! point and the loss chart on the left; on the right what the lesson sets side by side (its
//! [`Screen`]): two runs' maps of the head where they differ most, or the KV-cache bars large;
//! Train highlighted; no setup and no frame-time readout. Sizes come from
//! [`crate::presentation`].

use egui::{Ui, vec2};

use qkv_session::Command;

use super::Playground;
use super::layout::ONE_COLUMN_BELOW;
use crate::lessons::{LESSONS, Panel, Screen};
use crate::presentation::MAP_WINDOW;
use crate::qr;
use crate::theory_panel::TheoryPanel;
use crate::verdict::Measure;

/// The KV-cache bars' height on a lesson's screen about the cache: the bars are its point.
const KV_BAR_HEIGHT: f32 = 36.0;

/// The charts' height in a phone's one column, which scrolls.
const PHONE_CHART_HEIGHT: f32 = 360.0;

/// A map's side, in points, at most: 32 rows of 16 points.
const MAP_SIDE: f32 = 16.0 * MAP_WINDOW as f32;

impl Playground {
    pub(super) fn presentation_ui(&mut self, ui: &mut Ui) {
        let one_column = ui.available_width() < ONE_COLUMN_BELOW;
        egui::Panel::top("presentation_bar").show(ui, |ui| {
            let title = self.lesson.index.map_or("QKV Lab", |i| LESSONS[i].title);
            if one_column {
                // A title of its own: wrapped among the buttons it ran into them.
                ui.heading(title);
            }
            ui.horizontal_wrapped(|ui| {
                if !one_column {
                    ui.heading(title);
                    ui.separator();
                }
                self.training_buttons(ui, 100.0);
                ui.separator();
                let contrast = if self.look.chosen.high_contrast { "dark (H)" } else { "light (H)" };
                if ui.button(contrast).on_hover_text("the high-contrast light theme, for projectors").clicked() {
                    self.look.chosen.high_contrast = !self.look.chosen.high_contrast;
                }
                if self.exports.share_link.is_some() && ui.button("QR (Q)").on_hover_text("a QR code of this demo's link").clicked() {
                    self.overlays.show_qr = !self.overlays.show_qr;
                }
                if ui.button("exit (P)").on_hover_text("leave presentation mode").clicked() {
                    self.look.chosen.presenting = false;
                }
            });
            self.news_ui(ui);
        });
        let screen = self.lesson.index.map_or(Screen::Maps, |i| LESSONS[i].screen);
        egui::CentralPanel::default().show(ui, |ui| {
            let (width, height) = (ui.available_width(), ui.available_height());
            if one_column {
                // The point and the curves, then the contrast under them, scrolled.
                egui::ScrollArea::vertical().id_salt("presentation_column").show(ui, |ui| {
                    self.presentation_story(ui, None, screen);
                    ui.separator();
                    self.presentation_contrast(ui, screen, width, height);
                });
                return;
            }
            // The right half for the lesson's contrast, the rest for its point and the curves.
            let right = (width * 0.5).max(300.0);
            let left = (width - right - 16.0).max(200.0);
            ui.horizontal_top(|ui| {
                ui.allocate_ui(vec2(left, height), |ui| {
                    ui.set_min_size(vec2(left, height));
                    ui.set_max_width(left);
                    ui.vertical(|ui| self.presentation_story(ui, Some(height), screen));
                });
                ui.add_space(16.0);
                ui.vertical(|ui| {
                    // What the left column and the margins leave, which can be less than half.
                    let right = ui.available_width().min(right);
                    ui.set_max_width(right);
                    self.presentation_contrast(ui, screen, right, height);
                });
            });
        });
    }

    /// What the lesson sets side by side, in `width` × `height`: the KV-cache bars, or two
    /// runs' maps of one head.
    fn presentation_contrast(&mut self, ui: &mut Ui, screen: Screen, width: f32, height: f32) {
        match screen {
            Screen::KvCache => {
                (self.panels.attention.maps_drawn, self.panels.attention.presented) = (0, Vec::new());
                let bars = egui::ScrollArea::vertical()
                    .id_salt("presentation_cache")
                    .show(ui, |ui| self.panels.costs.kv_cache_ui(ui, &self.view, KV_BAR_HEIGHT));
                self.outline(ui, Panel::Costs, bars.inner_rect.intersect(ui.min_rect()));
            }
            Screen::Maps | Screen::Elimination => {
                let runs = self.compared_runs(screen);
                // Two maps and their token labels across the width, and under them a caption, a
                // colour bar and its legend.
                let beside = runs.len().max(1) as f32;
                let side = ((width - 40.0 * beside) / beside).min(height - 160.0).clamp(120.0, MAP_SIDE);
                let maps = ui.scope(|ui| self.panels.attention.presentation_ui(ui, &self.view, &runs, side));
                self.outline(ui, Panel::Maps, maps.response.rect);
            }
        }
    }

    /// The runs a maps screen sets side by side: the reference and the first other run, or the
    /// original and its copy once W_Q was eliminated (the original alone before).
    fn compared_runs(&self, screen: Screen) -> Vec<usize> {
        let runs = &self.view.runs;
        let index = |id| runs.iter().position(|r| r.info.id == id);
        match (screen, &self.view.conversion) {
            (Screen::Elimination, Some((from, _))) => {
                let copy = runs.iter().rposition(|r| r.born_at.is_some());
                index(*from).into_iter().chain(copy).collect()
            }
            (Screen::Elimination, None) => vec![0],
            _ => {
                let Some(reference) = self.view.reference().and_then(|r| index(r.info.id)) else { return Vec::new() };
                let other = (0..runs.len()).find(|&i| i != reference);
                std::iter::once(reference).chain(other).collect()
            }
        }
    }

    /// The QR code of the link a class should open, large, while it is asked for (Q); where the
    /// app has no link (the desktop) it says where to find one.
    pub(super) fn qr_window(&mut self, ctx: &egui::Context) {
        let link = self.exports.share_link.as_deref().map(|link| qr::class_link(link, self.lesson.index));
        self.overlays.qr_shown = None;
        egui::Window::new("Open this demo").open(&mut self.overlays.show_qr).collapsible(false).resizable(false).show(
            ctx,
            |ui| match &link {
                Some(link) => {
                    if qr::draw(ui, link, 360.0).is_some() {
                        self.overlays.qr_shown = Some(link.clone());
                    }
                    ui.label(egui::RichText::new(link).small());
                }
                None => {
                    ui.label("The browser version (trunk serve, or the project's GitHub Pages site) shows a QR code of its link.");
                }
            },
        );
    }

    /// One worked example of an encoder task, on the list the maps show: "for example: 7 9 8 3
    /// becomes 3 7 9 8" (the task's own answer, not the model's).
    fn worked_example(&self) -> Option<String> {
        let qkv_train::DataSource::Synthetic { task, framing: qkv_train::Framing::Encoder, .. } = self.setup.applied.as_ref()?.plan.data
        else {
            return None;
        };
        let digits: Vec<u32> = self.view.attention()?.tokens.iter().map(|t| t.trim().parse().ok()).collect::<Option<_>>()?;
        let list = |xs: &[u32]| xs.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
        Some(format!("For example: {} becomes {}", list(&digits), list(&task.target(&digits))))
    }

    /// The lesson's point, its action (the theory lesson's button), the loss chart and, where
    /// the screen is about parameters, their bars, down the left column of `height`, or down
    /// the one column of a phone, scrolled (`None`).
    fn presentation_story(&mut self, ui: &mut Ui, height: Option<f32>, screen: Screen) {
        let lesson = self.lesson.index.map(|i| &LESSONS[i]);
        if let Some(lesson) = lesson {
            ui.label(lesson.point);
            if let Some(example) = self.worked_example() {
                ui.label(example);
            }
            self.card_ui(ui);
            // The theory lesson's action: the setup it trains is the theory preset.
            if self.setup.applied.as_ref().is_some_and(|setup| setup.plan.preset == qkv_model::Preset::Theory) {
                let buttons = ui.scope(|ui| TheoryPanel::buttons(ui, &self.view, self.awaits_elimination()));
                self.outline(ui, Panel::Theory, buttons.response.rect);
                if let Some(run) = buttons.inner {
                    self.send(Command::EliminateQuery { run, into: self.view.unused_id() });
                }
            }
        }
        if !self.view.is_loaded() {
            ui.label("Preparing the runs…");
            return;
        }
        // The parameter bars below the chart: a row per run, the header, and the legend's two
        // rows. A task judged by accuracy gives their room to its second chart, the accuracy.
        let params = screen != Screen::KvCache && Measure::of(&self.view) == Measure::ValidationLoss;
        let reserved = if params { (self.view.runs.len() as f32 + 5.0) * 36.0 } else { 0.0 };
        let chart = height.map_or(PHONE_CHART_HEIGHT, |height| (ui.available_height() - reserved).max(height * 0.4));
        let drawn = ui.allocate_ui(vec2(ui.available_width(), chart), |ui| {
            ui.set_min_height(chart);
            self.panels.loss.chart(ui, &self.view);
        });
        self.outline(ui, Panel::Loss, drawn.response.rect);
        if params {
            ui.separator();
            let bars =
                egui::ScrollArea::vertical().id_salt("presentation_costs").show(ui, |ui| self.panels.costs.params_ui(ui, &self.view));
            self.outline(ui, Panel::Costs, bars.inner_rect);
        }
    }
}
