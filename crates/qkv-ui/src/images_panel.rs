//! A vision experiment's held-out images: each with its true class and every run's answer, and
//! on the first (the image the maps read), where each run's class token looks.

use egui::{Color32, ColorImage, Rect, RichText, Sense, TextureHandle, TextureOptions, Ui, vec2};
use qkv_session::{AttentionMaps, HeldOutImages};

use crate::view::SessionView;

/// Points an image of the strip is wide.
const STRIP_IMAGE: f32 = 44.0;
/// Points an image with the class token's attention on it is wide.
const OVERLAY_IMAGE: f32 = 120.0;
/// What the class token's attention is drawn in, strongest opaque.
const ATTENTION: Color32 = Color32::from_rgb(255, 140, 0);

#[derive(Default)]
pub struct ImagesPanel {
    textures: Vec<TextureHandle>,
    /// The maps version the textures are of.
    textures_of: Option<u64>,
}

/// An image's values [0, 1] as colours: grey with one channel, red-green-blue with three.
fn colour_image(images: &HeldOutImages, pixels: &[f32]) -> ColorImage {
    let byte = |v: f32| (v.clamp(0.0, 1.0) * 255.0).round() as u8;
    let colours = pixels
        .chunks(images.channels)
        .map(|pixel| match pixel {
            [r, g, b, ..] => Color32::from_rgb(byte(*r), byte(*g), byte(*b)),
            // Ink dark on light, as the digits were written.
            [v, ..] => Color32::from_gray(255 - byte(*v)),
            [] => Color32::BLACK,
        })
        .collect();
    ColorImage::new([images.width, images.height], colours)
}

/// Run `run`'s class token's attention over the patches in its last layer, averaged over its
/// heads: one weight per patch, row by row.
pub fn class_attention(maps: &AttentionMaps, run: usize) -> Vec<f32> {
    let Some(heads) = maps.runs.get(run).and_then(|layers| layers.last()) else { return Vec::new() };
    let time = maps.time();
    let mut weights = vec![0f32; time.saturating_sub(1)];
    for map in heads {
        for (weight, p) in weights.iter_mut().zip(&map[1..time]) {
            *weight += p / heads.len() as f32;
        }
    }
    weights
}

impl ImagesPanel {
    /// Nothing unless the latest maps are a vision experiment's.
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) {
        let Some(maps) = view.attention() else { return };
        let Some(images) = &maps.images else { return };
        if self.textures_of != Some(view.attention_version) || self.textures.len() != images.pixels.len() {
            self.textures = (images.pixels.iter().enumerate())
                .map(|(i, pixels)| {
                    ui.ctx().load_texture(format!("held-out image {i}"), colour_image(images, pixels), TextureOptions::NEAREST)
                })
                .collect();
            self.textures_of = Some(view.attention_version);
        }
        ui.horizontal_top(|ui| {
            ui.vertical(|ui| self.strip_ui(ui, view, maps, images));
            ui.add_space(16.0);
            ui.vertical(|ui| self.overlays_ui(ui, view, maps, images));
        });
    }

    /// The images in a row, the true class under each, then each run's answers in its colour.
    fn strip_ui(&self, ui: &mut Ui, view: &SessionView, maps: &AttentionMaps, images: &HeldOutImages) {
        ui.label(RichText::new(format!("Held-out images at step {}: the true class, then each run's answer", maps.step)).weak());
        egui::Grid::new("held_out_strip").spacing([6.0, 2.0]).show(ui, |ui| {
            ui.label("");
            for texture in &self.textures {
                ui.image((texture.id(), vec2(STRIP_IMAGE, STRIP_IMAGE)));
            }
            ui.end_row();
            ui.label(RichText::new("class").small());
            for &label in &images.labels {
                ui.label(RichText::new(&images.class_names[label]).strong());
            }
            ui.end_row();
            for (r, answers) in maps.predictions.iter().enumerate() {
                let Some(run) = view.runs.get(r) else { continue };
                crate::widgets::coloured(ui, run.colour, RichText::new(run.label()).small()).on_hover_text(run.name());
                for (&answer, &label) in answers.iter().zip(&images.labels) {
                    let name = &images.class_names[answer];
                    // A wrong answer is struck through, so it reads without colour too.
                    let text = if answer == label { RichText::new(name) } else { RichText::new(name).strikethrough() };
                    crate::widgets::coloured(ui, run.colour, text).on_hover_text(if answer == label { "right" } else { "wrong" });
                }
                ui.end_row();
            }
        });
    }

    /// The first image once per run, each patch tinted by how much the run's class token reads it.
    fn overlays_ui(&self, ui: &mut Ui, view: &SessionView, maps: &AttentionMaps, images: &HeldOutImages) {
        let Some(texture) = self.textures.first() else { return };
        ui.label(RichText::new("Where the class token looks: last layer, mean over heads").weak());
        let (rows, columns) = (images.height / images.patch.max(1), images.width / images.patch.max(1));
        ui.horizontal_top(|ui| {
            for (r, run) in view.runs.iter().enumerate().take(maps.runs.len()) {
                let weights = class_attention(maps, r);
                let strongest = weights.iter().copied().fold(f32::MIN_POSITIVE, f32::max);
                ui.vertical(|ui| {
                    let (rect, response) = ui.allocate_exact_size(vec2(OVERLAY_IMAGE, OVERLAY_IMAGE), Sense::hover());
                    let painter = ui.painter_at(rect);
                    painter.image(texture.id(), rect, Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)), Color32::WHITE);
                    let cell = vec2(rect.width() / columns as f32, rect.height() / rows as f32);
                    for (p, &weight) in weights.iter().enumerate().take(rows * columns) {
                        let min = rect.min + vec2((p % columns) as f32 * cell.x, (p / columns) as f32 * cell.y);
                        let alpha = (200.0 * weight / strongest).round() as u8;
                        painter.rect_filled(
                            Rect::from_min_size(min, cell),
                            0.0,
                            Color32::from_rgba_unmultiplied(ATTENTION.r(), ATTENTION.g(), ATTENTION.b(), alpha),
                        );
                    }
                    let share = weights.iter().sum::<f32>();
                    response.on_hover_text(format!(
                        "{:.0}% of the class token's attention is on the patches, the rest on itself",
                        100.0 * share
                    ));
                    crate::widgets::coloured(ui, run.colour, RichText::new(run.label()).small()).on_hover_text(run.name());
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_token_row_is_averaged_over_the_last_layers_heads() {
        // Three tokens (class, two patches); two heads in the last layer.
        let first_layer = vec![vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]];
        let last_layer = vec![vec![0.2, 0.8, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], vec![0.2, 0.4, 0.4, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]];
        let maps = AttentionMaps {
            step: 1,
            tokens: vec!["class".into(), "r0c0".into(), "r0c1".into()],
            ids: Vec::new(),
            runs: vec![vec![first_layer, last_layer]],
            logits: Vec::new(),
            diagnostics: Vec::new(),
            images: None,
            predictions: Vec::new(),
        };
        let weights = class_attention(&maps, 0);
        assert_eq!(weights.len(), 2);
        assert!((weights[0] - 0.6).abs() < 1e-6 && (weights[1] - 0.2).abs() < 1e-6, "{weights:?}");
        assert!(class_attention(&maps, 1).is_empty(), "no such run");
    }

    #[test]
    fn one_channel_is_ink_on_paper_three_are_colour() {
        let grey =
            HeldOutImages { height: 1, width: 2, channels: 1, patch: 1, pixels: Vec::new(), labels: Vec::new(), class_names: Vec::new() };
        let image = colour_image(&grey, &[0.0, 1.0]);
        assert_eq!(image.pixels, [Color32::from_gray(255), Color32::from_gray(0)]);
        let colour = HeldOutImages { channels: 3, ..grey };
        assert_eq!(colour_image(&colour, &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0]).pixels, [Color32::RED, Color32::BLUE]);
    }
}
