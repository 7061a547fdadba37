//! Any bytes, split anywhere, into the sink's server session: it must never panic and its
//! memory must stay bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::smtp::proto::server::{
    Command, Decision, Envelope, Handler, Out, ServerConfig, ServerSession,
};

struct Accept;

impl Handler for Accept {
    fn decide(&mut self, _: Command, _: &Envelope, _: &str) -> Decision {
        Decision::ACCEPT
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&split, rest)) = input.split_first() else { return };
    let cfg = ServerConfig {
        hostname: "fuzz".into(),
        lmtp: split & 1 == 1,
        max_message_size: 4096,
        pipelining: true,
        eight_bit_mime: true,
        enhanced_status_codes: true,
        starttls: split & 2 == 2,
        auth: true,
        chunking: true,
        smtputf8: true,
        dsn: true,
    };
    let mut h = Accept;
    let mut s = ServerSession::new(cfg, false, &mut h);
    let mut out = Vec::new();
    for chunk in rest.chunks(usize::from(split).max(1)) {
        let mut at = 0;
        loop {
            at += s.feed(&chunk[at..], &mut h);
            let Some(m) = s.received() else { break };
            assert!(m.data.len() <= 4096, "message beyond the size limit kept in memory");
            s.finish(&[Decision::ACCEPT]);
        }
        assert_eq!(at, chunk.len(), "all input consumed once no message waits");
        s.take_output(&mut out);
        if out.iter().any(|o| matches!(o, Out::StartTls)) {
            s.tls_established();
        }
        out.clear();
    }
});
