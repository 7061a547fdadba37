//! Any bytes into the client's reply decoder, split anywhere: never a panic, and every
//! decoded reply has a code in 200..600.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::smtp::proto::{Decoded, ReplyDecoder};

fuzz_target!(|input: &[u8]| {
    let Some((&split, rest)) = input.split_first() else { return };
    let mut dec = ReplyDecoder::default();
    for chunk in rest.chunks(usize::from(split).max(1)) {
        let mut buf = chunk;
        while !buf.is_empty() {
            match dec.decode(buf) {
                Ok(Decoded::Done(r, used)) => {
                    assert!((200..600).contains(&r.code));
                    assert!(used > 0 && used <= buf.len());
                    buf = &buf[used..];
                }
                Ok(Decoded::NeedMore) => break,
                Err(_) => break,
            }
        }
    }
});
