//! Any bytes as an LDAP stream through the lab directory's proxy, split anywhere: never a
//! panic, every message taken whole as its header says, and never more than one message
//! (at most `MAX_MESSAGE`) plus one read buffered — past that the stream is opaque.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::ldap::frame::{self, MAX_MESSAGE, Next};

fuzz_target!(|input: &[u8]| {
    let Some((&split, rest)) = input.split_first() else { return };
    let mut buf = Vec::new();
    let mut taken = 0;
    'feed: for chunk in rest.chunks(usize::from(split).max(1)) {
        buf.extend_from_slice(chunk);
        loop {
            match frame::next(&mut buf) {
                Next::Message(m) => {
                    assert!(m.len() >= 2 && m.len() <= MAX_MESSAGE);
                    taken += m.len();
                    let _ = frame::operation(&m);
                }
                Next::Need => break,
                Next::Opaque => break 'feed,
            }
        }
        assert!(buf.len() <= MAX_MESSAGE + chunk.len());
    }
    assert!(taken + buf.len() <= rest.len());
});
