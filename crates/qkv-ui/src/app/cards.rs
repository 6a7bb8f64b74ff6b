//! A lesson's steps: the card of the step shown, with back, next and skip, and the outline it
//! draws around the panel it talks about.

use egui::{Rect, RichText, Stroke, Ui};

use super::Playground;
use crate::hidden::Part;
use crate::lessons::{Card, LESSONS, Panel};

impl Playground {
    /// The loaded lesson's steps (none outside a lesson).
    fn cards(&self) -> &'static [Card] {
        self.lesson.index.map_or(&[], |i| LESSONS[i].cards)
    }

    /// The lesson's step shown now and its number (from 0), unless the steps are hidden.
    pub fn card(&self) -> Option<(usize, Card)> {
        if self.shown.hidden.hides(Part::Steps) {
            return None;
        }
        self.cards().get(self.lesson.card).map(|&card| (self.lesson.card, card))
    }

    /// The lesson's next step (Right arrow), if there is one.
    pub fn next_card(&mut self) {
        self.lesson.card = (self.lesson.card + 1).min(self.cards().len().saturating_sub(1));
    }

    /// The lesson's previous step (Left arrow).
    pub fn previous_card(&mut self) {
        self.lesson.card = self.lesson.card.saturating_sub(1);
    }

    /// Hides the steps (or shows them again): a teacher who knows the lesson skips them.
    pub fn skip_cards(&mut self, skip: bool) {
        self.shown.hidden.set(Part::Steps, skip);
    }

    /// The step's card: its sentence, where it stands among the lesson's steps, back, next and
    /// skip.
    pub(super) fn card_ui(&mut self, ui: &mut Ui) {
        let Some((index, card)) = self.card() else { return };
        let count = self.cards().len();
        let visuals = ui.visuals();
        let frame = egui::Frame::group(ui.style()).stroke(Stroke::new(2.0, visuals.selection.bg_fill));
        frame.show(ui, |ui| {
            ui.set_width(ui.available_width());
            // The sentence, then where the step stands and the buttons after its last line.
            ui.horizontal_wrapped(|ui| {
                ui.label(card.say);
                ui.add(
                    egui::Label::new(RichText::new(format!("step {} of {count}", index + 1)).strong())
                        .wrap_mode(egui::TextWrapMode::Extend),
                );
                if ui.add_enabled(index > 0, egui::Button::new("back")).on_hover_text("the previous step (Left arrow)").clicked() {
                    self.previous_card();
                }
                if ui.add_enabled(index + 1 < count, egui::Button::new("next")).on_hover_text("the next step (Right arrow)").clicked() {
                    self.next_card();
                }
                if ui.button("skip steps").on_hover_text("hide the steps (the Classroom menu shows them again)").clicked() {
                    self.skip_cards(true);
                }
            });
        });
    }

    /// Outlines `rect`, where `panel` was drawn, when the step shown talks about it.
    pub(super) fn outline(&mut self, ui: &Ui, panel: Panel, rect: Rect) {
        if self.card().is_some_and(|(_, card)| card.panel == panel) {
            let stroke = Stroke::new(3.0, ui.visuals().selection.bg_fill);
            // The layer's own painter, unclipped by the section's scroll area.
            ui.ctx().layer_painter(ui.layer_id()).rect_stroke(rect.expand(2.0), 6.0, stroke, egui::StrokeKind::Outside);
            self.lesson.outlined = Some(panel);
        }
    }
}
