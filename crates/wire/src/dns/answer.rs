//! One packet in, one answer out, without sockets: parse the query (hickory-proto), apply
//! the fault rules, look the question up in the authority (RFC 1034 §4.3.2, `zone`), and
//! encode the reply (with the EDNS OPT and its DO bit echoed, BADVERS for an EDNS version
//! above 0, additional records left out and then the TC bit set when a UDP reply does not
//! fit). What happened is returned for the counters; nothing here blocks or
//! panics on any input (fuzzed in `fuzz/fuzz_targets/dns_packet.rs`).

use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

use super::faults::{Action, Decision, Faults, QClass};
use super::zone::{Authority, key};

/// Largest UDP reply sent, whatever a query's EDNS offers (the DNS flag day's figure).
pub const MAX_UDP: u16 = 1232;

/// How the query came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A datagram: replies are cut to what the client accepts.
    Udp,
    /// A TCP stream: replies up to 64 KiB, never truncated.
    Tcp,
}

/// What became of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A reply was made (whatever its code).
    Answered,
    /// A rule dropped it: no reply.
    Dropped,
    /// Not a query at all (too short, a response, garbage): no reply.
    Ignored,
}

/// The reply to one packet and what the counters need to know of it.
#[derive(Debug)]
pub struct Answer {
    /// The bytes to send, if any.
    pub reply: Option<Vec<u8>>,
    /// Wait this long first.
    pub delay: Duration,
    /// What happened.
    pub outcome: Outcome,
    /// The question's class (`None` when there was no readable question).
    pub class: Option<QClass>,
    /// The reply's code, extended by the EDNS OPT's upper bits (BADVERS is 16).
    pub rcode: u16,
    /// The reply went out truncated (TC bit).
    pub truncated: bool,
    /// The rules that fired (action, delay), as indexes.
    pub fired: [Option<usize>; 2],
    /// The question's name (lower case, no final dot) and type, for the query log.
    pub question: Option<(String, RecordType)>,
}

impl Answer {
    fn none(outcome: Outcome) -> Answer {
        Answer {
            reply: None,
            delay: Duration::ZERO,
            outcome,
            class: None,
            rcode: 0,
            truncated: false,
            fired: [None, None],
            question: None,
        }
    }
}

/// The server's knowledge and rules, shared by every socket.
#[derive(Debug, Default)]
pub struct Responder {
    /// The zones.
    pub authority: Authority,
    /// The fault rules.
    pub faults: Faults,
}

impl Responder {
    /// Answers one packet received `elapsed` after the rules' time zero.
    pub fn respond(
        &self,
        packet: &[u8],
        transport: Transport,
        elapsed: Duration,
        rng: &mut fastrand::Rng,
    ) -> Answer {
        self.respond_with(packet, transport, elapsed, rng, None)
    }

    /// [`Responder::respond`] with the rules' decision already drawn (`preset`), so that
    /// a caller that decided first does not draw twice.
    pub fn respond_with(
        &self,
        packet: &[u8],
        transport: Transport,
        elapsed: Duration,
        rng: &mut fastrand::Rng,
        preset: Option<Decision>,
    ) -> Answer {
        // Never answer a response (or a fragment): that is how reflection loops start.
        if packet.len() < 12 || packet[2] & 0x80 != 0 {
            return Answer::none(Outcome::Ignored);
        }
        let id = u16::from_be_bytes([packet[0], packet[1]]);
        let query = match Message::from_vec(packet) {
            Ok(m) => m,
            Err(_) => return self.error(id, OpCode::Query, ResponseCode::FormErr),
        };
        let op = query.metadata.op_code;
        if op != OpCode::Query {
            return self.error(id, op, ResponseCode::NotImp);
        }
        let [q] = query.queries.as_slice() else {
            return self.error(id, op, ResponseCode::FormErr);
        };
        let (qtype, class) = (q.query_type(), QClass::of(q.query_type()));
        let qname = key(q.name());
        let mut reply = Message::response(id, op);
        reply.metadata.recursion_desired = query.metadata.recursion_desired;
        reply.metadata.checking_disabled = query.metadata.checking_disabled;
        reply.queries = query.queries.clone();
        let limit = match &query.edns {
            Some(e) => {
                let mut edns = Edns::new();
                edns.set_max_payload(MAX_UDP);
                edns.set_dnssec_ok(e.flags().dnssec_ok);
                reply.set_edns(edns);
                if e.version() > 0 {
                    // RFC 6891 §6.1.3: a version we do not speak is BADVERS, as version 0.
                    reply.metadata.response_code = ResponseCode::BADVERS;
                    return self.encoded(
                        reply,
                        transport,
                        512,
                        Decision::default(),
                        (qname, qtype),
                        class,
                    );
                }
                e.max_payload().clamp(512, MAX_UDP)
            }
            None => 512,
        };
        let decision = preset.unwrap_or_else(|| self.faults.decide(class, &qname, elapsed, rng));
        let mut truncated = false;
        let rcode = match decision.action {
            Some(Action::Drop) => {
                return Answer {
                    delay: decision.delay,
                    class: Some(class),
                    fired: decision.fired,
                    question: Some((qname, qtype)),
                    ..Answer::none(Outcome::Dropped)
                };
            }
            Some(Action::Servfail) => ResponseCode::ServFail,
            Some(Action::Refused) => ResponseCode::Refused,
            Some(Action::Nxdomain) => {
                reply.metadata.authoritative = true;
                if let Some(soa) = self.authority.negative_soa(&qname) {
                    reply.add_authority(soa.clone());
                }
                ResponseCode::NXDomain
            }
            Some(Action::Truncate) if transport == Transport::Udp => {
                reply.metadata.authoritative = true;
                truncated = true;
                ResponseCode::NoError
            }
            _ if q.query_class() != DNSClass::IN
                || matches!(qtype, RecordType::AXFR | RecordType::IXFR) =>
            {
                ResponseCode::Refused
            }
            _ => self.zone_answer(&mut reply, q.name(), &qname, qtype),
        };
        reply.metadata.response_code = rcode;
        reply.metadata.truncation = truncated;
        self.encoded(reply, transport, limit, decision, (qname, qtype), class)
    }

    /// Encodes `reply` within `limit` bytes over UDP: additional records that do not fit
    /// are left out (RFC 2181 §9), except a referral's glue; if the rest does not fit
    /// either, the reply goes out truncated (TC) for the client to ask over TCP.
    fn encoded(
        &self,
        mut reply: Message,
        transport: Transport,
        limit: u16,
        decision: Decision,
        question: (String, RecordType),
        class: QClass,
    ) -> Answer {
        let id = reply.metadata.id;
        let op = reply.metadata.op_code;
        let mut truncated = reply.metadata.truncation;
        let mut bytes = reply.to_vec().unwrap_or_default();
        if transport == Transport::Udp && bytes.len() > usize::from(limit) {
            let referral = !reply.metadata.authoritative && !reply.authorities.is_empty();
            if !referral && !reply.additionals.is_empty() {
                reply.additionals.clear();
                bytes = reply.to_vec().unwrap_or_default();
            }
            if bytes.len() > usize::from(limit) {
                truncated = true;
                bytes = reply.truncate().to_vec().unwrap_or_default();
            }
        }
        if bytes.is_empty() {
            return self.error(id, op, ResponseCode::ServFail);
        }
        let code = reply.metadata.response_code;
        Answer {
            reply: Some(bytes),
            delay: decision.delay,
            outcome: Outcome::Answered,
            class: Some(class),
            rcode: u16::from(code),
            truncated,
            fired: decision.fired,
            question: Some(question),
        }
    }

    /// Fills the reply from the zones (RFC 1034 §4.3.2); returns its code.
    fn zone_answer(
        &self,
        reply: &mut Message,
        qname: &Name,
        k: &str,
        qtype: RecordType,
    ) -> ResponseCode {
        let found = self.authority.resolve(qname, k, qtype);
        reply.metadata.authoritative = found.authoritative;
        reply.answers = found.answers;
        reply.authorities = found.authorities;
        reply.additionals = found.additionals;
        found.rcode
    }

    /// A bare error reply.
    fn error(&self, id: u16, op: OpCode, code: ResponseCode) -> Answer {
        let mut m = Message::response(id, op);
        m.metadata.message_type = MessageType::Response;
        m.metadata.response_code = code;
        Answer {
            reply: m.to_vec().ok(),
            rcode: u16::from(code),
            ..Answer::none(Outcome::Answered)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dns::faults::parse_rule;
    use crate::dns::spec::{Synthetic, expand_domains};
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    /// Three synthetic domains (d0..d2.example.test) with one MX each, and `rules`.
    pub(crate) fn responder(rules: &[&str]) -> Responder {
        let mut r = Responder::default();
        Synthetic {
            domains: expand_domains("3").expect("spec"),
            mx_per_domain: 1,
            addresses: vec!["127.0.2.1".parse().expect("ip")],
            dkim: None,
            ttl: 60,
            no_mx: false,
        }
        .build(&mut r.authority)
        .expect("zones");
        r.faults.rules = rules
            .iter()
            .map(|s| parse_rule("--rule", s).expect("rule"))
            .collect();
        r
    }

    fn ask(name: &str, t: RecordType, edns: bool) -> Vec<u8> {
        query(4242, name, t, true, edns)
    }

    /// A query as a resolver sends it.
    pub(crate) fn query(id: u16, name: &str, t: RecordType, rd: bool, edns: bool) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = id;
        m.metadata.recursion_desired = rd;
        m.add_query(Query::query(Name::from_ascii(name).expect("name"), t));
        if edns {
            m.set_edns(Edns::new());
        }
        m.to_vec().expect("encode")
    }

    fn run(r: &Responder, packet: &[u8], t: Transport) -> (Answer, Option<Message>) {
        let a = r.respond(packet, t, Duration::ZERO, &mut fastrand::Rng::with_seed(1));
        let m = a
            .reply
            .as_deref()
            .map(|b| Message::from_vec(b).expect("reply decodes"));
        (a, m)
    }

    #[test]
    fn an_mx_question_gets_its_answer_with_the_host_address_and_the_query_case() {
        let r = responder(&[]);
        let (a, m) = run(
            &r,
            &ask("D1.Example.Test.", RecordType::MX, true),
            Transport::Udp,
        );
        let m = m.expect("a reply");
        assert_eq!(
            (a.outcome, a.class, a.rcode),
            (Outcome::Answered, Some(QClass::Mx), 0)
        );
        assert_eq!(m.metadata.id, 4242);
        assert!(m.metadata.authoritative && m.metadata.recursion_desired);
        assert!(!m.metadata.recursion_available, "never recursive");
        assert_eq!(
            m.queries[0].name().to_ascii(),
            "D1.Example.Test.",
            "the question as asked"
        );
        assert_eq!(m.answers.len(), 1);
        assert_eq!(m.answers[0].data.to_string(), "10 mx1.d1.example.test.");
        assert!(
            m.additionals
                .iter()
                .any(|r| r.data.to_string() == "127.0.2.1")
        );
        assert!(m.edns.is_some(), "EDNS echoed");
    }

    #[test]
    fn nodata_nxdomain_refused_and_formerr_are_told_apart() {
        let r = responder(&[]);
        let code = |p: &[u8]| {
            let (a, m) = run(&r, p, Transport::Udp);
            (a.rcode, m.map(|m| m.authorities.len()).unwrap_or(9))
        };
        assert_eq!(
            code(&ask("mx1.d0.example.test.", RecordType::AAAA, false)),
            (0, 1)
        );
        assert_eq!(
            code(&ask("nope.d0.example.test.", RecordType::A, false)),
            (3, 1)
        );
        assert_eq!(code(&ask("example.com.", RecordType::A, false)), (5, 0));
        assert_eq!(
            code(&ask("d0.example.test.", RecordType::AXFR, false)),
            (5, 0)
        );
        let mut two = Message::query();
        two.add_query(Query::query(
            Name::from_ascii("a.test.").expect("n"),
            RecordType::A,
        ));
        two.add_query(Query::query(
            Name::from_ascii("b.test.").expect("n"),
            RecordType::A,
        ));
        assert_eq!(code(&two.to_vec().expect("encode")), (1, 0), "FORMERR");
        let (a, _) = run(&r, &[1, 2, 3], Transport::Udp);
        assert_eq!((a.outcome, a.reply.is_none()), (Outcome::Ignored, true));
        let mut response = ask("d0.example.test.", RecordType::A, false);
        response[2] |= 0x80;
        assert_eq!(
            run(&r, &response, Transport::Udp).0.outcome,
            Outcome::Ignored
        );
        let mut garbage = ask("d0.example.test.", RecordType::A, false);
        garbage.truncate(20);
        assert_eq!(code(&garbage), (1, 0), "a cut question is FORMERR");
    }

    #[test]
    fn faults_change_the_answer_as_ruled() {
        let q = ask("d0.example.test.", RecordType::MX, false);
        let rcode = |rules: &[&str], t| run(&responder(rules), &q, t).0;
        assert_eq!(rcode(&["mx:servfail"], Transport::Udp).rcode, 2);
        assert_eq!(rcode(&["mx:nxdomain"], Transport::Udp).rcode, 3);
        assert_eq!(rcode(&["mx:refused"], Transport::Udp).rcode, 5);
        assert_eq!(
            rcode(&["a:servfail"], Transport::Udp).rcode,
            0,
            "other types untouched"
        );
        let dropped = rcode(&["mx:drop"], Transport::Udp);
        assert_eq!(
            (dropped.outcome, dropped.reply.is_none()),
            (Outcome::Dropped, true)
        );
        let (a, m) = run(&responder(&["mx:truncate"]), &q, Transport::Udp);
        assert!(a.truncated && m.expect("reply").metadata.truncation);
        let (a, m) = run(&responder(&["mx:truncate"]), &q, Transport::Tcp);
        assert!(!a.truncated, "TCP is never truncated");
        assert_eq!(m.expect("reply").answers.len(), 1);
        let delayed = rcode(&["mx:delay=200ms"], Transport::Udp);
        assert_eq!(delayed.delay, Duration::from_millis(200));
        assert_eq!(delayed.fired, [None, Some(0)]);
    }

    #[test]
    fn a_reply_too_big_for_udp_is_truncated() {
        let mut r = responder(&[]);
        for i in 0..5 {
            // Five different strings: a set holds no duplicates.
            let long = format!("{i}{}", "x".repeat(200));
            r.authority.add(hickory_proto::rr::Record::from_rdata(
                Name::from_ascii("big.d0.example.test.").expect("n"),
                60,
                hickory_proto::rr::RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![long])),
            ));
        }
        let q = ask("big.d0.example.test.", RecordType::TXT, false);
        let (a, m) = run(&r, &q, Transport::Udp);
        assert!(a.truncated && a.reply.as_ref().is_some_and(|b| b.len() <= 512));
        assert!(m.expect("reply").answers.is_empty());
        let (a, m) = run(&r, &q, Transport::Tcp);
        assert!(!a.truncated);
        assert_eq!(m.expect("reply").answers.len(), 5);
    }
}
