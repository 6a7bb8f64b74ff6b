//! What the app knows about the session: the runs, their curves, the latest attention maps and
//! samples, built only from the session's messages.

use egui::Color32;
use qkv_compute::ComputeId;
use qkv_session::{AttentionMaps, Message, RunId, RunInfo};
use qkv_train::theory::ReparamReport;
use qkv_train::{DataSource, RunEvent};
use qkv_train::{EvalRecord, StepRecord};

use crate::files::KeptRuns;

pub struct RunView {
    pub info: RunInfo,
    /// What a student reads for this run: the papers' notation ([`run_label`]); the run's own
    /// name (the command line's) is shown on hover.
    pub label: String,
    pub colour: Color32,
    /// The step a copy was born at by "Eliminate W_Q": its metrics before are the original's,
    /// which the chart draws once, as the original's.
    pub born_at: Option<usize>,
    pub steps: Vec<StepRecord>,
    pub evals: Vec<EvalRecord>,
    /// Why the run stopped, when it did.
    pub error: Option<String>,
    pub sample: Option<String>,
}

impl RunView {
    /// A run as the session announced it, with the metrics it already has.
    pub fn new(info: RunInfo, colour: Color32) -> Self {
        Self {
            label: run_label(&info.spec.name, &info.spec.model),
            colour,
            born_at: None,
            steps: info.steps.clone(),
            evals: info.evals.clone(),
            error: None,
            sample: None,
            info,
        }
    }

    /// The run's name as the command line and its files have it ("shared-kv+mqa").
    pub fn name(&self) -> &str {
        &self.info.spec.name
    }

    /// The run as a student reads it: the papers' notation ("Q-K=V + MQA").
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Is the run standard attention with a key/value head per head: the reference the papers
    /// set every variant against?
    pub fn is_standard(&self) -> bool {
        let model = &self.info.spec.model;
        model.attention.variant == qkv_model::AttentionVariant::Standard && model.attention.shared_kv_heads(model.n_head).is_none()
    }

    /// Tokens per second over the last few steps (the latest step alone jitters).
    pub fn recent_tokens_per_sec(&self) -> Option<f64> {
        let recent = &self.steps[self.steps.len().saturating_sub(10)..];
        (!recent.is_empty()).then(|| recent.iter().map(|s| s.tokens_per_sec).sum::<f64>() / recent.len() as f64)
    }
}

/// A run's label in the papers' notation. A name the user gave it (one the plan would not have
/// built from the variant and its heads) follows in brackets, so two runs of one variant stay
/// apart; a name the plan built says nothing the notation does not.
pub fn run_label(name: &str, model: &qkv_model::ModelConfig) -> String {
    use qkv_train::plan::RunPlan;
    let notation = model.attention.notation(model.n_head);
    let kv_heads = model.attention.shared_kv_heads(model.n_head);
    let built = RunPlan { kv_heads, ..RunPlan::new(model.attention.variant) }.display_name();
    match name.strip_prefix(built.as_str()) {
        Some("") => notation,
        // The plan numbers a second run of one name: "standard-2".
        Some(rest) if rest.strip_prefix('-').is_some_and(|n| n.parse::<usize>().is_ok()) => format!("{notation} #{}", &rest[1..]),
        _ => format!("{notation} ({name})"),
    }
}

/// A run's saved state as the session handed it back.
pub struct Export {
    pub name: String,
    pub checkpoint: Vec<u8>,
    pub metrics_csv: String,
}

/// The most sets of maps the history keeps (a classroom model's set is about 64 kB).
pub const MAPS_KEPT: usize = 120;

#[derive(Default)]
pub struct SessionView {
    pub runs: Vec<RunView>,
    /// What the loaded runs train on, and where (`None` before the first load).
    pub data: Option<DataSource>,
    pub compute: Option<ComputeId>,
    pub playing: bool,
    pub finished: bool,
    /// Every set of maps since the runs were loaded, oldest first, for scrubbing back through
    /// training; thinned to every other old set beyond [`MAPS_KEPT`]. The last is the latest
    /// ([`SessionView::attention`]).
    pub attention_history: Vec<AttentionMaps>,
    /// Bumped by every new set of maps, so panels know when to redraw their textures.
    pub attention_version: u64,
    /// The last failed command, shown until the next success.
    pub error: Option<String>,
    /// The latest W_Q elimination: the run it started from and how exact it was.
    pub conversion: Option<(RunId, ReparamReport)>,
    /// Checkpoints and CSVs handed back by the session, for the app to save.
    pub exports: Vec<Export>,
    /// Every run's checkpoint, handed back for the platform to keep (autosave).
    pub snapshot: Option<KeptRuns>,
}

impl SessionView {
    pub fn is_loaded(&self) -> bool {
        !self.runs.is_empty()
    }

    /// The latest attention maps.
    pub fn attention(&self) -> Option<&AttentionMaps> {
        self.attention_history.last()
    }

    /// The run every other is set against, in the cost columns and the verdict: the first
    /// standard one (Q-K-V with a key/value head per head, the papers' reference), else the
    /// first.
    pub fn reference(&self) -> Option<&RunView> {
        self.runs.iter().find(|r| r.is_standard()).or(self.runs.first())
    }

    /// Run `id`, if there is one.
    pub fn run(&self, id: RunId) -> Option<&RunView> {
        self.runs.iter().find(|r| r.info.id == id)
    }

    fn run_mut(&mut self, id: RunId) -> Option<&mut RunView> {
        self.runs.iter_mut().find(|r| r.info.id == id)
    }

    /// An id no run has, for a run the app asks the session to add.
    pub fn unused_id(&self) -> RunId {
        RunId(self.runs.iter().map(|r| r.info.id.0 + 1).max().unwrap_or(0))
    }

    /// Adds `maps` to the history: in place of the last set where they are of the same step (a
    /// new prompt, a converted run joining), else after it. Only the latest set keeps its
    /// logits: they would double the history's memory (120 sets of a classroom model's four
    /// runs are 60 MB of probabilities).
    fn keep_in_history(&mut self, maps: AttentionMaps) {
        if let Some(last) = self.attention_history.last_mut() {
            if last.step == maps.step {
                *last = maps;
                return;
            }
            last.logits = Vec::new();
        }
        if self.attention_history.len() >= MAPS_KEPT {
            // Every other one of the older half goes: the history still spans all of training.
            let half = MAPS_KEPT / 2;
            let mut index = 0;
            self.attention_history.retain(|_| {
                index += 1;
                index > half || index % 2 == 1
            });
        }
        self.attention_history.push(maps);
    }

    pub fn step(&self) -> usize {
        self.runs.iter().map(|r| r.steps.last().map_or(0, |s| s.step)).max().unwrap_or(0)
    }

    /// The step every run has finished (runs in separate workers keep their own pace).
    pub fn steps_done(&self) -> usize {
        self.runs.iter().map(|r| r.steps.last().map_or(0, |s| s.step)).min().unwrap_or(0)
    }

    /// `colours` gives each run's colour by index (the setup's choice).
    pub fn apply(&mut self, message: Message, colours: &[Color32]) {
        match message {
            Message::Loaded { runs, data, compute } => {
                self.runs = runs
                    .into_iter()
                    .enumerate()
                    .map(|(i, info)| RunView::new(info, colours.get(i).copied().unwrap_or_else(|| crate::palette::colour(i))))
                    .collect();
                self.data = Some(data);
                self.compute = Some(compute);
                self.finished = false;
                self.attention_history.clear();
                self.error = None;
                self.conversion = None;
            }
            Message::Converted { from, info, report } => {
                let used: Vec<Color32> = self.runs.iter().map(|r| r.colour).collect();
                let mut copy = RunView::new(*info, crate::palette::first_unused(&used));
                if let Some(original) = self.run(from) {
                    let model = &copy.info.spec.model;
                    copy.label = format!("{} (copy of {})", model.attention.notation(model.n_head), original.label);
                }
                copy.born_at = Some(report.steps);
                self.runs.push(copy);
                self.conversion = Some((from, *report));
                self.error = None;
            }
            Message::Run(RunEvent::Stepped { run, record, eval }) => {
                if let Some(view) = self.run_mut(run) {
                    view.steps.push(record);
                    view.evals.extend(eval);
                }
            }
            Message::Evaluated { run, record } => {
                if let Some(view) = self.run_mut(run) {
                    view.evals.push(record);
                }
            }
            Message::Run(RunEvent::Stopped { run, error }) => {
                if let Some(view) = self.run_mut(run) {
                    view.error = Some(error.to_string());
                }
            }
            Message::Attention(maps) => {
                self.keep_in_history(maps);
                self.attention_version += 1;
            }
            Message::Sampled { run, text } => {
                if let Some(view) = self.run_mut(run) {
                    view.sample = Some(text);
                }
            }
            Message::Exported { name, checkpoint, metrics_csv, .. } => {
                self.exports.push(Export { name, checkpoint, metrics_csv });
            }
            Message::Snapshot { step, files, .. } => self.snapshot = Some(KeptRuns { step, files }),
            Message::Playing(playing) => self.playing = playing,
            Message::Finished => {
                self.finished = true;
                self.playing = false;
            }
            Message::Failed(error) => self.error = Some(error.to_string()),
            // Between a session and the fan-out that spreads runs over sessions.
            Message::Sharing(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps_at(step: usize) -> AttentionMaps {
        let one_map = vec![vec![vec![vec![0.5]]]];
        AttentionMaps {
            step,
            tokens: vec!["a".into()],
            ids: Vec::new(),
            runs: one_map.clone(),
            logits: one_map,
            diagnostics: Vec::new(),
            images: None,
            predictions: Vec::new(),
        }
    }

    #[test]
    fn runs_are_labelled_in_the_papers_notation_with_the_user_s_own_names_after_it() {
        let model = |variant, kv_heads| {
            let mut model = qkv_model::Preset::Classroom.config().with_variant(variant);
            model.attention.kv_heads = kv_heads;
            model
        };
        use qkv_model::AttentionVariant::*;
        assert_eq!(run_label("standard", &model(Standard, None)), "Q-K-V");
        assert_eq!(run_label("standard-2", &model(Standard, None)), "Q-K-V #2");
        assert_eq!(run_label("standard+gqa2", &model(Standard, Some(2))), "GQA-2");
        assert_eq!(run_label("shared-kv+mqa", &model(SharedKeyValue, Some(1))), "Q-K=V + MQA");
        assert_eq!(run_label("wq-identity", &model(QueryIdentity, None)), "Q=I");
        assert_eq!(run_label("mine", &model(SharedKeyValue, None)), "Q-K=V (mine)");
    }

    #[test]
    fn the_history_keeps_every_refresh_and_thins_the_old_ones_once_full() {
        let mut view = SessionView::default();
        view.apply(Message::Attention(maps_at(0)), &[]);
        view.apply(Message::Attention(maps_at(0)), &[]);
        assert_eq!(view.attention_history.len(), 1, "a new prompt at the same step replaces its maps");
        for step in 1..MAPS_KEPT {
            view.apply(Message::Attention(maps_at(25 * step)), &[]);
        }
        assert_eq!(view.attention_history.len(), MAPS_KEPT);
        view.apply(Message::Attention(maps_at(25 * MAPS_KEPT)), &[]);
        let steps: Vec<usize> = view.attention_history.iter().map(|m| m.step).collect();
        assert_eq!(steps.len(), MAPS_KEPT / 4 + MAPS_KEPT / 2 + 1, "the older half thinned to every other");
        assert_eq!((steps[0], *steps.last().unwrap()), (0, 25 * MAPS_KEPT), "still from the untrained maps to the latest");
        assert!(steps.windows(2).all(|w| w[0] < w[1]));
        let with_logits: Vec<bool> = view.attention_history.iter().map(|m| !m.logits.is_empty()).collect();
        assert!(with_logits.last() == Some(&true) && with_logits.iter().filter(|&&kept| kept).count() == 1, "the latest keeps its logits");
        assert!(view.attention_history.iter().all(|m| !m.runs.is_empty()), "every set keeps its probabilities");
    }
}
