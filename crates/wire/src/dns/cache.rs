//! The UDP fast path: a plain query (one question, at most an EDNS OPT, no compression)
//! whose answer was made before is answered from a copy of that reply, with the query's
//! id, RD and CD bits and the question's spelling patched in — no decoding or encoding.
//! Anything else, and every first answer, goes through [`Responder::respond`]. The zones
//! never change while serving, so a stored reply stays right; the cache is bounded and
//! kept per socket loop (no lock).

use std::collections::HashMap;
use std::time::Duration;

use super::answer::{Answer, Outcome, Responder, Transport};
use super::faults::QClass;

/// Most replies kept; the cache starts again empty when full.
pub const MAX_ENTRIES: usize = 65_536;

/// A query simple enough for the fast path.
#[derive(Debug, PartialEq)]
struct Plain {
    /// Where the question's name ends (exclusive), from offset 12.
    name_end: usize,
    qtype: u16,
    /// The EDNS payload size offered, when the query has an OPT record.
    edns: Option<u16>,
    /// The OPT record's DO bit, echoed in the reply.
    dnssec_ok: bool,
}

/// Reads a plain query, or says it is not one (the slow path then handles it).
fn plain(p: &[u8]) -> Option<Plain> {
    let word = |i: usize| Some(u16::from_be_bytes([*p.get(i)?, *p.get(i + 1)?]));
    // QR 0, opcode 0; one question, no answers or authorities, at most one additional.
    if p.len() < 17 || p[2] & 0xf8 != 0 || word(4)? != 1 || word(6)? != 0 || word(8)? != 0 {
        return None;
    }
    let mut i = 12;
    loop {
        let len = usize::from(*p.get(i)?);
        if len == 0 {
            i += 1;
            break;
        }
        if len > 63 {
            return None; // a compression pointer (or junk): the slow path decides
        }
        i += 1 + len;
    }
    if i - 12 > 255 || word(i + 2)? != 1 {
        return None; // too long a name, or not class IN
    }
    let qtype = word(i)?;
    let end = i + 4;
    let edns = match word(10)? {
        0 if p.len() == end => None,
        // The OPT record: root name, type 41, its payload size, EDNS version 0 (another
        // is BADVERS, the slow path's), and nothing after it.
        1 if p.get(end) == Some(&0) && word(end + 1)? == 41 && *p.get(end + 6)? == 0 => {
            let rdlen = usize::from(word(end + 9)?);
            (p.len() == end + 11 + rdlen).then_some(())?;
            Some(word(end + 3)?)
        }
        _ => return None,
    };
    let dnssec_ok = edns.is_some() && p[end + 7] & 0x80 != 0;
    Some(Plain {
        name_end: i,
        qtype,
        edns,
        dnssec_ok,
    })
}

/// Stored replies, by lower-cased question (name, type), whether EDNS was used and its DO
/// bit (echoed in the reply).
#[derive(Debug, Default)]
pub struct AnswerCache {
    replies: HashMap<Box<[u8]>, Box<[u8]>>,
    key: Vec<u8>,
}

impl AnswerCache {
    /// Answers a UDP packet: from a stored reply when it can, else through `r`.
    pub fn answer(
        &mut self,
        r: &Responder,
        packet: &[u8],
        elapsed: Duration,
        rng: &mut fastrand::Rng,
    ) -> Answer {
        let Some(q) = plain(packet).filter(|_| r.faults.rules.iter().all(|f| f.pattern.is_none()))
        else {
            return r.respond(packet, Transport::Udp, elapsed, rng);
        };
        self.key.clear();
        self.key
            .extend(packet[12..q.name_end].iter().map(u8::to_ascii_lowercase));
        self.key.extend(q.qtype.to_be_bytes());
        self.key
            .push(u8::from(q.edns.is_some()) + u8::from(q.dnssec_ok));
        let class = QClass::of(q.qtype.into());
        let limit = q.edns.map_or(512, |e| e.clamp(512, super::answer::MAX_UDP));
        // No rule names a glob: the decision needs the question's class only.
        let decision = r.faults.decide(class, "", elapsed, rng);
        let stored = self
            .replies
            .get(self.key.as_slice())
            .filter(|s| s.len() <= usize::from(limit));
        if let Some(stored) = stored
            && decision.action.is_none()
        {
            let mut reply = stored.to_vec();
            reply[..2].copy_from_slice(&packet[..2]);
            reply[2] = (reply[2] & !0x01) | (packet[2] & 0x01);
            reply[3] = (reply[3] & !0x10) | (packet[3] & 0x10);
            reply[12..q.name_end].copy_from_slice(&packet[12..q.name_end]);
            return Answer {
                rcode: u16::from(reply[3] & 0x0f),
                reply: Some(reply),
                delay: decision.delay,
                outcome: Outcome::Answered,
                class: Some(class),
                truncated: false,
                fired: decision.fired,
                question: None,
            };
        }
        let a = r.respond_with(packet, Transport::Udp, elapsed, rng, Some(decision));
        if let (Some(reply), None, false) = (&a.reply, a.fired[0], a.truncated)
            && a.outcome == Outcome::Answered
            && reply.len() >= q.name_end
        {
            if self.replies.len() >= MAX_ENTRIES {
                self.replies.clear();
            }
            let mut stored = reply.clone();
            stored[12..q.name_end].make_ascii_lowercase();
            self.replies.insert(
                self.key.clone().into_boxed_slice(),
                stored.into_boxed_slice(),
            );
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::answer::tests::{query as ask, responder};
    use hickory_proto::op::Message;
    use hickory_proto::rr::RecordType;

    #[test]
    fn a_stored_reply_says_what_the_responder_would_say() {
        let r = responder(&[]);
        let mut cache = AnswerCache::default();
        let mut rng = fastrand::Rng::with_seed(3);
        let first = ask(1, "d1.example.test.", RecordType::MX, false, true);
        let _ = cache.answer(&r, &first, Duration::ZERO, &mut rng);
        assert_eq!(cache.replies.len(), 1);
        for (id, name, rd, edns) in [
            (77, "D1.Example.TEST.", true, true),
            (78, "d1.example.test.", false, true),
        ] {
            let q = ask(id, name, RecordType::MX, rd, edns);
            let fast = cache.answer(&r, &q, Duration::ZERO, &mut rng);
            let slow = r.respond(&q, Transport::Udp, Duration::ZERO, &mut rng);
            // The stored reply points its owner names at the question as asked (0x20
            // spelling kept); hickory spells them out when the case differs: the same
            // message either way (names compare without case).
            let decode = |a: &Answer| {
                Message::from_vec(a.reply.as_deref().expect("reply")).expect("decodes")
            };
            assert_eq!(decode(&fast), decode(&slow), "{name} rd={rd}");
            assert_eq!(
                decode(&fast).queries[0].name().to_ascii(),
                name,
                "the question as asked"
            );
            assert_eq!((fast.rcode, fast.class), (slow.rcode, slow.class));
        }
        assert_eq!(
            cache.replies.len(),
            1,
            "the spelling and RD share one entry"
        );
        let no_edns = ask(9, "d1.example.test.", RecordType::MX, false, false);
        let a = cache.answer(&r, &no_edns, Duration::ZERO, &mut rng);
        assert_eq!(
            a.reply,
            r.respond(&no_edns, Transport::Udp, Duration::ZERO, &mut rng)
                .reply
        );
        assert_eq!(cache.replies.len(), 2, "with and without EDNS are apart");
    }

    /// A query with EDNS, its DO bit and version set as given.
    fn with_opt(dnssec_ok: bool, version: u8) -> Vec<u8> {
        let mut q = ask(7, "d1.example.test.", RecordType::MX, false, true);
        let n = q.len();
        q[n - 5] = version;
        q[n - 4] = if dnssec_ok { 0x80 } else { 0 };
        q
    }

    #[test]
    fn the_do_bit_is_echoed_and_another_edns_version_is_badvers_cached_or_not() {
        let r = responder(&[]);
        let mut cache = AnswerCache::default();
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..2 {
            for (dnssec_ok, version) in [(false, 0), (true, 0), (true, 1)] {
                let a = cache.answer(&r, &with_opt(dnssec_ok, version), Duration::ZERO, &mut rng);
                let m = Message::from_vec(a.reply.as_deref().expect("reply")).expect("decodes");
                let edns = m.edns.as_ref().expect("OPT in the reply");
                assert_eq!(
                    (edns.flags().dnssec_ok, edns.version()),
                    (dnssec_ok, 0),
                    "DO echoed, version 0 spoken"
                );
                // BADVERS is 16 (hickory decodes 16 as BADSIG, the TSIG code of the same value).
                let badvers = u16::from(m.metadata.response_code) == 16;
                assert_eq!(badvers, version == 1, "do={dnssec_ok} version={version}");
                assert_eq!(m.answers.is_empty(), version == 1);
            }
        }
        assert_eq!(
            cache.replies.len(),
            2,
            "DO and no DO apart; BADVERS never stored"
        );
    }

    #[test]
    fn only_plain_queries_take_the_fast_path() {
        let q = ask(1, "d1.example.test.", RecordType::A, false, true);
        assert!(plain(&q).is_some());
        assert!(plain(&ask(1, "d1.example.test.", RecordType::A, false, false)).is_some());
        let mut response = q.clone();
        response[2] |= 0x80;
        assert_eq!(plain(&response), None);
        assert_eq!(plain(&q[..q.len() - 1]), None, "cut short");
        let mut trailing = q.clone();
        trailing.push(0);
        assert_eq!(plain(&trailing), None, "bytes after the OPT record");
        let mut pointer = q.clone();
        pointer[12] = 0xc0;
        assert_eq!(plain(&pointer), None);
    }

    #[test]
    fn rules_with_an_action_or_a_name_glob_are_decided_on_every_query() {
        let mut r = responder(&[]);
        r.faults.rules =
            vec![crate::dns::faults::parse_rule("--rule", "mx:servfail:50%").expect("rule")];
        let mut cache = AnswerCache::default();
        let mut rng = fastrand::Rng::with_seed(5);
        let q = ask(1, "d1.example.test.", RecordType::MX, false, false);
        let failed = (0..2000)
            .filter(|_| cache.answer(&r, &q, Duration::ZERO, &mut rng).rcode == 2)
            .count();
        assert!(
            (850..1150).contains(&failed),
            "50 % of 2000 SERVFAIL, got {failed}"
        );
    }
}
