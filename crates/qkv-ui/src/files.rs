//! Files in and out of the app: what the user drops on the window or picks, and what the app hands
//! back. On the desktop that is the file system; in the browser a file picker and downloads.

/// A file the user gave the app, read into memory.
#[derive(Debug, Clone)]
pub struct IncomingFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

impl IncomingFile {
    /// Saved runs end in `.qkv`; anything else is taken as text to train on.
    pub fn is_checkpoint(&self) -> bool {
        self.name.ends_with(".qkv")
    }
}

/// Files on their way in: dropped on the window or picked in the browser's dialog. The browser
/// reads files asynchronously, so they arrive here a little later; [`Inbox::take`] collects them.
#[derive(Default, Clone)]
pub struct Inbox {
    arrived: std::rc::Rc<std::cell::RefCell<Vec<Result<IncomingFile, String>>>>,
}

impl Inbox {
    pub fn take(&self) -> Vec<Result<IncomingFile, String>> {
        std::mem::take(&mut self.arrived.borrow_mut())
    }

    /// Starts reading the files dropped on the window this frame.
    pub fn collect_dropped(&self, ctx: &egui::Context) {
        for file in ctx.input(|i| i.raw.dropped_files.clone()) {
            let name = file.path().display().to_string();
            #[cfg(not(target_family = "wasm"))]
            self.arrived
                .borrow_mut()
                .push(file.bytes().map(|bytes| IncomingFile { name: name.clone(), bytes }).map_err(|e| format!("cannot read {name}: {e}")));
            #[cfg(target_family = "wasm")]
            {
                let arrived = self.arrived.clone();
                let ctx = ctx.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    let read = file.bytes_async().await;
                    arrived
                        .borrow_mut()
                        .push(read.map(|bytes| IncomingFile { name: name.clone(), bytes }).map_err(|e| format!("cannot read {name}: {e}")));
                    ctx.request_repaint();
                });
            }
        }
    }

    /// Opens the browser's file dialog for files ending in `accept` (e.g. ".qkv").
    #[cfg(target_family = "wasm")]
    pub fn pick(&self, accept: &str, ctx: &egui::Context) -> Result<(), String> {
        web::pick(self.arrived.clone(), accept, ctx)
    }
}

#[cfg(target_family = "wasm")]
pub use web::download;

#[cfg(target_family = "wasm")]
mod web {
    use std::cell::RefCell;
    use std::rc::Rc;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::Closure;

    use super::IncomingFile;

    pub(super) fn pick(arrived: Rc<RefCell<Vec<Result<IncomingFile, String>>>>, accept: &str, ctx: &egui::Context) -> Result<(), String> {
        let document = web_sys::window().and_then(|w| w.document()).ok_or("no document to open a file dialog in")?;
        let input: web_sys::HtmlInputElement =
            document.create_element("input").map_err(|e| format!("{e:?}"))?.dyn_into().map_err(|_| "the page refused a file input")?;
        input.set_type("file");
        input.set_accept(accept);
        let ctx = ctx.clone();
        let source = input.clone();
        let on_change = Closure::<dyn FnMut()>::new(move || {
            let Some(file) = source.files().and_then(|files| files.get(0)) else { return };
            let arrived = arrived.clone();
            let ctx = ctx.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let name = file.name();
                let read = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await;
                arrived.borrow_mut().push(
                    read.map(|buffer| IncomingFile { name: name.clone(), bytes: js_sys::Uint8Array::new(&buffer).to_vec() })
                        .map_err(|e| format!("cannot read {name}: {e:?}")),
                );
                ctx.request_repaint();
            });
        });
        input.set_onchange(Some(on_change.as_ref().unchecked_ref()));
        // The input may call back at any later time: the closure lives as long as the page.
        on_change.forget();
        input.click();
        Ok(())
    }

    /// Hands `bytes` to the browser as a download named `name`.
    pub fn download(name: &str, bytes: &[u8], mime: &str) -> Result<(), String> {
        let fail = |e: wasm_bindgen::JsValue| format!("could not download {name}: {e:?}");
        let document = web_sys::window().and_then(|w| w.document()).ok_or("no document to download from")?;
        let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
        let options = web_sys::BlobPropertyBag::new();
        options.set_type(mime);
        let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(fail)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(fail)?;
        let anchor: web_sys::HtmlAnchorElement =
            document.create_element("a").map_err(fail)?.dyn_into().map_err(|_| format!("could not download {name}"))?;
        anchor.set_href(&url);
        anchor.set_download(name);
        anchor.click();
        web_sys::Url::revoke_object_url(&url).map_err(fail)?;
        Ok(())
    }
}
