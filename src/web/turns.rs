//! Running on the browser's event loop: a session in turns on the page's thread, and a sleep that
//! lets the page draw (or a worker read its messages) meanwhile.

use qkv_session::{SessionTask, Turn};
use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::wasm_bindgen;

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
pub(super) async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        set_timeout(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Runs the session task on the page's event loop, handing the page back after every turn.
pub(super) fn run_in_page(mut task: SessionTask) {
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
