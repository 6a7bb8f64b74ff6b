//! The wire format between the page and its training workers, both ways: any bytes are refused
//! or read (never a panic), and what is read encodes into bytes of this version that read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qkv_session::wire;

fuzz_target!(|data: &[u8]| {
    if let Ok(command) = wire::decode_command(data) {
        let bytes = wire::encode_command(command).expect("a decoded command encodes");
        assert!(wire::decode_command(&bytes).is_ok(), "a command of this version reads back");
    }
    if let Ok(messages) = wire::decode_messages(data) {
        let bytes = wire::encode_messages(&messages).expect("decoded messages encode");
        assert!(wire::decode_messages(&bytes).is_ok(), "messages of this version read back");
    }
});
