//! A Hugging Face tokenizer.json given with `--tokenizer`, then used to encode and decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_train::tokenizer::Tokenizer;

fuzz_target!(|data: &[u8]| {
    if let Ok(tokenizer) = Tokenizer::from_json("fuzz/tokenizer.json", data)
        && let Ok(ids) = tokenizer.encode("To be, or not to be")
    {
        let _ = tokenizer.decode(&ids);
    }
});
