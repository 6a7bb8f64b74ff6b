//! What this browser offers: its cores (how many Web Workers train), WebGPU, and so whether the
//! page will train on the CPU whatever happens.

use qkv_compute::Backend;
use qkv_ui::Verdict;
use wasm_bindgen::JsValue;

use super::address::{compute_asked_for, query_value};
use super::storage::remembered;
use crate::shell::COMPUTE_KEY;

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
/// GPU, a second worker took the page's frames from 33 to 80–97 ms (docs/performance.md, "The
/// browser build").
pub(super) fn training_workers() -> usize {
    let asked = query_value("workers").and_then(|n| n.parse::<usize>().ok());
    let cores = || {
        navigator_field("hardwareConcurrency").ok().and_then(|cores| cores.as_f64()).map_or(1, |cores| (cores as usize).saturating_sub(1))
    };
    asked.unwrap_or_else(cores).clamp(1, MAX_TRAINING_WORKERS)
}

/// Whether the page will train on the CPU whatever happens: the browser has no WebGPU, the
/// address asks for the CPU, or an earlier visit's timing chose it.
pub(super) fn trains_on_cpu_for_sure() -> bool {
    let has_webgpu = navigator_field("gpu").is_ok_and(|gpu| !gpu.is_undefined() && !gpu.is_null());
    let chosen_before =
        || remembered(COMPUTE_KEY).and_then(|json| Verdict::parse(&json).ok()).is_some_and(|v| v.chosen.backend == Backend::Flex);
    !has_webgpu || compute_asked_for() == Some(Backend::Flex) || (compute_asked_for().is_none() && chosen_before())
}
