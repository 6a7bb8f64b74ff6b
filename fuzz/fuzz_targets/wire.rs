//! The wire format between the page and its training workers, both ways.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_session::wire;

fuzz_target!(|data: &[u8]| {
    if let Ok(command) = wire::decode_command(data) {
        let _ = wire::encode_command(command);
    }
    if let Ok(messages) = wire::decode_messages(data) {
        let _ = wire::encode_messages(&messages);
    }
});
