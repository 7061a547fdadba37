//! Any bytes as a DNS query, over UDP and TCP, against synthetic zones with fault rules:
//! never a panic; a reply is never a query, always echoes the id, and over UDP fits the
//! largest payload the server sends.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mailbench_wire::dns::answer::{MAX_UDP, Responder, Transport};
use mailbench_wire::dns::faults::parse_rule;
use mailbench_wire::dns::spec::{Synthetic, expand_domains};

fn responder() -> &'static Responder {
    static R: OnceLock<Responder> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = Responder::default();
        let zones = Synthetic {
            domains: expand_domains("d{0..20}.example.test").expect("spec"),
            mx_per_domain: 2,
            addresses: vec!["127.0.2.1".parse().expect("ip"), "::1".parse().expect("ip")],
            dkim: Some(("sel".into(), format!("v=DKIM1; k=rsa; p={}", "A".repeat(400)))),
            ttl: 60,
            no_mx: false,
        };
        zones.build(&mut r.authority).expect("zones");
        r.faults.rules = ["a:servfail:20%", "txt:truncate:50%", "mx@d1*:nxdomain"]
            .iter()
            .map(|s| parse_rule("--rule", s).expect("rule"))
            .collect();
        r
    })
}

fuzz_target!(|input: &[u8]| {
    let mut rng = fastrand::Rng::with_seed(input.len() as u64);
    for t in [Transport::Udp, Transport::Tcp] {
        let a = responder().respond(input, t, Duration::ZERO, &mut rng);
        if let Some(reply) = &a.reply {
            assert!(reply.len() >= 12 && reply[2] & 0x80 != 0, "a reply is a response");
            assert_eq!(reply[..2], input[..2], "the id is echoed");
            if t == Transport::Udp {
                assert!(reply.len() <= usize::from(MAX_UDP));
            }
        }
    }
});
