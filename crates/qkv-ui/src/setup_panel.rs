//! The experiment setup: base preset, model size, data, tokenizer, recipe, and the list of runs
//! (each a variant with its own overrides and colour).

use egui::{Color32, ComboBox, DragValue, Grid, RichText, Ui};
use serde::{Deserialize, Serialize};

use qkv_model::{AttentionVariant, ModelConfig, Preset};
use qkv_train::dataset::DEFAULT_SYNTHETIC_LENGTH;
use qkv_train::plan::{ExperimentPlan, RunPlan};
use qkv_train::recipe::TrainingConfig;
use qkv_train::{DataSource, Framing, ImageSource, SyntheticTask, TokenizerKind};

use crate::files::FileKind;
use crate::intent::Intent;
use crate::palette;

/// Everything the setup panel edits; persisted across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Setup {
    pub plan: ExperimentPlan,
    /// One colour per run, in run order.
    pub colours: Vec<[u8; 3]>,
}

impl Default for Setup {
    /// The first lesson: does attention need W_Q, on Shakespeare, in seconds.
    fn default() -> Self {
        Self::from_plan((crate::lessons::LESSONS[0].plan)())
    }
}

impl Setup {
    pub fn from_plan(plan: ExperimentPlan) -> Self {
        let colours = (0..plan.runs.len()).map(|i| rgb(palette::colour(i))).collect();
        Self { plan, colours }
    }

    pub fn colour(&self, run: usize) -> Color32 {
        self.colours.get(run).map_or_else(|| palette::colour(run), |&[r, g, b]| Color32::from_rgb(r, g, b))
    }

    pub fn colours32(&self) -> Vec<Color32> {
        (0..self.plan.runs.len()).map(|i| self.colour(i)).collect()
    }

    pub fn add_run(&mut self, run: RunPlan) {
        let colour = rgb(palette::first_unused(&self.colours32()));
        self.plan.runs.push(run);
        self.colours.resize(self.plan.runs.len() - 1, [0; 3]);
        self.colours.push(colour);
    }

    pub fn duplicate_run(&mut self, index: usize) {
        let mut copy = self.plan.runs[index].clone();
        if !copy.name.is_empty() {
            copy.name = format!("{} copy", copy.name);
        }
        self.add_run(copy);
    }

    pub fn remove_run(&mut self, index: usize) {
        self.plan.runs.remove(index);
        if index < self.colours.len() {
            self.colours.remove(index);
        }
    }
}

fn rgb(c: Color32) -> [u8; 3] {
    [c.r(), c.g(), c.b()]
}

/// A drag value for an optional override: shows the default until the user changes it.
fn override_value<T: egui::emath::Numeric>(ui: &mut Ui, name: &str, value: &mut Option<T>, default: T, speed: f64) {
    let mut shown = value.unwrap_or(default);
    let response = ui.add(DragValue::new(&mut shown).speed(speed)).accessible_name(name);
    if response.changed() {
        *value = Some(shown);
    }
    if value.is_some() && ui.small_button("reset").on_hover_text(format!("{name} back to the default")).clicked() {
        *value = None;
    }
}

#[derive(Default)]
pub struct SetupPanel {
    /// Whether the user names files by path (the desktop); otherwise a text is uploaded (or
    /// dropped on the page) and known by its name.
    pub paths: bool,
}

/// Characters or BPE with its vocabulary size (or the tokenizer file a link named).
fn tokenizer_ui(ui: &mut Ui, tokenizer: &mut TokenizerKind) {
    let is_bpe = matches!(*tokenizer, TokenizerKind::Bpe { .. });
    if ui.radio(*tokenizer == TokenizerKind::Char, "characters").clicked() {
        *tokenizer = TokenizerKind::Char;
    }
    if ui.radio(is_bpe, "BPE").clicked() && !is_bpe {
        *tokenizer = TokenizerKind::Bpe { vocab_size: 512 };
    }
    match tokenizer {
        TokenizerKind::Char => {}
        TokenizerKind::Bpe { vocab_size } => {
            ui.add(DragValue::new(vocab_size).range(257..=8192).prefix("vocab ")).accessible_name("BPE vocabulary size");
        }
        // Only a link or the command line names a tokenizer file; it shows here.
        TokenizerKind::File(path) => {
            ui.label(path.as_str()).on_hover_text("a Hugging Face tokenizer.json");
        }
    }
}

/// The model's shape and the training recipe, as overrides of the preset's.
fn model_and_training_rows(ui: &mut Ui, plan: &mut ExperimentPlan, preset_config: &ModelConfig, recipe: &TrainingConfig) {
    // Two fields a row, so that the panel's default width shows every one of them.
    ui.label("model");
    ui.horizontal_wrapped(|ui| {
        ui.label("layers");
        override_value(ui, "layers", &mut plan.model.n_layer, preset_config.n_layer, 0.05);
        ui.label("heads");
        override_value(ui, "heads", &mut plan.model.n_head, preset_config.n_head, 0.05);
    });
    ui.end_row();
    ui.label("");
    ui.horizontal_wrapped(|ui| {
        ui.label("width");
        override_value(ui, "width", &mut plan.model.n_embd, preset_config.n_embd, 1.0);
        ui.label("context");
        override_value(ui, "context", &mut plan.model.block_size, preset_config.block_size, 1.0);
    });
    ui.end_row();

    ui.label("training");
    ui.horizontal_wrapped(|ui| {
        ui.label("steps");
        override_value(ui, "steps", &mut plan.training.steps, recipe.steps, 5.0);
        ui.label("batch");
        override_value(ui, "batch", &mut plan.training.batch_size, recipe.batch_size, 0.2);
        ui.label("seed");
        override_value(ui, "seed", &mut plan.training.seed, recipe.seed, 1.0);
    });
    ui.end_row();
    ui.label("");
    ui.horizontal_wrapped(|ui| {
        ui.label("lr");
        override_value(ui, "learning rate", &mut plan.training.lr, recipe.lr, 1e-4);
        ui.label("weight decay");
        override_value(ui, "weight decay", &mut plan.training.weight_decay, recipe.weight_decay, 1e-3);
    });
    ui.end_row();
}

impl SetupPanel {
    pub fn ui(&mut self, ui: &mut Ui, setup: &mut Setup, changed_since_apply: bool) -> Option<Intent> {
        let plan = &mut setup.plan;
        let preset_config = plan.preset.config();
        let recipe = TrainingConfig::for_preset(plan.preset);

        let mut data_action = None;
        let before = (plan.preset, plan.data.clone());
        Grid::new("setup_base").num_columns(2).spacing([8.0, 4.0]).show(ui, |ui| {
            ui.label("preset");
            ComboBox::from_id_salt("preset")
                .selected_text(plan.preset.name())
                .show_ui(ui, |ui| {
                    for preset in Preset::ALL {
                        ui.selectable_value(&mut plan.preset, preset, preset.name()).on_hover_text(preset.description());
                    }
                })
                .response
                .accessible_name("preset");
            ui.end_row();

            ui.label("data");
            // Wrapped, as the rows below: a task's length and framing, or a reset button beside a
            // field, would otherwise run past the panel's edge.
            ui.horizontal_wrapped(|ui| data_action = data_ui(ui, &mut plan.data, self.paths));
            ui.end_row();
            match_preset_and_data(plan, before);

            if matches!(plan.data, DataSource::Shakespeare | DataSource::File(_) | DataSource::Upload(_)) {
                ui.label("tokenizer");
                ui.horizontal(|ui| tokenizer_ui(ui, &mut plan.tokenizer));
                ui.end_row();
            }

            model_and_training_rows(ui, plan, &preset_config, &recipe);
        });

        ui.add_space(4.0);
        ui.label(RichText::new("Runs").strong());
        let mut remove = None;
        let mut duplicate = None;
        let n_runs = setup.plan.runs.len();
        setup.colours.resize(n_runs, [128; 3]);
        // Each run in rows: what it is (colour, name, variant), then its overrides.
        let model = setup.plan.model.applied_to(preset_config.clone());
        Grid::new("setup_runs").striped(true).num_columns(2).show(ui, |ui| {
            for (i, run) in setup.plan.runs.iter_mut().enumerate() {
                ui.color_edit_button_srgb(&mut setup.colours[i]).accessible_name(format!("colour of run {}", i + 1));
                ui.horizontal_wrapped(|ui| {
                    let hint = run.display_name();
                    ui.add(egui::TextEdit::singleline(&mut run.name).hint_text(hint).desired_width(110.0))
                        .accessible_name(format!("name of run {}", i + 1));
                    ComboBox::from_id_salt(("variant", i))
                        .selected_text(run.variant.name())
                        .show_ui(ui, |ui| {
                            for variant in AttentionVariant::ALL {
                                ui.selectable_value(&mut run.variant, variant, format!("{}  {}", variant.name(), variant.notation()));
                            }
                        })
                        .response
                        .accessible_name(format!("variant of run {}", i + 1));
                    if ui.small_button("copy").on_hover_text("duplicate this run").clicked() {
                        duplicate = Some(i);
                    }
                    if ui.add_enabled(n_runs > 1, egui::Button::new("remove").small()).clicked() {
                        remove = Some(i);
                    }
                });
                ui.end_row();
                ui.label("");
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new("kv heads").weak());
                    // The defaults of the model the overrides above make, as the run will have them.
                    override_value(ui, "kv heads", &mut run.kv_heads, model.n_head, 0.05);
                    let d_k = model.n_embd / model.n_head.max(1);
                    ui.label(RichText::new("scale").weak());
                    override_value(ui, "attention scale", &mut run.scale, run.variant.default_scale(d_k), 1e-3);
                });
                ui.end_row();
                ui.label("");
                ui.horizontal_wrapped(|ui| {
                    let decay = recipe.clone().for_variant(run.variant).weight_decay;
                    ui.label(RichText::new("weight decay").weak());
                    override_value(ui, "run weight decay", &mut run.weight_decay, decay, 1e-3);
                    ui.label(RichText::new("MLP hidden").weak());
                    override_value(ui, "MLP hidden", &mut run.mlp_hidden, model.mlp_hidden, 1.0);
                });
                ui.end_row();
            }
        });
        if let Some(i) = duplicate {
            setup.duplicate_run(i);
        }
        if let Some(i) = remove {
            setup.remove_run(i);
        }
        let mut action = data_action;
        ui.horizontal(|ui| {
            if ui.button("+ add run").clicked() {
                setup.add_run(RunPlan::new(AttentionVariant::Standard));
            }
            let apply = egui::Button::new(if changed_since_apply { "Apply setup (resets training)" } else { "Apply setup" });
            if ui.add(apply).clicked() {
                action = Some(Intent::ApplySetup);
            }
        });
        action
    }
}

/// Images need a vision preset and a vision preset needs images: the one the user just changed
/// brings the other along (a vision preset picks the digits, a text preset Shakespeare; images
/// pick the digits' ViT, a list task the synthetic preset, a text the classroom GPT).
fn match_preset_and_data(plan: &mut ExperimentPlan, (preset, data): (Preset, DataSource)) {
    let images = matches!(plan.data, DataSource::Images(_));
    if images == plan.preset.is_vision() {
        return;
    }
    if plan.preset != preset {
        plan.data = if plan.preset.is_vision() { DataSource::Images(ImageSource::Digits) } else { DataSource::Shakespeare };
    } else if plan.data != data {
        plan.preset = match plan.data {
            DataSource::Images(_) => Preset::VisionDigits,
            DataSource::Synthetic { .. } => Preset::Synthetic,
            _ => Preset::Classroom,
        };
    }
}

/// The data row; says whether the user asked for a text (uploaded, or by path in a dialog).
fn data_ui(ui: &mut Ui, data: &mut DataSource, paths: bool) -> Option<Intent> {
    let upload_button = |ui: &mut Ui| {
        let asked = ui.button("upload…").on_hover_text("or drop a UTF-8 .txt file on the page").clicked();
        asked.then_some(Intent::PickFile(FileKind::Text))
    };
    let label = match data {
        DataSource::Shakespeare => "Shakespeare (embedded)",
        DataSource::Synthetic { .. } => "synthetic task",
        DataSource::File(_) | DataSource::Upload(_) => "my own text file",
        DataSource::Images(ImageSource::Digits) => "images (8×8 digits)",
        DataSource::Images(ImageSource::Relations) => "images (relations)",
        // A set on disk comes from the command line or a link: shown by its name.
        DataSource::Images(other) => &other.to_string(),
    };
    let own_text = matches!(data, DataSource::File(_) | DataSource::Upload(_));
    let combo = ComboBox::from_id_salt("data").selected_text(label).show_ui(ui, |ui| {
        if ui.selectable_label(matches!(data, DataSource::Shakespeare), "Shakespeare (embedded)").clicked() {
            *data = DataSource::Shakespeare;
        }
        if ui.selectable_label(matches!(data, DataSource::Synthetic { .. }), "synthetic task").clicked()
            && !matches!(data, DataSource::Synthetic { .. })
        {
            *data = DataSource::Synthetic { task: SyntheticTask::Reverse, length: DEFAULT_SYNTHETIC_LENGTH, framing: Framing::Decoder };
        }
        if ui.selectable_label(own_text, "my own text file").clicked() && !own_text {
            *data = DataSource::File(String::new());
        }
        for (images, label, hover) in [
            (ImageSource::Digits, "images (8×8 digits)", "handwritten digits to classify, with a vision transformer"),
            (
                ImageSource::Relations,
                "images (relations)",
                "where a bright square is from a dim one, generated: a class that runs one way, for a vision transformer",
            ),
        ] {
            let chosen = matches!(data, DataSource::Images(source) if *source == images);
            if ui.selectable_label(chosen, label).on_hover_text(hover).clicked() {
                *data = DataSource::Images(images);
            }
        }
    });
    let _ = combo.response.accessible_name("data");
    match data {
        DataSource::Shakespeare | DataSource::Images(_) => {}
        DataSource::Synthetic { task, length, framing } => {
            ComboBox::from_id_salt("task")
                .selected_text(task.name())
                .show_ui(ui, |ui| {
                    for t in SyntheticTask::ALL {
                        ui.selectable_value(task, t, t.name());
                    }
                })
                .response
                .accessible_name("synthetic task");
            ui.add(DragValue::new(length).range(2..=64).prefix("L = ")).accessible_name("list length");
            let mut encoder = *framing == Framing::Encoder;
            if ui
                .checkbox(&mut encoder, "encoder")
                .on_hover_text(
                    "read the whole list at once, attention both ways, and answer at every position \
                     (off: a decoder reads 'list | answer' left to right)",
                )
                .changed()
            {
                *framing = if encoder { Framing::Encoder } else { Framing::Decoder };
            }
        }
        DataSource::Upload(upload) => {
            ui.label(&upload.name).on_hover_text("a text you handed over; drop another file to replace it");
            if !paths {
                return upload_button(ui);
            }
            if ui.small_button("use a path").clicked() {
                *data = DataSource::File(String::new());
            }
        }
        DataSource::File(path) => {
            if !paths {
                let shown = if path.is_empty() { "no text yet".to_string() } else { path.clone() };
                ui.label(shown);
                return upload_button(ui);
            }
            // The button first: the field takes what width is left in the panel.
            let browse = ui.button("browse…").clicked();
            ui.add(egui::TextEdit::singleline(path).hint_text("path to a UTF-8 text file").desired_width(ui.available_width()))
                .accessible_name("text file path");
            if browse {
                return Some(Intent::BrowseText);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A setup as a page stored it, and as a `#setup=` link carried it, before the protocol's
    /// types changed (lesson 3's, written by the build before): it still reads, as that lesson.
    #[test]
    fn a_setup_saved_before_the_typed_protocol_still_reads() {
        let saved = include_str!("../tests/fixtures/setup-before-typed-protocol.json");
        let setup: Setup = serde_json::from_str(saved).unwrap();
        assert_eq!(setup.plan, qkv_train::lesson_plans::LESSON_PLANS[2]());
        assert_eq!(serde_json::to_string(&setup).unwrap(), saved.trim(), "and writes as it did");
    }

    #[test]
    fn images_and_a_vision_preset_bring_each_other_along() {
        let mut plan = ExperimentPlan::default();
        let before = (plan.preset, plan.data.clone());
        plan.data = DataSource::Images(ImageSource::Digits);
        match_preset_and_data(&mut plan, before);
        assert_eq!(plan.preset, Preset::VisionDigits, "images chose the ViT");
        let before = (plan.preset, plan.data.clone());
        plan.preset = Preset::ShakespeareCharCpu;
        match_preset_and_data(&mut plan, before);
        assert_eq!(plan.data, DataSource::Shakespeare, "a text preset chose text");
        let before = (plan.preset, plan.data.clone());
        plan.preset = Preset::VisionDigits;
        match_preset_and_data(&mut plan, before);
        assert_eq!(plan.data, DataSource::Images(ImageSource::Digits), "the ViT chose images");
        let before = (plan.preset, plan.data.clone());
        plan.data = "synthetic:reverse".parse().unwrap();
        match_preset_and_data(&mut plan, before);
        assert_eq!(plan.preset, Preset::Synthetic, "a list task chose a GPT for lists");
        // A link that names both keeps both.
        let setup: Setup =
            serde_json::from_str(r#"{"plan":{"preset":"vision-digits","data":{"Images":"digits"},"runs":[{"variant":"standard"}]}}"#)
                .unwrap();
        assert_eq!((setup.plan.preset, setup.plan.data), (Preset::VisionDigits, DataSource::Images(ImageSource::Digits)));
    }

    #[test]
    fn a_link_may_give_only_part_of_a_setup() {
        // What a hand-written or older link carries: the rest takes its defaults.
        let setup: Setup =
            serde_json::from_str(r#"{"plan":{"runs":[{"variant":"standard","name":"mine"},{"variant":"wq-identity"}]}}"#).unwrap();
        assert_eq!(setup.plan.runs.len(), 2);
        assert_eq!(setup.plan.runs[0].name, "mine");
        assert_eq!(setup.plan.runs[1].variant, AttentionVariant::QueryIdentity);
        assert_eq!(setup.plan.preset, ExperimentPlan::default().preset);
        assert_ne!(setup.colour(0), setup.colour(1), "runs without colours still get distinct ones");
    }

    #[test]
    fn colours_follow_their_runs() {
        let mut setup = Setup::default();
        setup.colours[1] = [1, 2, 3];
        setup.duplicate_run(1);
        assert_eq!(setup.plan.runs.len(), 3);
        assert_eq!(setup.plan.runs[2].variant, setup.plan.runs[1].variant);
        assert!(!setup.colours32()[..2].contains(&setup.colour(2)), "a new run gets an unused colour");
        setup.remove_run(0);
        assert_eq!(setup.colours[0], [1, 2, 3]);
        assert_eq!(setup.colours.len(), setup.plan.runs.len());
    }
}
