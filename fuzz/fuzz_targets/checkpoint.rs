//! A checkpoint file: as it comes (mostly refused by its checksum), and assembled around three
//! fuzzed sections with a valid checksum, so that the header and weights are parsed and loaded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_model::burn::tensor::Device;
use qkv_train::checkpoint::{self, Checkpoint};

fuzz_target!(|data: &[u8]| {
    let _ = Checkpoint::from_bytes("fuzz.qkv", data);
    // The first two bytes split the rest into header, weights and optimiser state.
    let [a, b, rest @ ..] = data else { return };
    let (header, rest) = rest.split_at((*a as usize * 8).min(rest.len()));
    let (weights, optimiser) = rest.split_at((*b as usize * 64).min(rest.len()));
    let file = checkpoint::assemble(header, weights, optimiser);
    if let Ok(checkpoint) = Checkpoint::from_bytes("fuzz.qkv", &file) {
        let _ = checkpoint.into_model(&Device::flex());
    }
});
