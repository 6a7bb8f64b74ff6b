//! Generated text per run, on demand, with temperature and top-k.

use egui::{DragValue, RichText, Slider, Ui};
use qkv_train::generate::SampleOptions;

use crate::intent::Intent;
use crate::view::SessionView;

pub struct SamplesPanel {
    pub prompt: String,
    pub options: SampleOptions,
}

impl Default for SamplesPanel {
    fn default() -> Self {
        Self { prompt: String::new(), options: SampleOptions { max_new_tokens: 200, ..SampleOptions::default() } }
    }
}

impl SamplesPanel {
    /// Asks for samples from the runs whose button was pressed (the app sends the requests).
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) -> Option<Intent> {
        let mut requests = Vec::new();
        ui.horizontal(|ui| {
            ui.label("prompt");
            ui.add(egui::TextEdit::singleline(&mut self.prompt).hint_text("(a new line)").desired_width(220.0))
                .accessible_name("sample prompt");
            ui.add(Slider::new(&mut self.options.temperature, 0.0..=2.0).text("temperature"));
            let mut top_k = self.options.top_k.unwrap_or(0);
            ui.label("top-k");
            if ui.add(DragValue::new(&mut top_k).range(0..=1000)).accessible_name("top-k").on_hover_text("0: all tokens").changed() {
                self.options.top_k = (top_k > 0).then_some(top_k);
            }
            ui.label("tokens");
            ui.add(DragValue::new(&mut self.options.max_new_tokens).range(1..=2000)).accessible_name("tokens to generate");
            if ui.add_enabled(view.is_loaded(), egui::Button::new("Generate for every run")).clicked() {
                requests.extend(view.runs.iter().map(|run| run.info.id));
            }
        });
        egui::ScrollArea::vertical().id_salt("samples_scroll").show(ui, |ui| {
            for run in &view.runs {
                ui.horizontal(|ui| {
                    crate::widgets::coloured(ui, run.colour, RichText::new(run.label()).strong()).on_hover_text(run.name());
                    if ui.small_button("generate").clicked() {
                        requests.push(run.info.id);
                    }
                });
                match &run.sample {
                    Some(text) => {
                        ui.label(RichText::new(text).monospace());
                    }
                    None => {
                        ui.label(RichText::new("nothing generated yet").weak());
                    }
                }
                ui.separator();
            }
        });
        (!requests.is_empty()).then_some(Intent::Sample(requests))
    }
}
