//! The setup a `#setup=` link carries (the page decodes the URI escapes with the browser's own
//! decodeURIComponent, then hands the JSON here): parsed as the playground parses it, and its
//! plan checked against the embedded text as Train would check it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use qkv_train::{DataSource, Dataset, TokenizerKind};
use qkv_ui::setup_panel::Setup;

fn dataset() -> &'static Dataset {
    static DATASET: OnceLock<Dataset> = OnceLock::new();
    DATASET.get_or_init(|| Dataset::load(&DataSource::Shakespeare, &TokenizerKind::Char, 0).expect("the embedded text loads"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(setup) = serde_json::from_str::<Setup>(text) {
        let _ = setup.plan.specs(dataset());
    }
});
