//! What the command line and config files parse: a model config (JSON), an experiment plan
//! (JSON), and the names of presets, variants, data sources and tokenizers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_model::{AttentionVariant, ModelConfig, Preset};
use qkv_train::{DataSource, ExperimentPlan, TokenizerKind};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = ModelConfig::from_json(text) {
        let _ = qkv_model::accounting::ParamReport::new(&config);
    }
    let _ = serde_json::from_str::<ExperimentPlan>(text);
    let _ = text.parse::<Preset>();
    let _ = text.parse::<AttentionVariant>();
    let _ = text.parse::<DataSource>();
    let _ = text.parse::<TokenizerKind>();
});
