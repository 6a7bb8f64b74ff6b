//! The browser shell: starts eframe on the page's canvas, trains on WebGPU (or on the CPU in a
//! Web Worker when the browser has none), keeps the setup in the address so a link reopens it, and
//! publishes the training state as `window.qkvLab` for scripts and the end-to-end test, which
//! can also save a run as the Export button does (`qkvLab.exportRun(index)`) and continue the
//! runs kept from the last visit as the Continue button does (`qkvLab.continueKept()`). Every 50
//! steps the runs' checkpoints are kept in the browser's storage, so a reload loses no training.
//!
//! On the first Train the page times a few steps on WebGPU and on the CPU (in Web Workers), trains
//! on the faster, says which and why, and remembers the choice in the browser's storage.
//!
//! Query options: `?compute=flex` trains on the CPU even where WebGPU exists, `?compute=webgpu` on
//! WebGPU (neither times anything); `?autotrain`
//! starts training as soon as the page is up (a classroom link, the end-to-end test);
//! `?render=webgl` draws with WebGL and trains on a WebGPU device of its own, for browsers whose
//! WebGPU computes but cannot draw to a canvas (headless Chromium without a GPU); `?worker=0`
//! trains on the CPU inside the page instead of in a Web Worker (to compare the two).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use eframe::egui;
use qkv_model::burn::tensor::Device;
use qkv_train::session::{CheckpointFile, SessionTask, Turn};
use qkv_ui::files::{FileError, FileKind, Inbox, IncomingFile, KeptInbox, KeptRuns, OutgoingFile};
use qkv_ui::setup_panel::Setup;
use qkv_ui::{Compute, ComputeOffer, Platform, Playground, Verdict};
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::shell::{self, COMPUTE_KEY, SETUP_KEY};

/// The address part that carries the setup: `#setup=<URI-encoded JSON>`.
const HASH_PREFIX: &str = "#setup=";

/// Shows `message` where the loading indicator was (the page must never stay blank); an empty
/// message removes the indicator, and an error after that puts it back.
fn show_status(message: &str, is_error: bool) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
    let status = match document.get_element_by_id("qkv_status") {
        Some(status) => status,
        None if is_error => {
            let Ok(status) = document.create_element("div") else { return };
            status.set_id("qkv_status");
            if let Some(body) = document.body() {
                let _ = body.append_child(&status);
            }
            status
        }
        None => return,
    };
    if message.is_empty() {
        status.remove();
        return;
    }
    status.set_text_content(Some(message));
    if is_error {
        let _ = status.set_attribute("class", "error");
    }
}

fn location() -> Option<web_sys::Location> {
    web_sys::window().map(|w| w.location())
}

/// The value of `key` in the page's query: `Some("")` for a bare flag (`?autotrain`).
fn query_value(key: &str) -> Option<String> {
    let search = location().and_then(|l| l.search().ok()).unwrap_or_default();
    search.trim_start_matches('?').split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (name == key).then(|| value.to_string())
    })
}

/// Whether CPU training goes to a Web Worker (`?worker=0` keeps it in the page).
fn trains_in_worker() -> bool {
    query_value("worker").as_deref() != Some("0")
}

/// `navigator[name]`, read where the page runs (a window or a worker alike).
fn navigator_field(name: &str) -> Result<JsValue, JsValue> {
    js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).and_then(|navigator| js_sys::Reflect::get(&navigator, &name.into()))
}

/// The most Web Workers that train on the CPU at once: each holds a copy of the data and its
/// runs, and lessons have up to four runs.
const MAX_TRAINING_WORKERS: usize = 4;

/// How many Web Workers train on the CPU: one per core the browser reports but one, since a
/// worker computes on one thread and the page needs one to draw (`?workers=N` sets it; at most
/// [`MAX_TRAINING_WORKERS`]). On the 2-core reference machine, whose page draws on an emulated
/// GPU, a second worker took the page's frames from 33 to 80–97 ms (docs/performance.md).
pub fn training_workers() -> usize {
    let asked = query_value("workers").and_then(|n| n.parse::<usize>().ok());
    let cores = || {
        navigator_field("hardwareConcurrency").ok().and_then(|cores| cores.as_f64()).map_or(1, |cores| (cores as usize).saturating_sub(1))
    };
    asked.unwrap_or_else(cores).clamp(1, MAX_TRAINING_WORKERS)
}

/// The compute the address asks for (`?compute=flex`, `?compute=webgpu`), as the start of its
/// label.
fn compute_asked_for() -> Option<&'static str> {
    match query_value("compute").as_deref() {
        Some("flex") => Some("flex"),
        Some("webgpu") => Some("wgpu"),
        _ => None,
    }
}

/// Whether the page will train on the CPU whatever happens: the browser has no WebGPU, the
/// address asks for the CPU, or an earlier visit's timing chose it.
fn trains_on_cpu_for_sure() -> bool {
    let has_webgpu = navigator_field("gpu").is_ok_and(|gpu| !gpu.is_undefined() && !gpu.is_null());
    let chosen_before = || remembered(COMPUTE_KEY).and_then(|json| Verdict::parse(&json)).is_some_and(|v| v.chosen == shell::FLEX_LABEL);
    !has_webgpu || compute_asked_for() == Some("flex") || (compute_asked_for().is_none() && chosen_before())
}

/// The setup in the address, if there is one (as JSON).
fn setup_in_address() -> Option<Result<String, String>> {
    let hash = location()?.hash().ok()?;
    let encoded = hash.strip_prefix(HASH_PREFIX)?;
    Some(js_sys::decode_uri_component(encoded).map(String::from).map_err(|_| "the link's setup is not valid URI encoding".to_string()))
}

/// How long the session task trains before it hands the page back: most of a 60 Hz frame, so
/// that the page still draws every frame. Short steps run back to back within it, since a yield
/// costs a timer tick (4 ms or more) and a frame, more than a step of a small model takes.
const SESSION_TURN: std::time::Duration = std::time::Duration::from_millis(12);

#[wasm_bindgen]
extern "C" {
    /// The global `setTimeout`, the page's and a worker's alike.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: i32) -> JsValue;
}

/// Resolves after `ms` milliseconds on the timer queue: the page draws and handles input
/// meanwhile (a resolved promise alone would not let it, microtasks run before rendering), a
/// worker reads its messages.
pub(crate) async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        set_timeout(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Runs the session task on the page's event loop, handing the page back after every turn.
pub(crate) fn run_in_page(mut task: SessionTask) {
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            match task.turn(SESSION_TURN).await {
                Turn::Worked => sleep(0).await,
                // Idle: look for commands a few times per frame.
                Turn::Idle => sleep(5).await,
                Turn::Closed => return,
            }
        }
    });
}

/// The browser: a session on the CPU trains in a Web Worker (src/worker.rs), one on WebGPU in
/// turns on the page's event loop (the device is the page's); files come from a picker or a drop
/// and leave as downloads.
struct Browser {
    /// Asked to repaint when a file has been read.
    ctx: egui::Context,
    /// The experiment step of the runs last kept in the browser's storage (for `qkvLab`).
    kept_step: Rc<Cell<Option<usize>>>,
    /// Whether runs are being written to storage now (a snapshot that comes meanwhile is
    /// skipped: the next one, 50 steps on, is kept).
    keeping: Rc<Cell<bool>>,
    /// Why the browser refused to keep the runs, until the page has told the user.
    keep_refused: Rc<RefCell<Option<String>>>,
}

impl Platform for Browser {
    fn spawn_session(&self, task: SessionTask) {
        // The CPU computes a step in the page's own thread: train in a worker so the page draws.
        if task.trains_on_cpu() && trains_in_worker() {
            crate::worker::relay(task);
        } else {
            run_in_page(task);
        }
    }

    fn default_folder(&self) -> Option<String> {
        None
    }

    fn save(&self, _folder: &str, files: &[OutgoingFile]) -> Result<String, FileError> {
        files.iter().try_for_each(download)?;
        Ok(format!("downloaded {}", qkv_ui::files::names(files)))
    }

    fn read_dropped(&self, file: egui::DroppedFileHandle, inbox: &Inbox) {
        let (inbox, ctx) = (inbox.clone(), self.ctx.clone());
        wasm_bindgen_futures::spawn_local(async move {
            let name = file.path().display().to_string();
            let read = file.bytes_async().await;
            inbox.deliver(read.map(|bytes| IncomingFile { name: name.clone(), bytes }).map_err(|reason| FileError::Read { name, reason }));
            ctx.request_repaint();
        });
    }

    fn keeps_runs(&self) -> bool {
        true
    }

    fn keep_runs(&self, runs: KeptRuns) {
        if self.keeping.replace(true) {
            return;
        }
        let (kept_step, keeping, refused) = (self.kept_step.clone(), self.keeping.clone(), self.keep_refused.clone());
        let ctx = self.ctx.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let step = runs.step;
            match kept_runs::store(runs).await {
                Ok(()) => kept_step.set(Some(step)),
                Err(e) => {
                    let why = format!("{e:?}");
                    web_sys::console::warn_1(&format!("QKV Lab could not keep the runs in this browser: {why}").into());
                    *refused.borrow_mut() = Some(why);
                    ctx.request_repaint();
                }
            }
            keeping.set(false);
        });
    }

    fn kept_runs(&self, inbox: &KeptInbox) {
        let (inbox, ctx) = (inbox.clone(), self.ctx.clone());
        wasm_bindgen_futures::spawn_local(async move {
            match kept_runs::read().await {
                Ok(Some(kept)) => {
                    inbox.deliver(kept);
                    ctx.request_repaint();
                }
                Ok(None) => {}
                Err(e) => web_sys::console::warn_1(&format!("QKV Lab could not read the runs kept in this browser: {e:?}").into()),
            }
        });
    }

    fn pick(&self, kind: FileKind, inbox: &Inbox) -> bool {
        pick(kind, inbox, &self.ctx);
        true
    }
}

/// The runs kept between visits, in the page's Cache Storage (binary bodies, promises, no
/// library needed; the service worker's files are in a cache of their own). Each snapshot's
/// checkpoints go under keys of their step, then an index names them, then older keys go: a
/// reload in the middle of a write finds the previous snapshot whole.
mod kept_runs {
    use super::*;
    use wasm_bindgen_futures::JsFuture;

    const CACHE: &str = "qkv-lab-kept-runs";
    const INDEX: &str = "/kept-runs/index.json";

    fn key(step: usize, run: usize) -> String {
        format!("/kept-runs/step-{step}/run-{run}")
    }

    async fn open() -> Result<web_sys::Cache, JsValue> {
        let caches = web_sys::window().ok_or("no window")?.caches()?;
        Ok(JsFuture::from(caches.open(CACHE)).await?.unchecked_into())
    }

    pub async fn store(runs: KeptRuns) -> Result<(), JsValue> {
        let cache = open().await?;
        let mut keep = vec![INDEX.to_string()];
        let mut names = Vec::new();
        // The checkpoints are ours to hand over: no copy of their megabytes.
        for (run, CheckpointFile { name, mut bytes }) in runs.files.into_iter().enumerate() {
            let body = web_sys::Response::new_with_opt_u8_array(Some(&mut bytes))?;
            JsFuture::from(cache.put_with_str(&key(runs.step, run), &body)).await?;
            keep.push(key(runs.step, run));
            names.push(name);
        }
        let index = serde_json::json!({ "step": runs.step, "names": names }).to_string();
        JsFuture::from(cache.put_with_str(INDEX, &web_sys::Response::new_with_opt_str(Some(&index))?)).await?;
        let stored: js_sys::Array = JsFuture::from(cache.keys()).await?.unchecked_into();
        for request in stored.iter() {
            let url = request.unchecked_into::<web_sys::Request>().url();
            if !keep.iter().any(|path| web_sys::Url::new(&url).is_ok_and(|u| &u.pathname() == path)) {
                JsFuture::from(cache.delete_with_str(&url)).await?;
            }
        }
        Ok(())
    }

    async fn body(cache: &web_sys::Cache, key: &str) -> Result<Option<web_sys::Response>, JsValue> {
        let found = JsFuture::from(cache.match_with_str(key)).await?;
        Ok((!found.is_undefined()).then(|| found.unchecked_into()))
    }

    pub async fn read() -> Result<Option<KeptRuns>, JsValue> {
        let cache = open().await?;
        let Some(index) = body(&cache, INDEX).await? else { return Ok(None) };
        let text = JsFuture::from(index.text()?).await?.as_string().unwrap_or_default();
        let index: serde_json::Value = serde_json::from_str(&text).map_err(|e| JsValue::from_str(&e.to_string()))?;
        let (Some(step), Some(names)) = (index["step"].as_u64(), index["names"].as_array()) else { return Ok(None) };
        let step = step as usize;
        let mut files = Vec::new();
        for (run, name) in names.iter().enumerate() {
            let Some(found) = body(&cache, &key(step, run)).await? else { return Ok(None) };
            let buffer = JsFuture::from(found.array_buffer()?).await?;
            files.push(CheckpointFile {
                name: name.as_str().unwrap_or_default().to_string(),
                bytes: js_sys::Uint8Array::new(&buffer).to_vec(),
            });
        }
        Ok(Some(KeptRuns { step, files }))
    }
}

/// Opens the browser's file picker; the file is read asynchronously into `inbox`.
fn pick(kind: FileKind, inbox: &Inbox, ctx: &egui::Context) {
    let dialog = rfd::AsyncFileDialog::new().add_filter(kind.description(), kind.extensions());
    let (inbox, ctx) = (inbox.clone(), ctx.clone());
    wasm_bindgen_futures::spawn_local(async move {
        let Some(picked) = dialog.pick_file().await else { return };
        // Read here rather than with rfd's `read`, which cannot say that reading failed.
        let file = picked.inner();
        let name = file.name();
        let read = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await;
        inbox.deliver(
            read.map(|buffer| IncomingFile { name: name.clone(), bytes: js_sys::Uint8Array::new(&buffer).to_vec() })
                .map_err(|e| FileError::Read { name, reason: format!("{e:?}") }),
        );
        ctx.request_repaint();
    });
}

/// Hands a file to the browser as a download.
fn download(file: &OutgoingFile) -> Result<(), FileError> {
    let name = &file.name;
    let fail = |e: JsValue| FileError::Download { name: name.clone(), reason: format!("{e:?}") };
    let document = web_sys::window().and_then(|w| w.document()).ok_or_else(|| fail("the page has no document".into()))?;
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(file.bytes.as_slice()));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(file.mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(fail)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(fail)?;
    let anchor: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(fail)?.dyn_into().map_err(|_| fail("the page refused a link".into()))?;
    anchor.set_href(&url);
    anchor.set_download(name);
    anchor.click();
    web_sys::Url::revoke_object_url(&url).map_err(fail)?;
    Ok(())
}

struct WebShell {
    playground: Playground,
    autotrain: bool,
    /// The setup last written to the address.
    in_address: Option<Setup>,
    /// The setup last kept in local storage.
    remembered: Option<Setup>,
    /// The compute's verdict last kept in local storage.
    remembered_choice: Option<Verdict>,
    /// Seconds of the page's thread the repaints took while training, and how many repaints.
    repaint_cpu: (f64, u32),
    /// Whether every row of the maps of this attention version sums to 1 (checked once per
    /// version, not every frame).
    attention_rows_checked: Option<(u64, bool)>,
    /// Runs that page scripts asked to export, taken on the next frame.
    export_requests: Rc<RefCell<Vec<usize>>>,
    /// `qkvLab.exportRun`, kept alive as long as the shell.
    export_run: Closure<dyn Fn(f64)>,
    /// The step of the runs last kept in the browser's storage.
    kept_step: Rc<Cell<Option<usize>>>,
    /// Why the browser refused to keep the runs; told once a visit (every later snapshot would
    /// say the same).
    keep_refused: Rc<RefCell<Option<String>>>,
    keep_refusal_told: bool,
    /// Set by `qkvLab.continueKept()`, taken on the next frame.
    continue_requested: Rc<Cell<bool>>,
    continue_kept: Closure<dyn Fn()>,
}

impl WebShell {
    /// `own_gpu`: a WebGPU device for training when the page draws with WebGL.
    fn new(cc: &eframe::CreationContext<'_>, own_gpu: Option<Compute>) -> Self {
        let (mut computes, mut no_gpu) = shell::computes(cc, shell::SoftwareGpu::Prefer);
        if let Some(gpu) = own_gpu.filter(|_| computes.len() == 1) {
            computes.insert(0, gpu);
            no_gpu = None;
        }
        let asked = compute_asked_for();
        if let Some(asked) = asked {
            computes.sort_by_key(|c| !c.label.starts_with(asked));
        }
        let forced_cpu = asked == Some("flex");
        let from_address = setup_in_address();
        let saved = match &from_address {
            Some(Ok(json)) => Some(json.clone()),
            _ => remembered(SETUP_KEY),
        };
        let kept_step = Rc::new(Cell::new(None));
        let keep_refused = Rc::new(RefCell::new(None));
        let browser = Browser {
            ctx: cc.egui_ctx.clone(),
            kept_step: kept_step.clone(),
            keeping: Rc::new(Cell::new(false)),
            keep_refused: keep_refused.clone(),
        };
        let offer = ComputeOffer { computes, pinned: asked.is_some(), remembered: remembered(COMPUTE_KEY) };
        let mut playground = Playground::new(&cc.egui_ctx, Box::new(browser), offer, saved.as_deref());
        if let Some(Err(e)) = from_address {
            playground.tell(format!("{e}; starting from your last setup"), true);
        }
        if let Some(why) = no_gpu.filter(|_| !forced_cpu) {
            playground.tell(format!("{why}: training runs on the CPU, slower. Chrome, Edge and Safari 26+ have WebGPU."), true);
        }
        show_status("", false);
        let export_requests = Rc::new(RefCell::new(Vec::new()));
        let export_run = {
            let (requests, ctx) = (export_requests.clone(), cc.egui_ctx.clone());
            Closure::<dyn Fn(f64)>::new(move |run: f64| {
                requests.borrow_mut().push(run as usize);
                ctx.request_repaint();
            })
        };
        let continue_requested = Rc::new(Cell::new(false));
        let continue_kept = {
            let (requested, ctx) = (continue_requested.clone(), cc.egui_ctx.clone());
            Closure::<dyn Fn()>::new(move || {
                requested.set(true);
                ctx.request_repaint();
            })
        };
        Self {
            playground,
            autotrain: query_value("autotrain").is_some(),
            in_address: None,
            remembered: None,
            remembered_choice: None,
            repaint_cpu: (0.0, 0),
            attention_rows_checked: None,
            export_requests,
            export_run,
            kept_step,
            keep_refused,
            keep_refusal_told: false,
            continue_requested,
            continue_kept,
        }
    }

    /// Keeps the setup being edited in local storage whenever it changes, so that a bare visit
    /// starts from it.
    fn remember_setup(&mut self) {
        // Compared as a value every frame; written as JSON only when it changed.
        if self.remembered.as_ref() != Some(self.playground.setup()) {
            // A storage that refuses (full, or a private window) is not asked again until the
            // setup changes: the address still carries it.
            if let Some(storage) = local_storage() {
                let _ = storage.set_item(SETUP_KEY, &self.playground.saved_setup());
            }
            self.remembered = Some(self.playground.setup().clone());
        }
        if self.remembered_choice.as_ref() != self.playground.compute_choice() {
            if let (Some(storage), Some(json)) = (local_storage(), self.playground.saved_compute_choice()) {
                let _ = storage.set_item(COMPUTE_KEY, &json);
            }
            self.remembered_choice = self.playground.compute_choice().cloned();
        }
    }

    /// Writes the applied setup into the address (without a new history entry), so that copying
    /// the address shares the demo.
    fn update_address(&mut self) {
        let Some(applied) = self.playground.applied_setup().cloned() else { return };
        if self.in_address.as_ref() == Some(&applied) {
            return;
        }
        let Ok(json) = serde_json::to_string(&applied) else { return };
        let hash = format!("{HASH_PREFIX}{}", String::from(js_sys::encode_uri_component(&json)));
        if let Some(window) = web_sys::window() {
            if let Ok(history) = window.history() {
                let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&hash));
            }
            let location = window.location();
            if let (Ok(origin), Ok(path), Ok(search)) = (location.origin(), location.pathname(), location.search()) {
                self.playground.set_share_link(format!("{origin}{path}{search}{hash}"));
            }
        }
        self.in_address = Some(applied);
    }

    /// How many of each run's first training losses `window.qkvLab` carries.
    const EARLY_LOSSES: usize = 64;

    /// `window.qkvLab`: what scripts (and the end-to-end test) can read without parsing pixels.
    fn publish_state(&mut self) {
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
        set(&state, "backend", view.backend.clone().into());
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
        if let Some(maps) = &view.attention {
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

impl eframe::App for WebShell {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        // eframe's measure of the previous repaint on this thread: building, laying out and
        // tessellating the UI and handing it to the GPU.
        if let Some(secs) = frame.info().cpu_usage.map(f64::from) {
            self.playground.record_repaint(secs);
            if self.playground.view().playing {
                self.repaint_cpu.0 += secs;
                self.repaint_cpu.1 += 1;
            }
        }
        if std::mem::take(&mut self.autotrain) {
            self.playground.train();
        }
        let requested: Vec<usize> = self.export_requests.borrow_mut().drain(..).collect();
        for run in requested {
            self.playground.export(run);
        }
        if self.continue_requested.take() {
            self.playground.continue_kept();
        }
        if let Some(why) = self.keep_refused.borrow_mut().take().filter(|_| !self.keep_refusal_told) {
            self.keep_refusal_told = true;
            self.playground.tell(
                format!(
                    "This browser did not keep the runs ({why}), so a reload starts them over. Browsers refuse to store \
                     when the disk is nearly full: free some space, or export the runs you want to keep."
                ),
                true,
            );
        }
        self.playground.ui(ui);
        self.update_address();
        self.remember_setup();
        self.publish_state();
    }
}

/// The browser's local storage, where the page keeps the setup between visits (the address
/// carries it in a link; this is for the bare address). Private windows may refuse it.
fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// What the page kept under `key` on an earlier visit (the setup, the compute's verdict: JSON).
fn remembered(key: &str) -> Option<String> {
    local_storage()?.get_item(key).ok()?
}

pub fn start() {
    // A browser build cannot unwind: a panic stops the app for good. Say so on the page (and in
    // the console) instead of leaving a frozen picture.
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("QKV Lab: {info}").into());
        show_status(
            &format!("QKV Lab stopped on an internal error ({info}). Reload the page to start again: your setup is kept in its address."),
            true,
        );
    }));
    if trains_in_worker() && trains_on_cpu_for_sure() {
        crate::worker::start_early();
    }
    wasm_bindgen_futures::spawn_local(async {
        let canvas = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.get_element_by_id("qkv_canvas"))
            .and_then(|e| e.dyn_into::<web_sys::HtmlCanvasElement>().ok());
        let Some(canvas) = canvas else {
            show_status("QKV Lab cannot start: the page has no canvas with id qkv_canvas.", true);
            return;
        };
        let mut options = eframe::WebOptions { wgpu_options: shell::shared_device_options(), ..Default::default() };
        let mut own_gpu = None;
        if query_value("render").as_deref() == Some("webgl") {
            if let eframe::egui_wgpu::WgpuSetup::CreateNew(create) = &mut options.wgpu_options.wgpu_setup {
                create.instance_descriptor.backends = eframe::wgpu::Backends::GL;
            }
            own_gpu = match Device::wgpu_options().init_async().await {
                Ok(device) => Some(Compute { label: "wgpu: WebGPU (own device; the page draws with WebGL)".into(), device }),
                Err(e) => {
                    web_sys::console::warn_1(&format!("QKV Lab: no WebGPU device to train on ({e}); training on the CPU").into());
                    None
                }
            };
        }
        let started = eframe::WebRunner::new().start(canvas, options, Box::new(move |cc| Ok(Box::new(WebShell::new(cc, own_gpu))))).await;
        if let Err(e) = started {
            let reason = e.as_string().unwrap_or_else(|| format!("{e:?}"));
            show_status(&format!("QKV Lab cannot start in this browser: {reason}. Try a current Chrome, Edge, Firefox or Safari."), true);
        }
    });
}
