//! The page's address: the query's options (`?compute=`, `?worker=0`, `?autotrain`, …) and the
//! setup a link carries (`#setup=`).

use qkv_compute::Backend;

/// The address part that carries the setup: `#setup=<URI-encoded JSON>`.
pub(super) const HASH_PREFIX: &str = "#setup=";

fn location() -> Option<web_sys::Location> {
    web_sys::window().map(|w| w.location())
}

/// The value of `key` in the page's query: `Some("")` for a bare flag (`?autotrain`).
pub(super) fn query_value(key: &str) -> Option<String> {
    let search = location().and_then(|l| l.search().ok()).unwrap_or_default();
    search.trim_start_matches('?').split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (name == key).then(|| value.to_string())
    })
}

/// Whether CPU training goes to a Web Worker (`?worker=0` keeps it in the page).
pub(super) fn trains_in_worker() -> bool {
    query_value("worker").as_deref() != Some("0")
}

/// The backend the address asks for: `?compute=flex` (the CPU) or `?compute=webgpu`, by the
/// backends' one table of names (`Backend::from_name`); the page has no other.
pub(super) fn compute_asked_for() -> Option<Backend> {
    query_value("compute").and_then(|name| Backend::from_name(&name)).filter(|b| matches!(b, Backend::Flex | Backend::Wgpu))
}

/// The setup in the address, if there is one (as JSON).
pub(super) fn setup_in_address() -> Option<Result<String, String>> {
    let hash = location()?.hash().ok()?;
    let encoded = hash.strip_prefix(HASH_PREFIX)?;
    Some(js_sys::decode_uri_component(encoded).map(String::from).map_err(|_| "the link's setup is not valid URI encoding".to_string()))
}
