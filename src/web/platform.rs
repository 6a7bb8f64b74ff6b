//! The browser as the playground's platform: a session on the CPU trains in Web Workers
//! ([`super::worker`]), one on WebGPU in turns on the page's event loop; files come from a picker
//! or a drop and leave as downloads; runs are kept in the browser's storage.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use eframe::egui;
use qkv_session::SessionTask;
use qkv_ui::Platform;
use qkv_ui::files::{FileError, FileKind, Inbox, IncomingFile, KeptInbox, KeptRuns, OutgoingFile};
use wasm_bindgen::{JsCast, JsValue};

use super::address::trains_in_worker;
use super::storage::kept_runs;
use super::turns::run_in_page;

/// The browser: a session on the CPU trains in a Web Worker (src/web/worker.rs), one on WebGPU in
/// turns on the page's event loop (the device is the page's); files come from a picker or a drop
/// and leave as downloads.
pub(super) struct Browser {
    /// Asked to repaint when a file has been read.
    pub(super) ctx: egui::Context,
    /// The experiment step of the runs last kept in the browser's storage (for `qkvLab`).
    pub(super) kept_step: Rc<Cell<Option<usize>>>,
    /// Whether runs are being written to storage now (a snapshot that comes meanwhile is
    /// skipped: the next one, 50 steps on, is kept).
    pub(super) keeping: Rc<Cell<bool>>,
    /// Why the browser refused to keep the runs, until the page has told the user.
    pub(super) keep_refused: Rc<RefCell<Option<String>>>,
}

impl Platform for Browser {
    fn spawn_session(&self, task: SessionTask) {
        // The CPU computes a step in the page's own thread: train in a worker so the page draws.
        if task.trains_on_cpu() && trains_in_worker() {
            super::worker::relay(task);
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
            inbox.deliver(
                read.map(|bytes| IncomingFile { name: name.clone(), bytes })
                    .map_err(|reason| FileError::Read { name, source: FileError::browser(reason) }),
            );
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
                .map_err(|e| FileError::Read { name, source: FileError::browser(format!("{e:?}")) }),
        );
        ctx.request_repaint();
    });
}

/// Hands a file to the browser as a download.
fn download(file: &OutgoingFile) -> Result<(), FileError> {
    let name = &file.name;
    let fail = |e: JsValue| FileError::Download { name: name.clone(), source: FileError::browser(format!("{e:?}")) };
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
