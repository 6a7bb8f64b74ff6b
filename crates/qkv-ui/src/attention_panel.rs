//! Attention maps: for each run a layer × head grid of heatmaps on one prompt, token labels and
//! values on hover, a head enlarged on click beside its logits, and the difference of two runs'
//! maps.

use egui::{Color32, ColorImage, ComboBox, Rect, RichText, Sense, TextureHandle, TextureOptions, Ui, pos2, vec2};
use qkv_model::ModelDiagnostics;
use qkv_session::AttentionMaps;
use qkv_train::papers::PAPER2_KEY_VALUE_COSINE;

use crate::figures::Figure;
use crate::intent::Intent;
use crate::palette;
use crate::presentation::{LABEL_POINTS, map_window};
use crate::view::SessionView;
use crate::widgets::export_buttons;

/// A head picked for the enlarged view: (run, layer, head).
pub type HeadIndex = (usize, usize, usize);

/// Which maps are shown: their version and the step scrubbed back to (`None`: the latest).
type MapsShown = (u64, Option<usize>);

/// What the difference map shows: of which maps, which two runs, at which layer and head.
type DifferenceShown = (MapsShown, (usize, usize), usize, usize);

pub struct AttentionPanel {
    /// The prompt being edited; sent to the session on Enter.
    pub prompt: String,
    pub refresh_every: usize,
    pub selected: Option<HeadIndex>,
    /// Runs compared in the difference view.
    pub diff: (usize, usize),
    textures: Vec<Vec<Vec<TextureHandle>>>,
    /// What the textures show.
    textures_of: MapsShown,
    /// The set of maps scrubbed back to (an index into the view's history); `None`: the latest.
    pub scrubbed: Option<usize>,
    /// The difference of two runs' maps.
    diff_texture: KeptTexture<DifferenceShown>,
    /// The enlarged head's logits.
    logits_texture: KeptTexture<(MapsShown, HeadIndex)>,
    /// Presentation mode's maps, one head of each run shown over the last tokens only: of which
    /// maps, which head.
    window_textures: Vec<KeptTexture<(u64, HeadIndex)>>,
    /// Heatmaps drawn in the last frame (for tests).
    pub maps_drawn: usize,
    /// The runs whose maps presentation mode drew in the last frame, side by side (for tests).
    pub presented: Vec<usize>,
    /// Where every run's maps were drawn in the last frame (what a PNG export crops).
    pub drawn_at: Option<Rect>,
}

impl Default for AttentionPanel {
    fn default() -> Self {
        Self {
            prompt: String::new(),
            refresh_every: 25,
            selected: None,
            diff: (0, 1),
            textures: Vec::new(),
            textures_of: (0, None),
            scrubbed: None,
            diff_texture: KeptTexture::default(),
            logits_texture: KeptTexture::default(),
            window_textures: Vec::new(),
            maps_drawn: 0,
            presented: Vec::new(),
            drawn_at: None,
        }
    }
}

/// A texture kept between frames (a texture is freed when its handle drops, before the frame is
/// painted) and uploaded again only when what it shows, `K`, changes.
struct KeptTexture<K> {
    shows: Option<K>,
    texture: Option<TextureHandle>,
}

impl<K> Default for KeptTexture<K> {
    fn default() -> Self {
        Self { shows: None, texture: None }
    }
}

impl<K: PartialEq> KeptTexture<K> {
    /// The texture of what `shows` names, `image` drawn and uploaded only where it is new.
    fn of(&mut self, ui: &Ui, name: &str, shows: K, image: impl FnOnce() -> ColorImage) -> TextureHandle {
        if self.shows.as_ref() != Some(&shows) || self.texture.is_none() {
            if let Some(texture) = &mut self.texture {
                texture.set(image(), TextureOptions::NEAREST);
            } else {
                self.texture = Some(ui.ctx().load_texture(name, image(), TextureOptions::NEAREST));
            }
            self.shows = Some(shows);
        }
        self.texture.clone().expect("uploaded above")
    }
}

fn image(map: &[f32], time: usize, colour: impl Fn(f32) -> Color32) -> ColorImage {
    ColorImage::new([time, time], map.iter().map(|&p| colour(p)).collect())
}

/// The cell under `pointer` in a map drawn in `rect`: (query, key).
fn cell_at(rect: Rect, time: usize, pointer: egui::Pos2) -> Option<(usize, usize)> {
    if !rect.contains(pointer) || time == 0 {
        return None;
    }
    let col = ((pointer.x - rect.left()) / rect.width() * time as f32) as usize;
    let row = ((pointer.y - rect.top()) / rect.height() * time as f32) as usize;
    Some((row.min(time - 1), col.min(time - 1)))
}

/// A run's attention diagnostics under its maps (docs/diagnostics.md): means over layers on one
/// line, every layer's figures on hover.
fn diagnostics_ui(ui: &mut Ui, diagnostics: &ModelDiagnostics) {
    let figure = |value: Option<f64>| value.map_or("–".to_string(), |v| format!("{v:.2}"));
    let positional = diagnostics.mean_positional_share().map_or(String::new(), |share| format!(" (position {share:.2})"));
    let line = format!(
        "cos(W_K,W_V) {}  cos(W_Q,W_K) {}\n{} {}{positional}  logit RMS {}",
        figure(diagnostics.mean(|l| l.key_value_cosine)),
        figure(diagnostics.mean(|l| l.query_key_cosine)),
        diagnostics.symmetry_measure().name(),
        figure(diagnostics.mean_symmetry()),
        figure(diagnostics.mean(|l| Some(l.logit_rms)))
    );
    ui.label(RichText::new(line).small()).on_hover_ui(|ui| {
        ui.label(format!(
            "Means over layers, on this prompt. cos: the two weight matrices as vectors (paper 2 finds \
             {PAPER2_KEY_VALUE_COSINE} for W_K, W_V in trained standard models); a change of basis that changes no output can move it. K/V \
             overlap: how much of the input each head's keys and values read in common, which no such change \
             moves (1: the same subspace; head_dim / n_embd: chance). Symmetry, 1 for Q=K-V and about 0.5 for \
             unrelated queries and keys: in a decoder, the symmetric share of each head's content form W_Q W_Kᵀ (the \
             softmax never sees a masked logit, so the logits cannot show it); in an encoder, of its logits. \
             Position: the share of the visible logits a learned positional term carries. Logit RMS: the size of \
             the scaled logits a query may attend to.",
        ));
        egui::Grid::new("diagnostics_by_layer").striped(true).show(ui, |ui| {
            for heading in
                ["layer", "cos(W_K,W_V)", "K/V overlap", "cos(W_Q,W_K)", "symmetry by head", "position", "logit RMS", "effective ranks"]
            {
                ui.strong(heading);
            }
            ui.end_row();
            for (l, layer) in diagnostics.layers.iter().enumerate() {
                ui.label(l.to_string());
                ui.label(figure(layer.key_value_cosine));
                ui.label(figure(layer.key_value_overlap));
                ui.label(figure(layer.query_key_cosine));
                let by_head = |values: &[f64]| values.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(" ");
                ui.label(by_head(&layer.symmetry));
                ui.label(if layer.positional_share.is_empty() { "–".to_string() } else { by_head(&layer.positional_share) });
                ui.label(format!("{:.2}", layer.logit_rms));
                let ranks: Vec<String> = layer.effective_ranks.iter().map(|(name, rank)| format!("{name} {rank:.0}")).collect();
                ui.label(if ranks.is_empty() { "– (wide model)".to_string() } else { ranks.join(", ") });
                ui.end_row();
            }
        });
    });
}

/// Runs × layers → heads: the shape of a set of maps (or of their textures).
fn heads_per_layer<T>(runs: &[Vec<Vec<T>>]) -> Vec<Vec<usize>> {
    runs.iter().map(|layers| layers.iter().map(Vec::len).collect()).collect()
}

impl AttentionPanel {
    fn refresh_textures(&mut self, ui: &Ui, maps: &AttentionMaps, of: MapsShown) {
        // The version restarts with every new session (another lesson), so the shape is checked too.
        let same_shape = heads_per_layer(&self.textures) == heads_per_layer(&maps.runs);
        if self.textures_of == of && !self.textures.is_empty() && same_shape {
            return;
        }
        let time = maps.time();
        self.textures = maps
            .runs
            .iter()
            .enumerate()
            .map(|(r, layers)| {
                layers
                    .iter()
                    .enumerate()
                    .map(|(l, heads)| {
                        heads
                            .iter()
                            .enumerate()
                            .map(|(h, map)| {
                                ui.ctx().load_texture(
                                    format!("attention {r} {l} {h}"),
                                    image(map, time, palette::heat),
                                    TextureOptions::NEAREST,
                                )
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        self.textures_of = of;
    }

    /// Draws one map at `size`; hover shows the query and key tokens and the probability.
    fn map_widget(ui: &mut Ui, texture: &TextureHandle, map: &[f32], tokens: &[String], size: f32) -> egui::Response {
        let (rect, response) = ui.allocate_exact_size(vec2(size, size), Sense::click());
        ui.painter().image(texture.id(), rect, Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0)), Color32::WHITE);
        let time = tokens.len();
        match response.hover_pos().and_then(|p| cell_at(rect, time, p)) {
            Some((q, k)) => {
                let value = match map[q * time + k] {
                    f32::NEG_INFINITY => "masked (a later key)".to_string(),
                    value => format!("{value:.3}"),
                };
                response.on_hover_text(format!("query {q} {:?} -> key {k} {:?}: {value}", tokens[q], tokens[k]))
            }
            None => response,
        }
    }

    /// The prompt (text maps only), the refresh interval and the exports, above the maps.
    fn controls_ui(&mut self, ui: &mut Ui, images: bool) -> Option<Intent> {
        let mut request = None;
        ui.horizontal_wrapped(|ui| {
            if !images {
                ui.label("prompt");
                let edit = ui
                    .add(egui::TextEdit::singleline(&mut self.prompt).hint_text("a line of the validation text").desired_width(320.0))
                    .accessible_name("attention prompt");
                if edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) || ui.button("show").clicked() {
                    request = Some(Intent::AttentionPrompt(self.prompt.clone()));
                }
            }
            ui.label("refresh every");
            let refresh = ui.add(egui::DragValue::new(&mut self.refresh_every).range(1..=10_000).suffix(" steps"));
            if refresh.accessible_name("refresh every").changed() {
                request = Some(Intent::RefreshMapsEvery(self.refresh_every));
            }
            ui.separator();
            if let Some(export) = export_buttons(ui, Figure::AttentionMaps, false) {
                request = Some(Intent::ExportFigure(export));
            }
        });
        request
    }

    /// The step the maps are from, and a slider back through every refresh since the runs were
    /// loaded.
    fn step_row_ui(&mut self, ui: &mut Ui, history: &[AttentionMaps], maps: &AttentionMaps) {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(format!("step {}: {} tokens; rows are queries, columns keys", maps.step, maps.time())).weak());
            if history.len() > 1 {
                // Back through every refresh since the runs were loaded.
                let latest = history.len() - 1;
                let mut index = self.scrubbed.unwrap_or(latest);
                let slider = egui::Slider::new(&mut index, 0..=latest)
                    .custom_formatter(|i, _| history.get(i as usize).map_or(String::new(), |m| format!("step {}", m.step)))
                    .show_value(true);
                if ui.add(slider).accessible_name("the step whose maps are shown").changed() {
                    self.scrubbed = (index < latest).then_some(index);
                }
                if self.scrubbed.is_some() && ui.small_button("latest").clicked() {
                    self.scrubbed = None;
                }
            }
        });
    }

    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) -> Option<Intent> {
        // A vision experiment's maps read its first held-out image: there is no prompt to type.
        let images = view.attention().is_some_and(|maps| maps.images.is_some());
        let request = self.controls_ui(ui, images);
        self.maps_drawn = 0;
        let history = &view.attention_history;
        self.scrubbed = self.scrubbed.filter(|&i| i + 1 < history.len());
        let Some(maps) = self.scrubbed.and_then(|i| history.get(i)).or(view.attention()) else {
            ui.label("The maps appear once an experiment is loaded.");
            return request;
        };
        self.refresh_textures(ui, maps, (view.attention_version, self.scrubbed));
        self.step_row_ui(ui, history, maps);

        let n_runs = maps.runs.len();
        // Every run's grid side by side in the width there is, each map between 24 and 96 px.
        let heads = maps.runs.first().and_then(|r| r.first()).map_or(1, Vec::len);
        let layers = maps.runs.first().map_or(1, Vec::len);
        // Each run's block is its heads, its "layer l" column and the gap to the next block:
        // about two and a half cells.
        let across = (n_runs * heads) as f32 + n_runs as f32 * 2.5;
        let by_width = ui.available_width() / across - 3.0;
        // Rows: the run's label, the heads' numbers, the layers and two lines of diagnostics,
        // which the scroll area's height must hold whole.
        let grid_height = ui.available_height() * 0.55;
        let by_height = (grid_height - 70.0) / layers as f32 - 3.0;
        let cell = by_width.min(by_height).clamp(24.0, 96.0);
        let grids = egui::ScrollArea::both().id_salt("attention_scroll").max_height(grid_height).show(ui, |ui| {
            ui.horizontal_top(|ui| {
                for (r, layers) in maps.runs.iter().enumerate() {
                    let Some(run) = view.runs.get(r) else { continue };
                    ui.vertical(|ui| {
                        crate::widgets::coloured(ui, run.colour, RichText::new(run.label()).strong()).on_hover_text(run.name());
                        egui::Grid::new(("attention_grid", r)).spacing([3.0, 3.0]).min_col_width(0.0).show(ui, |ui| {
                            // "head" once and the heads' numbers: a column as wide as its maps,
                            // where "head 3" over each widened it past them.
                            ui.label(RichText::new("head").small());
                            for h in 0..layers.first().map_or(0, Vec::len) {
                                ui.label(RichText::new(h.to_string()).small());
                            }
                            ui.end_row();
                            for (l, heads) in layers.iter().enumerate() {
                                ui.label(RichText::new(format!("layer {l}")).small());
                                for (h, map) in heads.iter().enumerate() {
                                    let texture = &self.textures[r][l][h];
                                    if Self::map_widget(ui, texture, map, &maps.tokens, cell).clicked() {
                                        self.selected = Some((r, l, h));
                                    }
                                    self.maps_drawn += 1;
                                }
                                ui.end_row();
                            }
                        });
                        if let Some(diagnostics) = maps.diagnostics.get(r) {
                            diagnostics_ui(ui, diagnostics);
                        }
                    });
                    ui.add_space(16.0);
                }
            });
        });

        self.drawn_at = Some(grids.inner_rect);
        ui.separator();
        ui.horizontal_top(|ui| {
            if let Some((r, l, h)) = self
                .selected
                .filter(|&(r, l, h)| maps.runs.get(r).and_then(|layers| layers.get(l)).and_then(|heads| heads.get(h)).is_some())
            {
                // The probabilities, their logits and the difference side by side.
                let beside = 2 + usize::from(n_runs >= 2);
                let size = (ui.available_height() - 36.0).min(ui.available_width() / beside as f32 - 48.0).clamp(120.0, 360.0);
                ui.vertical(|ui| {
                    ui.label(RichText::new(format!("{}: layer {l}, head {h}", view.runs[r].label())).strong());
                    large_map(ui, &self.textures[r][l][h].clone(), &maps.runs[r][l][h], &maps.tokens, size, Labels::Fitted);
                    ui.label(RichText::new("probabilities: what each query reads").weak());
                });
                ui.add_space(16.0);
                let causal = !view.runs[r].info.spec.model.attention.bidirectional;
                ui.vertical(|ui| self.logits_ui(ui, maps, (view.attention_version, self.scrubbed), (r, l, h), causal, size));
                if n_runs >= 2 {
                    ui.add_space(16.0);
                    ui.vertical(|ui| self.diff_ui(ui, view, maps, l, h));
                }
            } else {
                ui.label("Click a head to enlarge it and compare it with another run.");
            }
        });
        request
    }

    /// Presentation mode's maps: runs `runs`' maps of one head side by side, each `side` points
    /// square over the last tokens ([`map_window`]), their token labels at least
    /// [`LABEL_POINTS`] points, and a colour bar under them. The head is the one the user
    /// clicked, else the one where the first two runs differ most ([`contrast_head`]), else the
    /// last layer's first.
    pub fn presentation_ui(&mut self, ui: &mut Ui, view: &SessionView, runs: &[usize], side: f32) {
        self.maps_drawn = 0;
        self.presented.clear();
        let Some(maps) = view.attention() else {
            ui.label("The attention maps appear once the runs are ready.");
            return;
        };
        let runs: Vec<usize> = runs.iter().copied().filter(|&r| r < maps.runs.len() && r < view.runs.len()).collect();
        let Some(&first) = runs.first() else { return };
        let window = map_window(maps.time(), side);
        let has = |(l, h): (usize, usize)| runs.iter().all(|&r| maps.runs[r].get(l).is_some_and(|heads| h < heads.len()));
        let clicked = self.selected.map(|(_, l, h)| (l, h)).filter(|&head| has(head));
        let contrast = match runs[..] {
            [a, b, ..] => contrast_head(maps, a, b, window.clone()),
            _ => None,
        };
        let last_layer = (maps.runs[first].len().saturating_sub(1), 0);
        let (l, h) = clicked.or(contrast).unwrap_or(last_layer);
        if !has((l, h)) {
            return;
        }
        let why = match (clicked, contrast) {
            (Some(_), _) => "the head you chose",
            (None, Some(_)) => "the head where they differ most",
            (None, None) => "",
        };
        ui.label(format!("layer {l}, head {h}, step {}{}{why}", maps.step, if why.is_empty() { "" } else { ": " }));
        let tokens = &maps.tokens[window.clone()];
        self.window_textures.resize_with(runs.len(), KeptTexture::default);
        ui.horizontal_top(|ui| {
            for (slot, &r) in runs.iter().enumerate() {
                let map = &maps.runs[r][l][h];
                let windowed: Vec<f32> = window.clone().flat_map(|q| window.clone().map(move |k| map[q * maps.time() + k])).collect();
                let texture = self.window_textures[slot]
                    .of(ui, "attention window", (view.attention_version, (r, l, h)), || image(&windowed, tokens.len(), palette::heat));
                ui.vertical(|ui| {
                    let run = &view.runs[r];
                    crate::widgets::coloured(ui, run.colour, RichText::new(run.label()).strong()).on_hover_text(run.name());
                    large_map(ui, &texture, &windowed, tokens, side, Labels::AtLeast(LABEL_POINTS));
                });
                self.maps_drawn += 1;
                self.presented.push(r);
            }
        });
        colour_bar(ui, side.max(160.0), "0", "1", "probability a query (row) gives a key (column)", palette::heat);
    }

    /// The selected head's logits, before the softmax: a decoder's later keys masked, the rest
    /// on a diverging scale to their own largest size.
    fn logits_ui(&mut self, ui: &mut Ui, maps: &AttentionMaps, of: MapsShown, (r, l, h): HeadIndex, causal: bool, size: f32) {
        // The caption wraps under the map rather than widening the column.
        ui.set_max_width(size + 28.0);
        ui.label(RichText::new("its logits, before the softmax").strong());
        let Some(logits) = maps.logits.get(r).and_then(|layers| layers.get(l)).and_then(|heads| heads.get(h)) else {
            // The history keeps the latest set's logits only (they double a set's size).
            ui.label("The logits are kept for the latest maps only.");
            return;
        };
        let time = maps.time();
        // What the softmax reads: a decoder's later keys are −∞.
        let seen: Vec<f32> =
            logits.iter().enumerate().map(|(i, &z)| if causal && i % time > i / time { f32::NEG_INFINITY } else { z }).collect();
        let largest = seen.iter().filter(|z| z.is_finite()).fold(0.0f32, |m, z| m.max(z.abs()));
        let scale = if largest > 0.0 { largest } else { 1.0 };
        let texture = self.logits_texture.of(ui, "attention logits", (of, (r, l, h)), || {
            image(&seen, time, |z| if z.is_finite() { palette::diverging(z / scale) } else { palette::MASKED })
        });
        large_map(ui, &texture, &seen, &maps.tokens, size, Labels::Fitted);
        let masked = if causal { "; grey: later keys, masked" } else { "" };
        ui.label(RichText::new(format!("red above 0, blue below; full colour at ±{largest:.2}{masked}")).weak());
    }

    fn diff_ui(&mut self, ui: &mut Ui, view: &SessionView, maps: &AttentionMaps, layer: usize, head: usize) {
        let names: Vec<&str> = view.runs.iter().map(|r| r.label()).collect();
        let n = names.len().min(maps.runs.len());
        self.diff = (self.diff.0.min(n - 1), self.diff.1.min(n - 1));
        ui.horizontal(|ui| {
            ui.label(RichText::new(format!("difference at layer {layer}, head {head}:")).strong());
            run_picker(ui, "first run of the difference", &names[..n], &mut self.diff.0);
            ui.label("minus");
            run_picker(ui, "second run of the difference", &names[..n], &mut self.diff.1);
        });
        let a = maps.runs[self.diff.0].get(layer).and_then(|hs| hs.get(head));
        let b = maps.runs[self.diff.1].get(layer).and_then(|hs| hs.get(head));
        let (Some(a), Some(b)) = (a, b) else {
            ui.label("The two runs do not both have this head.");
            return;
        };
        let difference: Vec<f32> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        // Scaled to its own largest difference: on a ±1 scale a difference of 0.08 is white.
        let largest = difference.iter().fold(0.0f32, |m, d| m.max(d.abs()));
        let scale = if largest > 0.0 { largest } else { 1.0 };
        let texture = self.diff_texture.of(ui, "attention difference", (self.textures_of, self.diff, layer, head), || {
            image(&difference, maps.time(), |d| palette::diverging(d / scale))
        });
        let size = (ui.available_height() - 36.0).clamp(120.0, 360.0);
        large_map(ui, &texture, &difference, &maps.tokens, size, Labels::Fitted);
        ui.label(
            RichText::new(format!(
                "red: {} attends more, blue: less; full colour at ±{largest:.3} (the largest difference)",
                names[self.diff.0]
            ))
            .weak(),
        );
    }
}

/// The head (layer, head) where runs `a` and `b`'s maps differ most over the tokens `window`
/// (queries and keys): the largest mean absolute difference of their probabilities. `None` where
/// the two have no head in common.
pub fn contrast_head(maps: &AttentionMaps, a: usize, b: usize, window: std::ops::Range<usize>) -> Option<(usize, usize)> {
    let time = maps.time();
    let (a, b) = (maps.runs.get(a)?, maps.runs.get(b)?);
    let mut best: Option<((usize, usize), f32)> = None;
    for (l, (heads_a, heads_b)) in a.iter().zip(b).enumerate() {
        for (h, (map_a, map_b)) in heads_a.iter().zip(heads_b).enumerate() {
            let difference: f32 = window
                .clone()
                .flat_map(|q| window.clone().map(move |k| q * time + k))
                .map(|i| (map_a[i] - map_b[i]).abs())
                .filter(|d| d.is_finite())
                .sum();
            if best.is_none_or(|(_, largest)| difference > largest) {
                best = Some(((l, h), difference));
            }
        }
    }
    best.map(|(head, _)| head)
}

/// A colour bar `width` points wide: `colour` from 0 to 1, its two ends' values under its ends
/// and what it measures after them.
fn colour_bar(ui: &mut Ui, width: f32, low: &str, high: &str, what: &str, colour: impl Fn(f32) -> Color32) {
    ui.horizontal(|ui| {
        ui.label(low);
        let (rect, _) = ui.allocate_exact_size(vec2(width * 0.6, 14.0), Sense::hover());
        let steps = 32;
        for i in 0..steps {
            let x = |i: usize| rect.left() + rect.width() * i as f32 / steps as f32;
            let cell = Rect::from_min_max(pos2(x(i), rect.top()), pos2(x(i + 1), rect.bottom()));
            ui.painter().rect_filled(cell, 0.0, colour((i as f32 + 0.5) / steps as f32));
        }
        ui.label(high);
    });
    ui.label(RichText::new(what).weak());
}

/// How large a map's token labels are.
#[derive(Clone, Copy)]
enum Labels {
    /// As large as a row is tall, between 6 and 12 points.
    Fitted,
    /// As large as a row is tall, but at least this many points (presentation mode); the
    /// column labels stand upright so that wide tokens do not overlap.
    AtLeast(f32),
}

/// A map `size` points square with its tokens along the top and the left.
fn large_map(ui: &mut Ui, texture: &TextureHandle, map: &[f32], tokens: &[String], size: f32, labels: Labels) {
    let time = tokens.len();
    let step = size / time.max(1) as f32;
    let points = match labels {
        Labels::Fitted => (step * 0.8).clamp(6.0, 12.0),
        // Twice the least at most: a four-token map's rows are 70 points tall, and labels that
        // size stood out of the map's top.
        Labels::AtLeast(least) => (step * 0.8).clamp(least, 2.0 * least),
    };
    let font = egui::FontId::monospace(points);
    let colour = ui.visuals().text_color();
    let galleys: Vec<_> = tokens
        .iter()
        .map(|token| ui.painter().layout_no_wrap(token.replace('\n', "\\n").replace(' ', "_"), font.clone(), colour))
        .collect();
    let widest = galleys.iter().map(|g| g.size().x).fold(0.0f32, f32::max);
    let (left, top) = match labels {
        Labels::Fitted => (28.0, 28.0),
        Labels::AtLeast(_) => (widest + 8.0, widest + 8.0),
    };
    let (outer, _) = ui.allocate_exact_size(vec2(size + left, 0.0), Sense::hover());
    let start = outer.min + vec2(left, top);
    ui.add_space(top);
    ui.horizontal(|ui| {
        ui.add_space(left);
        AttentionPanel::map_widget(ui, texture, map, tokens, size);
    });
    let painter = ui.painter();
    // Each label is laid out once (above) and drawn from that layout in both its places.
    let place = |galley: &std::sync::Arc<egui::Galley>, at, anchor: egui::Align2| {
        painter.galley(anchor.anchor_size(at, galley.size()).min, galley.clone(), colour);
    };
    for (i, galley) in galleys.into_iter().enumerate() {
        let centre = start.y + (i as f32 + 0.5) * step;
        place(&galley, pos2(start.x - 4.0, centre), egui::Align2::RIGHT_CENTER);
        let column = start.x + (i as f32 + 0.5) * step;
        match labels {
            Labels::Fitted => place(&galley, pos2(column, start.y - 4.0), egui::Align2::CENTER_BOTTOM),
            Labels::AtLeast(_) => {
                // Upright, reading upwards, ending just above its column.
                let at = pos2(column - galley.size().y / 2.0, start.y - 4.0);
                painter.add(egui::epaint::TextShape::new(at, galley, colour).with_angle(-std::f32::consts::FRAC_PI_2));
            }
        }
    }
}

/// A combo box choosing one of `names` by index.
fn run_picker(ui: &mut Ui, purpose: &str, names: &[&str], selected: &mut usize) {
    ComboBox::from_id_salt(purpose)
        .selected_text(names[*selected])
        .show_ui(ui, |ui| {
            for (i, name) in names.iter().enumerate() {
                ui.selectable_value(selected, i, *name);
            }
        })
        .response
        .accessible_name(purpose);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contrast_head_is_where_two_runs_maps_differ_most_within_the_window() {
        let uniform = vec![0.5; 4];
        let sharp = vec![1.0, 0.0, 0.0, 1.0];
        let maps = AttentionMaps {
            step: 10,
            tokens: vec!["a".into(), "b".into()],
            ids: Vec::new(),
            // Two runs × 2 layers × 2 heads of 2×2 maps: they differ at layer 1, head 0 only.
            runs: vec![
                vec![vec![uniform.clone(), uniform.clone()], vec![uniform.clone(), uniform.clone()]],
                vec![vec![uniform.clone(), uniform.clone()], vec![sharp, uniform.clone()]],
            ],
            logits: Vec::new(),
            diagnostics: Vec::new(),
            images: None,
            predictions: Vec::new(),
        };
        assert_eq!(contrast_head(&maps, 0, 1, 0..2), Some((1, 0)));
        assert_eq!(contrast_head(&maps, 0, 2, 0..2), None, "no third run");
    }

    #[test]
    fn the_cell_under_the_pointer_is_query_row_key_column() {
        let rect = Rect::from_min_size(pos2(10.0, 20.0), vec2(40.0, 40.0));
        assert_eq!(cell_at(rect, 4, pos2(11.0, 21.0)), Some((0, 0)));
        assert_eq!(cell_at(rect, 4, pos2(45.0, 25.0)), Some((0, 3)));
        assert_eq!(cell_at(rect, 4, pos2(15.0, 59.0)), Some((3, 0)));
        assert_eq!(cell_at(rect, 4, pos2(5.0, 25.0)), None);
    }
}
