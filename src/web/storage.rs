//! What the page keeps between visits: the setup and the compute's verdict in local storage
//! (small JSON), the runs' checkpoints in Cache Storage.

/// The browser's local storage, where the page keeps the setup between visits (the address
/// carries it in a link; this is for the bare address). Private windows may refuse it.
pub(super) fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// What the page kept under `key` on an earlier visit (the setup, the compute's verdict: JSON).
pub(super) fn remembered(key: &str) -> Option<String> {
    local_storage()?.get_item(key).ok()?
}

/// The runs kept between visits, in the page's Cache Storage (binary bodies, promises, no
/// library needed; the service worker's files are in a cache of their own). Each snapshot's
/// checkpoints go under keys of their step, then an index names them, then older keys go: a
/// reload in the middle of a write finds the previous snapshot whole.
pub(super) mod kept_runs {
    use qkv_session::CheckpointFile;
    use qkv_ui::files::KeptRuns;
    use wasm_bindgen::{JsCast, JsValue};
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
