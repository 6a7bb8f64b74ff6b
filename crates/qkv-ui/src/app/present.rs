//! Presentation mode: what a class at the back of the room needs and nothing else. The lesson's
//! point, the loss chart and the costs on the left, the selected head's map large on the right,
//! Train highlighted; no setup and no frame-time readout. Sizes come from
//! [`crate::presentation`].

use egui::{Ui, vec2};

use qkv_session::Command;

use super::Playground;
use crate::lessons::{Costs, LESSONS};
use crate::presentation::MAP_WINDOW;
use crate::qr;
use crate::theory_panel::TheoryPanel;

/// The large map's side, in points, at most: 32 rows of 16 points.
const MAP_SIDE: f32 = 16.0 * MAP_WINDOW as f32;

impl Playground {
    pub(super) fn presentation_ui(&mut self, ui: &mut Ui) {
        egui::Panel::top("presentation_bar").show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                let title = self.lesson.map_or("QKV Lab", |i| LESSONS[i].title);
                ui.heading(title);
                ui.separator();
                self.training_buttons(ui, 100.0);
                ui.separator();
                let contrast = if self.look.high_contrast { "dark (H)" } else { "light (H)" };
                if ui.button(contrast).on_hover_text("the high-contrast light theme, for projectors").clicked() {
                    self.look.high_contrast = !self.look.high_contrast;
                }
                if self.share_link.is_some() && ui.button("QR (Q)").on_hover_text("a QR code of this demo's link").clicked() {
                    self.show_qr = !self.show_qr;
                }
                if ui.button("exit (P)").on_hover_text("leave presentation mode").clicked() {
                    self.look.presenting = false;
                }
            });
            self.news_ui(ui);
        });
        egui::CentralPanel::default().show(ui, |ui| {
            let (width, height) = (ui.available_width(), ui.available_height());
            // The map as large as the height allows, up to 16 points a row; the rest for the
            // lesson, the loss and the costs.
            let map_side = (height - 90.0).min(width * 0.45).clamp(160.0, MAP_SIDE);
            let left = (width - map_side - 110.0).max(200.0);
            ui.horizontal_top(|ui| {
                ui.allocate_ui(vec2(left, height), |ui| {
                    ui.set_min_size(vec2(left, height));
                    ui.set_max_width(left);
                    ui.vertical(|ui| self.presentation_story(ui, height));
                });
                ui.add_space(8.0);
                // A wide table on the left (a long run name) leaves the map less: it shrinks
                // rather than run off the screen.
                let side = map_side.min(ui.available_width() - 60.0).max(160.0);
                ui.vertical(|ui| self.panels.attention.presentation_ui(ui, &self.view, side));
            });
        });
    }

    /// The QR code of the link a class should open, large, while it is asked for (Q); where the
    /// app has no link (the desktop) it says where to find one.
    pub(super) fn qr_window(&mut self, ctx: &egui::Context) {
        let link = self.share_link.as_deref().map(|link| qr::class_link(link, self.lesson));
        self.qr_shown = None;
        egui::Window::new("Open this demo").open(&mut self.show_qr).collapsible(false).resizable(false).show(ctx, |ui| match &link {
            Some(link) => {
                if qr::draw(ui, link, 360.0).is_some() {
                    self.qr_shown = Some(link.clone());
                }
                ui.label(egui::RichText::new(link).small());
            }
            None => {
                ui.label("The browser version (trunk serve, or the project's GitHub Pages site) shows a QR code of its link.");
            }
        });
    }

    /// The lesson's point, its action (the theory lesson's button), the loss chart and the
    /// costs, down the left column.
    fn presentation_story(&mut self, ui: &mut Ui, height: f32) {
        let lesson = self.lesson.map(|i| &LESSONS[i]);
        if let Some(lesson) = lesson {
            ui.label(lesson.point);
            // The theory lesson's action: the setup it trains is the theory preset.
            if self.applied.as_ref().is_some_and(|setup| setup.plan.preset == qkv_model::Preset::Theory)
                && let Some(run) = TheoryPanel::buttons(ui, &self.view)
            {
                self.send(Command::EliminateQuery { run, into: self.view.unused_id() });
            }
        }
        if !self.view.is_loaded() {
            ui.label("Preparing the runs…");
            return;
        }
        // The costs below the chart: a row per run, and their header (the parameters' legend
        // takes two rows more than the KV cache's settings).
        let costs = lesson.map_or(Costs::Parameters, |l| l.costs);
        let header_rows = if costs == Costs::Parameters { 4.0 } else { 3.0 };
        let reserved = (self.view.runs.len() as f32 + header_rows) * 36.0;
        let chart = (ui.available_height() - reserved).max(height * 0.4);
        ui.allocate_ui(vec2(ui.available_width(), chart), |ui| {
            ui.set_min_height(chart);
            self.panels.loss.chart(ui, &self.view);
        });
        ui.separator();
        egui::ScrollArea::vertical().id_salt("presentation_costs").show(ui, |ui| match costs {
            Costs::Parameters => self.panels.costs.params_ui(ui, &self.view),
            Costs::KvCache => self.panels.costs.kv_cache_ui(ui, &self.view),
        });
    }
}
