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
//! starts training as soon as the page is up (a classroom link, the end-to-end test); `?lesson=N`
//! opens lesson N (from 1) and `?present` presentation mode, so `?lesson=1&present&autotrain` is
//! a demo a class opens from one link;
//! `?render=webgl` draws with WebGL and trains on a WebGPU device of its own, for browsers whose
//! WebGPU computes but cannot draw to a canvas (headless Chromium without a GPU); `?worker=0`
//! trains on the CPU inside the page instead of in a Web Worker (to compare the two);
//! `?hide=setup,compute` hides controls a class has not met yet ([`qkv_ui::hidden`]).

mod address;
mod capabilities;
mod platform;
mod state;
mod storage;
mod turns;
pub(crate) mod worker;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use eframe::egui;
use qkv_compute::{Backend, ComputeId};
use qkv_model::burn::tensor::Device;
use qkv_session::RunId;
use qkv_ui::setup_panel::Setup;
use qkv_ui::{Compute, ComputeOffer, Playground, Verdict};
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use wasm_bindgen::closure::Closure;

use crate::shell::{self, COMPUTE_KEY, SETUP_KEY};
use address::{HASH_PREFIX, compute_asked_for, query_value, setup_in_address, trains_in_worker};
use capabilities::trains_on_cpu_for_sure;
use platform::Browser;
use storage::{local_storage, remembered};

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
    export_requests: Rc<RefCell<Vec<RunId>>>,
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
            computes.sort_by_key(|c| c.backend() != asked);
        }
        let forced_cpu = asked == Some(Backend::Flex);
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
        match query_value("lesson").map(|n| shell::lesson_index(&n)) {
            Some(Ok(lesson)) => playground.load_lesson(lesson),
            Some(Err(e)) => playground.tell(format!("the link's ?lesson= {e}"), true),
            None => {}
        }
        if query_value("present").is_some() {
            playground.set_look(qkv_ui::presentation::Look { presenting: true, ..playground.look() });
        }
        // A comma may arrive encoded (%2C) from a link that was copied through another page.
        match query_value("hide").map(|list| qkv_ui::hidden::Hidden::parse(&list.replace("%2C", ","))) {
            Some(Ok(hidden)) => playground.hide(hidden),
            Some(Err(e)) => playground.tell(format!("the link's {e}"), true),
            None => {}
        }
        if let Some(why) = no_gpu.filter(|_| !forced_cpu) {
            playground.tell(format!("{why}: training runs on the CPU, slower. Chrome, Edge and Safari 26+ have WebGPU."), true);
        }
        show_status("", false);
        let export_requests = Rc::new(RefCell::new(Vec::new()));
        let export_run = {
            let (requests, ctx) = (export_requests.clone(), cc.egui_ctx.clone());
            Closure::<dyn Fn(f64)>::new(move |run: f64| {
                requests.borrow_mut().push(RunId(run as usize));
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
        let requested: Vec<RunId> = self.export_requests.borrow_mut().drain(..).collect();
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
        worker::start_early();
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
                Ok(device) => Some(Compute::on(ComputeId::on(Backend::Wgpu, "WebGPU (own device; the page draws with WebGL)"), device)),
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
