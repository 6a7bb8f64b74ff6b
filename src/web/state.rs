//! `window.qkvLab`: the training state scripts (and the end-to-end test) read without parsing
//! pixels.

use wasm_bindgen::JsValue;

use super::WebShell;

impl WebShell {
    /// How many of each run's first training losses `window.qkvLab` carries.
    const EARLY_LOSSES: usize = 64;

    /// `window.qkvLab`: what scripts (and the end-to-end test) can read without parsing pixels.
    pub(super) fn publish_state(&mut self) {
        let Some(window) = web_sys::window() else { return };
        let view = self.playground.view();
        let state = js_sys::Object::new();
        let set = |object: &js_sys::Object, key: &str, value: JsValue| {
            let _ = js_sys::Reflect::set(object, &key.into(), &value);
        };
        set(&state, "compute", self.playground.compute_label().into());
        set(&state, "timing", self.playground.timing().map_or(JsValue::NULL, Into::into));
        let choice = self.playground.compute_choice().and_then(|v| js_sys::JSON::parse(&v.to_json()).ok());
        set(&state, "computeChoice", choice.unwrap_or(JsValue::NULL));
        set(&state, "backend", view.compute.as_ref().map(ToString::to_string).unwrap_or_default().into());
        set(&state, "step", (view.step() as f64).into());
        set(&state, "playing", view.playing.into());
        set(&state, "error", view.error.clone().map_or(JsValue::NULL, Into::into));
        set(&state, "notice", self.playground.notice().map_or(JsValue::NULL, |(n, _)| n.into()));
        set(&state, "link", self.playground.share_link().map_or(JsValue::NULL, Into::into));
        set(&state, "exportRun", self.export_run.as_ref().clone());
        set(&state, "keptStep", self.kept_step.get().map_or(JsValue::NULL, |step| (step as f64).into()));
        set(&state, "keptOffer", self.playground.kept_offer().map_or(JsValue::NULL, |step| (step as f64).into()));
        set(&state, "continueKept", self.continue_kept.as_ref().clone());
        set(&state, "frameMs", self.playground.frames().mean().map_or(JsValue::NULL, |mean| (mean * 1e3).into()));
        let (repaint_secs, repaints) = self.repaint_cpu;
        set(&state, "repaintCpuMs", if repaints > 0 { (repaint_secs * 1e3 / f64::from(repaints)).into() } else { JsValue::NULL });
        let runs = js_sys::Array::new();
        for run in &view.runs {
            let r = js_sys::Object::new();
            set(&r, "name", run.name().into());
            set(&r, "steps", (run.steps.len() as f64).into());
            set(&r, "firstLoss", run.steps.first().map_or(JsValue::NULL, |s| s.train_loss.into()));
            set(&r, "lastLoss", run.steps.last().map_or(JsValue::NULL, |s| s.train_loss.into()));
            set(&r, "firstValLoss", run.evals.first().map_or(JsValue::NULL, |e| e.val_loss.into()));
            set(&r, "lastValLoss", run.evals.last().map_or(JsValue::NULL, |e| e.val_loss.into()));
            set(&r, "error", run.error.clone().map_or(JsValue::NULL, Into::into));
            set(&r, "tokensPerSec", run.recent_tokens_per_sec().map_or(JsValue::NULL, Into::into));
            // The first steps' losses, to compare builds (the same seed trains the same curve).
            let early = js_sys::Array::new();
            for step in run.steps.iter().take(Self::EARLY_LOSSES) {
                early.push(&step.train_loss.into());
            }
            set(&r, "earlyLosses", early.into());
            runs.push(&r);
        }
        set(&state, "runs", runs.into());
        if let Some(maps) = view.attention() {
            let count: usize = maps.runs.iter().map(|run| run.iter().map(Vec::len).sum::<usize>()).sum();
            let version = view.attention_version;
            let rows_sum_to_one = match self.attention_rows_checked {
                Some((checked, result)) if checked == version => result,
                _ => {
                    let t = maps.time();
                    let result = maps
                        .runs
                        .iter()
                        .flatten()
                        .flatten()
                        .all(|map| map.chunks(t).all(|row| (row.iter().sum::<f32>() - 1.0).abs() < 1e-3));
                    self.attention_rows_checked = Some((version, result));
                    result
                }
            };
            set(&state, "attentionMaps", (count as f64).into());
            set(&state, "attentionStep", (maps.step as f64).into());
            set(&state, "attentionRowsSumToOne", rows_sum_to_one.into());
        }
        let _ = js_sys::Reflect::set(&window, &"qkvLab".into(), &state);
    }
}
