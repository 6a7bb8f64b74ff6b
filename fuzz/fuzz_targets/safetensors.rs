//! A safetensors file given to `qkv import` (GPT-2's layout), with and without a config.json.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_model::burn::tensor::Device;

fuzz_target!(|data: &[u8]| {
    let _ = qkv_train::pytorch::from_safetensors(data, "fuzz.safetensors", None, &Device::flex());
    // The tail after a NUL as the config.json beside it.
    if let Some(at) = data.iter().position(|&b| b == 0)
        && let Ok(config) = std::str::from_utf8(&data[at + 1..])
    {
        let _ = qkv_train::pytorch::from_safetensors(&data[..at], "fuzz.safetensors", Some(config), &Device::flex());
    }
});
