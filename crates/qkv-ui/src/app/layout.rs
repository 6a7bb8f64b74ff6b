//! What the playground draws: the top bar (lessons, Train/Pause/Step/Reset, tabs, compute), the
//! side panel (lesson text, setup, throughput, theory, files) and the playground tab (loss, costs,
//! attention maps). Each panel returns what the user asked for; this turns it into the
//! playground's intents.

use egui::{RichText, Ui};
use web_time::Instant;

use super::{Playground, Tab};
use crate::hidden::Part;
use crate::lessons::{LESSONS, Panel};
use crate::shortcuts;
use crate::widgets::wrapped;

/// Below this screen width the app is one column (a phone's 390 points): a side panel beside
/// the charts would leave neither room.
pub(super) const ONE_COLUMN_BELOW: f32 = 700.0;

/// Below this width the playground stacks its loss chart over its cost tables (a projector's
/// 1024 points beside the side panel): side by side the tables' figures were cut.
const STACK_BELOW: f32 = 760.0;

impl Playground {
    /// The whole app, inside whatever container the shell gives it.
    pub fn ui(&mut self, ui: &mut Ui) {
        let started = Instant::now();
        self.channels.news.drawing_now();
        self.overlays.frames.tick();
        self.panels(ui);
        self.overlays.frames.record_ui_work(started.elapsed().as_secs_f64());
    }

    fn panels(&mut self, ui: &mut Ui) {
        self.apply_messages();
        for shortcut in shortcuts::pressed(ui.ctx(), LESSONS.len()) {
            self.apply_shortcut(shortcut);
        }
        if self.overlays.show_keys {
            egui::Window::new("Keys").collapsible(false).resizable(false).open(&mut self.overlays.show_keys).show(ui.ctx(), |ui| {
                egui::Grid::new("keys").num_columns(2).show(ui, |ui| {
                    for (key, what) in shortcuts::KEYS {
                        ui.label(RichText::new(key).strong());
                        ui.label(what);
                        ui.end_row();
                    }
                });
            });
        }
        if let Some(kept) = self.autosave.kept.take().filter(|kept| kept.step > 0 && !kept.files.is_empty()) {
            self.autosave.offer = Some(kept);
        }
        self.receive_files(ui.ctx());
        self.look.apply(ui.ctx());
        // Where the figures are drawn this frame: none until they are.
        (self.panels.loss.drawn_at, self.panels.attention.drawn_at) = (None, None);
        self.panels.attention.presented.clear();
        self.lesson.outlined = None;
        self.qr_window(ui.ctx());
        if self.look.chosen.presenting {
            self.presentation_ui(ui);
        } else {
            self.workbench_ui(ui);
        }
        self.export_figures(ui.ctx());
    }

    /// The usual layout: the top bar, the setup on the left, the chosen tab in the middle; on a
    /// phone one column, the lesson first and the setup last.
    fn workbench_ui(&mut self, ui: &mut Ui) {
        let width = ui.available_width();
        egui::Panel::top("top_bar").show(ui, |ui| self.top_bar(ui));
        if width < ONE_COLUMN_BELOW {
            egui::CentralPanel::default().show(ui, |ui| {
                egui::ScrollArea::vertical().id_salt("one_column").show(ui, |ui| {
                    self.lesson_ui(ui);
                    self.card_ui(ui);
                    self.tab_ui(ui);
                    ui.separator();
                    self.side_sections(ui, false);
                });
            });
            return;
        }
        // As wide as the setup's rows (narrower, they wrap): on a projector's 1024 points the
        // playground stacks its charts in what is left.
        egui::Panel::left("setup_side").resizable(true).default_size(430.0).show(ui, |ui| {
            egui::ScrollArea::both().id_salt("setup_scroll").show(ui, |ui| {
                self.lesson_ui(ui);
                self.side_sections(ui, true);
            });
        });
        egui::CentralPanel::default().show(ui, |ui| {
            self.card_ui(ui);
            self.tab_ui(ui);
        });
    }

    fn tab_ui(&mut self, ui: &mut Ui) {
        match self.shown.tab {
            Tab::Playground => self.playground_ui(ui),
            Tab::Samples => {
                if let Some(intent) = self.panels.samples.ui(ui, &self.view) {
                    self.carry_out(ui.ctx(), intent);
                }
            }
            Tab::AllVariants => self.panels.variants.ui(ui),
        }
    }

    fn top_bar(&mut self, ui: &mut Ui) {
        ui.horizontal_wrapped(|ui| {
            ui.heading("QKV Lab");
            ui.separator();
            if !self.shown.hidden.hides(Part::Classroom) {
                self.classroom_menu(ui);
                ui.separator();
            }
            self.training_buttons(ui, 120.0);
            ui.separator();
            if !self.shown.hidden.hides(Part::Tabs) {
                ui.selectable_value(&mut self.shown.tab, Tab::Playground, "Playground");
                ui.selectable_value(&mut self.shown.tab, Tab::Samples, "Samples");
                ui.selectable_value(&mut self.shown.tab, Tab::AllVariants, "All variants");
                ui.separator();
            }
            if !self.shown.hidden.hides(Part::Compute) {
                self.compute_menu(ui);
                ui.separator();
            }
            self.classroom_buttons(ui);
            if self.overlays.show_readouts
                && let Some(mean) = self.overlays.frames.mean()
            {
                ui.label(RichText::new(format!("frame {:.1} ms ({:.0} fps)", mean * 1e3, 1.0 / mean)).weak());
            }
        });
        self.news_ui(ui);
    }

    /// The lessons, and whether their steps are shown.
    fn classroom_menu(&mut self, ui: &mut Ui) {
        ui.menu_button("Classroom", |ui| {
            for (i, lesson) in LESSONS.iter().enumerate() {
                if ui.button(lesson.title).clicked() {
                    self.load_lesson(i);
                    ui.close();
                }
            }
            ui.separator();
            let mut steps = !self.shown.hidden.hides(Part::Steps);
            if ui.checkbox(&mut steps, "a lesson's steps, one at a time").changed() {
                self.skip_cards(!steps);
            }
        });
    }

    /// The device training runs on, and the developers' readouts.
    fn compute_menu(&mut self, ui: &mut Ui) {
        let mut compute = self.compute.chosen;
        let mut time_again = false;
        egui::ComboBox::from_id_salt("compute")
            .selected_text(format!("compute: {}", self.compute.offered[compute].id))
            .show_ui(ui, |ui| {
                for (i, c) in self.compute.offered.iter().enumerate() {
                    ui.selectable_value(&mut compute, i, c.label());
                }
                if self.compute.offered.len() > 1 {
                    time_again = ui.button("time each on the next Train").clicked();
                }
                // For whoever tunes the app, not for the class: out of the top bar.
                ui.separator();
                ui.checkbox(&mut self.overlays.show_readouts, "show the frame time");
            })
            .response
            .accessible_name("compute device");
        if let Some(label) = self.timing() {
            ui.label(RichText::new(format!("timing {label}…")).weak());
        }
        if compute != self.compute.chosen {
            self.pick_compute(compute);
        }
        if time_again {
            self.time_again();
        }
    }

    /// What the keys P, Q and ? do, as buttons: presentation mode, the QR code of the demo's
    /// link, the list of keys.
    fn classroom_buttons(&mut self, ui: &mut Ui) {
        if ui.button("Present (P)").on_hover_text("large text and the lesson's point, for a projector").clicked() {
            self.look.chosen.presenting = true;
        }
        if ui.button("QR code (Q)").on_hover_text("a QR code of this demo's link, for the class's phones").clicked() {
            self.overlays.show_qr = !self.overlays.show_qr;
        }
        if ui.button("Keys (?)").on_hover_text("every key and what it does").clicked() {
            self.overlays.show_keys = !self.overlays.show_keys;
        }
    }

    /// What went wrong and what the app has to say, under the top bar: each stopped run's
    /// reason, the last failed command, runs kept from an earlier visit, the latest notice.
    pub(super) fn news_ui(&mut self, ui: &mut Ui) {
        for run in &self.view.runs {
            if let Some(error) = &run.error {
                ui.colored_label(ui.visuals().error_fg_color, format!("{}: {error}", run.label()));
            }
        }
        let mut dismiss = false;
        if let Some(error) = &self.view.error {
            ui.horizontal(|ui| {
                ui.colored_label(ui.visuals().error_fg_color, error);
                dismiss = ui.small_button("dismiss").clicked();
            });
        }
        if dismiss {
            self.view.error = None;
        }
        let mut answer = None;
        if let Some(kept) = &self.autosave.offer {
            ui.horizontal(|ui| {
                ui.label(format!("{} runs from your last visit are kept at step {}.", kept.files.len(), kept.step));
                if ui.button("Continue them").clicked() {
                    answer = Some(true);
                }
                if ui.small_button("dismiss").clicked() {
                    answer = Some(false);
                }
            });
        }
        match answer {
            Some(true) => self.continue_kept(),
            Some(false) => self.autosave.offer = None,
            None => {}
        }
        if let Some((notice, is_error)) = self.overlays.notice.clone() {
            // Wrapped: a lesson's pause says a sentence or two, at presentation mode's size too.
            ui.horizontal_wrapped(|ui| {
                let colour = if is_error { ui.visuals().error_fg_color } else { ui.visuals().weak_text_color() };
                ui.colored_label(colour, notice);
                if ui.small_button("dismiss").clicked() {
                    self.overlays.notice = None;
                }
            });
        }
    }

    /// Train (the main action, highlighted), Pause, Step, Reset, and how far training is, with
    /// a progress bar `bar_width` wide.
    pub(super) fn training_buttons(&mut self, ui: &mut Ui, bar_width: f32) {
        let playing = self.view.playing;
        let visuals = ui.visuals();
        let train =
            egui::Button::new(RichText::new("Train").strong().color(visuals.selection.stroke.color)).fill(visuals.selection.bg_fill);
        if ui.add_enabled(!playing, train).clicked() {
            self.train();
        }
        if ui.add_enabled(playing, egui::Button::new("Pause")).clicked() {
            self.pause();
        }
        if ui.add_enabled(!playing, egui::Button::new("Step")).clicked() {
            self.step();
        }
        if ui.button("Reset").clicked() {
            self.apply_setup();
        }
        ui.separator();
        let total = self.view.runs.iter().map(|r| r.info.spec.training.steps).max().unwrap_or(0);
        // Whole, never wrapped: in a wrapped row it moves down a line instead.
        ui.add(egui::Label::new(format!("step {} / {total}", self.view.step())).wrap_mode(egui::TextWrapMode::Extend));
        if total > 0 {
            ui.add(egui::ProgressBar::new(self.view.step() as f32 / total as f32).desired_width(bar_width));
        }
    }

    /// The lesson's title and text, where a lesson is loaded.
    fn lesson_ui(&mut self, ui: &mut Ui) {
        if let Some(lesson) = self.lesson.index.map(|i| &LESSONS[i]) {
            ui.label(RichText::new(lesson.title).heading());
            wrapped(ui, lesson.explanation);
            ui.separator();
        }
    }

    /// The setup, the throughput, the theory and the files, each a section that folds;
    /// `open`: the setup starts open (beside the charts; on a phone, under them, folded).
    fn side_sections(&mut self, ui: &mut Ui, open: bool) {
        if !self.shown.hidden.hides(Part::Setup) {
            self.setup_section(ui, open);
        }
        self.throughput_section(ui);
        if !self.shown.hidden.hides(Part::Theory) {
            self.theory_section(ui);
        }
        if !self.shown.hidden.hides(Part::Files) {
            self.files_section(ui);
        }
    }

    fn setup_section(&mut self, ui: &mut Ui, open: bool) {
        egui::CollapsingHeader::new("Experiment setup").default_open(open).show(ui, |ui| {
            let changed = self.setup.changed();
            if let Some(intent) = self.panels.setup.ui(ui, &mut self.setup.edited, changed) {
                self.carry_out(ui.ctx(), intent);
            }
        });
    }

    fn throughput_section(&mut self, ui: &mut Ui) {
        egui::CollapsingHeader::new("Throughput").default_open(true).show(ui, |ui| {
            if self.view.runs.is_empty() {
                ui.label("no runs yet");
            }
            for run in &self.view.runs {
                // A ViT's tokens are its images, and its accuracy is on held-out ones.
                let (unit, accuracy) =
                    if run.info.spec.model.is_vision() { ("images", "held-out accuracy") } else { ("tokens", "accuracy") };
                let rate = run.recent_tokens_per_sec().map_or("–".into(), |r| format!("{r:.0} {unit}/s"));
                let val = run.evals.last().map_or("–".into(), |e| format!("{:.4}", e.val_loss));
                let accuracy = run.evals.last().and_then(|e| e.accuracy).map(|a| format!(", {accuracy} {:.1}%", 100.0 * a));
                crate::widgets::coloured(
                    ui,
                    run.colour,
                    format!("{}: {rate}, val loss {val}{}", run.label(), accuracy.unwrap_or_default()),
                );
            }
            if let (Some(compute), Some(data)) = (&self.view.compute, &self.view.data) {
                ui.label(RichText::new(format!("trained on {compute}; data: {data}")).weak());
            }
            if let Some(verdict) = &self.compute.verdict {
                wrapped(ui, &verdict.summary());
            }
        });
    }

    fn theory_section(&mut self, ui: &mut Ui) {
        // The theory lesson opens its section once; after that the user decides.
        let open = std::mem::take(&mut self.lesson.open_theory).then_some(true);
        let highlight = self.awaits_elimination();
        let convert =
            egui::CollapsingHeader::new("Theory: eliminate W_Q").open(open).show(ui, |ui| self.panels.theory.ui(ui, &self.view, highlight));
        let rect =
            convert.body_response.as_ref().map_or(convert.header_response.rect, |body| body.rect.union(convert.header_response.rect));
        self.outline(ui, Panel::Theory, rect);
        if let Some(intent) = convert.body_returned.flatten() {
            self.carry_out(ui.ctx(), intent);
        }
    }

    fn files_section(&mut self, ui: &mut Ui) {
        let files = egui::CollapsingHeader::new("Export and import")
            .show(ui, |ui| self.panels.files.ui(ui, &self.view, self.exports.share_link.as_deref()))
            .body_returned
            .flatten();
        if let Some(intent) = files {
            self.carry_out(ui.ctx(), intent);
        }
    }

    fn playground_ui(&mut self, ui: &mut Ui) {
        if !self.view.is_loaded() {
            ui.vertical_centered(|ui| {
                ui.add_space(40.0);
                ui.heading("Does a transformer need all three of W_Q, W_K and W_V?");
                ui.label("Preparing the runs of the setup on the left… (or pick a lesson under Classroom)");
            });
            return;
        }
        if self.view.step() == 0 && !self.view.playing {
            ui.label(
                RichText::new("Untrained models: press Train to train every run on the same batches, or Step for one step at a time.")
                    .weak(),
            );
        }
        let width = ui.available_width();
        if width < STACK_BELOW {
            // Too narrow for two charts side by side: each full width, one under the other,
            // scrolled, at sizes of their own (a scroll area's height is unbounded).
            let maps_height = ui.ctx().content_rect().height().max(480.0);
            egui::ScrollArea::vertical().id_salt("playground_column").show(ui, |ui| {
                ui.allocate_ui(egui::vec2(width, 320.0), |ui| self.loss_section(ui));
                ui.separator();
                self.costs_section(ui, None);
                ui.separator();
                ui.allocate_ui(egui::vec2(width, maps_height), |ui| self.maps_section(ui));
            });
            return;
        }
        // Loss and costs side by side on top, the attention maps across the full width below:
        // fixed proportions, so that a projector shows all three at once.
        let top_height = (ui.available_height() * 0.48).max(220.0);
        ui.allocate_ui(egui::vec2(width, top_height), |ui| {
            ui.horizontal_top(|ui| {
                ui.allocate_ui(egui::vec2(width * 0.46, top_height), |ui| {
                    ui.set_min_size(egui::vec2(width * 0.46, top_height));
                    self.loss_section(ui);
                });
                ui.add_space(12.0);
                ui.allocate_ui(egui::vec2(ui.available_width(), top_height), |ui| self.costs_section(ui, Some(top_height - 24.0)));
            });
        });
        ui.separator();
        self.maps_section(ui);
    }

    fn loss_section(&mut self, ui: &mut Ui) {
        let drawn = ui.vertical(|ui| {
            ui.label(RichText::new("Loss").strong());
            if let Some(intent) = self.panels.loss.ui(ui, &self.view) {
                self.carry_out(ui.ctx(), intent);
            }
        });
        self.outline(ui, Panel::Loss, drawn.response.rect);
    }

    /// The parameter and KV-cache tables, scrolled within `height` where it is given.
    fn costs_section(&mut self, ui: &mut Ui, height: Option<f32>) {
        let drawn = ui.vertical(|ui| {
            ui.label(RichText::new("Parameters and KV cache").strong());
            match height {
                Some(height) => {
                    egui::ScrollArea::vertical()
                        .id_salt("costs_scroll")
                        .max_height(height)
                        .show(ui, |ui| self.panels.costs.ui(ui, &self.view));
                }
                None => self.panels.costs.ui(ui, &self.view),
            }
        });
        self.outline(ui, Panel::Costs, drawn.response.rect);
    }

    /// The held-out images of a vision run, and the attention maps.
    fn maps_section(&mut self, ui: &mut Ui) {
        let top = ui.cursor().min;
        if self.view.attention().is_some_and(|maps| maps.images.is_some()) {
            ui.label(RichText::new("Held-out images").strong());
            self.panels.images.ui(ui, &self.view);
            ui.separator();
        }
        ui.label(RichText::new("Attention maps").strong());
        let request = self.panels.attention.ui(ui, &self.view);
        self.outline(ui, Panel::Maps, egui::Rect::from_min_max(top, ui.min_rect().max));
        if let Some(intent) = request {
            self.carry_out(ui.ctx(), intent);
        }
    }
}
