//! The authority: every record the server answers with, by owner name and type, the zones
//! it is authoritative for, and the lookup of RFC 1034 §4.3.2 over them — exact match,
//! CNAME chains within the server's zones, referrals at delegations, wildcard synthesis
//! (RFC 4592), NXDOMAIN told from NODATA by empty non-terminals, negative answers' SOA TTL
//! per RFC 2308 §3, and the additional addresses of MX, NS and SRV targets. Built from a
//! synthetic spec (`spec`) or zone files (`zonefile`); read-only while serving.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// The records of one owner name, by type.
#[derive(Debug, Default)]
struct Node {
    sets: Vec<(RecordType, Arc<[Record]>)>,
}

impl Node {
    fn get(&self, t: RecordType) -> Option<&Arc<[Record]>> {
        self.sets.iter().find(|(s, _)| *s == t).map(|(_, r)| r)
    }
}

/// One zone: the SOA as its negative answers carry it, with TTL min(the SOA's TTL,
/// MINIMUM) (RFC 2308 §3).
#[derive(Debug)]
struct Zone {
    negative: Record,
}

/// CNAMEs followed for one question at most (a loop stops here too).
const MAX_CHAIN: usize = 8;

/// The sections and flags of one answer, as the zones make it.
#[derive(Debug, Default, PartialEq)]
pub struct Found {
    /// NOERROR, NXDOMAIN or REFUSED.
    pub rcode: ResponseCode,
    /// AA: the first owner answered is in a zone of ours (clear on referrals).
    pub authoritative: bool,
    /// The answer section.
    pub answers: Vec<Record>,
    /// The authority section: the SOA of a negative answer, or a referral's NS.
    pub authorities: Vec<Record>,
    /// The additional section: addresses of MX, NS and SRV targets (glue on referrals).
    pub additionals: Vec<Record>,
}

/// What one zone says about one name, before CNAMEs are followed.
enum Step<'a> {
    /// Records of the type asked, with the owner to give them (a wildcard's are the
    /// question's).
    Answer(&'a [Record], Option<Name>),
    /// Every set of the node (a question of type ANY).
    All(&'a Node, Option<Name>),
    /// A CNAME instead of the type asked.
    Cname(&'a Record, Option<Name>),
    /// The name exists (perhaps as an empty non-terminal) without that type.
    NoData,
    /// No such name.
    NxDomain,
    /// Below a zone cut: the child's NS.
    Referral(&'a [Record]),
}

/// All zones served, looked up by lower-case names without the final dot.
#[derive(Debug, Default)]
pub struct Authority {
    nodes: HashMap<String, Node>,
    /// Names with records below them: they exist even without records of their own.
    interior: HashSet<String>,
    /// Zone apex → its SOA.
    zones: HashMap<String, Zone>,
}

/// A name's lookup key: lower case, no final dot.
pub fn key(name: &Name) -> String {
    let mut s = name.to_ascii();
    if s.ends_with('.') {
        s.pop();
    }
    s.make_ascii_lowercase();
    s
}

/// The key of `k`'s parent ("" for a top-level name, `None` for the root), skipping dots
/// that `to_ascii` escaped inside a label.
pub fn parent(k: &str) -> Option<&str> {
    let b = k.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'.' => return Some(&k[i + 1..]),
            _ => i += 1,
        }
    }
    (!k.is_empty()).then_some("")
}

/// `record` with `owner` as its name, when one is given (wildcard synthesis).
fn owned(record: &Record, owner: &Option<Name>) -> Record {
    let mut r = record.clone();
    if let Some(o) = owner {
        r.name = o.clone();
    }
    r
}

impl Authority {
    /// Adds a zone apex with its SOA record (which is also served at the apex). The error
    /// says the zone was already loaded.
    pub fn add_zone(&mut self, soa: Record) -> Result<(), String> {
        let apex = key(&soa.name);
        let RData::SOA(s) = &soa.data else {
            return Err(format!("{apex}: a zone starts with its SOA record"));
        };
        if apex.is_empty() {
            return Err("the root zone is not served; serve zones below it".into());
        }
        if self.zones.contains_key(&apex) {
            return Err(format!("the zone {apex} is loaded twice"));
        }
        let mut negative = soa.clone();
        negative.ttl = soa.ttl.min(s.minimum);
        self.zones.insert(apex, Zone { negative });
        self.add(soa);
        Ok(())
    }

    /// Adds one record; records of one name and type form one set, in the order added,
    /// without duplicates (RFC 2181 §5).
    pub fn add(&mut self, record: Record) {
        let k = key(&record.name);
        let mut up = parent(&k);
        while let Some(p) = up {
            if p.is_empty() || !self.interior.insert(p.to_string()) {
                break;
            }
            up = parent(p);
        }
        let node = self.nodes.entry(k).or_default();
        let rtype = record.record_type();
        match node.sets.iter_mut().find(|(t, _)| *t == rtype) {
            Some((_, set)) => {
                if set.iter().any(|r| r.data == record.data) {
                    return;
                }
                let mut v = set.to_vec();
                v.push(record);
                *set = v.into();
            }
            None => node.sets.push((rtype, vec![record].into())),
        }
    }

    /// True when `apex` is already a zone of ours.
    pub fn is_zone(&self, apex: &Name) -> bool {
        self.zones.contains_key(&key(apex))
    }

    /// How many zones are served.
    pub fn zone_count(&self) -> usize {
        self.zones.len()
    }

    /// How many owner names have records.
    pub fn name_count(&self) -> usize {
        self.nodes.len()
    }

    /// The records of `k` (a [`key`]) of type `t`, exactly as loaded.
    pub fn records(&self, k: &str, t: RecordType) -> Option<&[Record]> {
        self.nodes.get(k)?.get(t).map(|s| &s[..])
    }

    /// The SOA a negative answer about `k` carries, if `k` is in a zone of ours.
    pub fn negative_soa(&self, k: &str) -> Option<&Record> {
        self.zone_of(k).map(|(_, z)| &z.negative)
    }

    fn exists(&self, k: &str) -> bool {
        self.nodes.contains_key(k) || self.interior.contains(k)
    }

    /// The closest zone holding `k`, with its apex key.
    fn zone_of<'a>(&self, k: &'a str) -> Option<(&'a str, &Zone)> {
        let mut rest = k;
        loop {
            if let Some(z) = self.zones.get(rest) {
                return Some((rest, z));
            }
            rest = parent(rest).filter(|p| !p.is_empty())?;
        }
    }

    /// The ancestors of `k` strictly below `apex`, top down, then `k` itself.
    fn path_below<'a>(k: &'a str, apex: &str) -> Vec<&'a str> {
        let mut path = Vec::new();
        let mut at = Some(k);
        while let Some(n) = at {
            if n.len() <= apex.len() {
                break;
            }
            path.push(n);
            at = parent(n);
        }
        path.reverse();
        path
    }

    /// What the zone at `apex` says about `k` (RFC 1034 §4.3.2 step 3).
    fn step(&self, apex: &str, k: &str, qtype: RecordType, qname: &Name) -> Step<'_> {
        for n in Self::path_below(k, apex) {
            if let Some(ns) = self.nodes.get(n).and_then(|d| d.get(RecordType::NS))
                && !(n == k && qtype == RecordType::DS)
            {
                return Step::Referral(ns);
            }
            if !self.exists(n) {
                // `n`'s parent is the closest encloser: its wildcard, if any, answers.
                let star = match parent(n) {
                    Some("") | None => "*".to_string(),
                    Some(p) => format!("*.{p}"),
                };
                return match self.nodes.get(&star) {
                    Some(node) => Self::at_node(node, qtype, Some(qname.clone())),
                    None if self.interior.contains(&star) => Step::NoData,
                    None => Step::NxDomain,
                };
            }
        }
        match self.nodes.get(k) {
            Some(node) => Self::at_node(node, qtype, None),
            None => Step::NoData,
        }
    }

    /// The answer at an existing node.
    fn at_node(node: &Node, qtype: RecordType, owner: Option<Name>) -> Step<'_> {
        if qtype == RecordType::ANY && !node.sets.is_empty() {
            return Step::All(node, owner);
        }
        if let Some(set) = node.get(qtype) {
            return Step::Answer(set, owner);
        }
        if let Some(c) = node.get(RecordType::CNAME).and_then(|s| s.first()) {
            return Step::Cname(c, owner);
        }
        Step::NoData
    }

    /// Answers one question: `qname` as asked, `k` its [`key`].
    pub fn resolve(&self, qname: &Name, k: &str, qtype: RecordType) -> Found {
        let mut found = Found::default();
        let (mut name, mut k) = (qname.clone(), k.to_string());
        let mut seen: Vec<String> = Vec::new();
        for hop in 0..MAX_CHAIN {
            let Some((apex, zone)) = self.zone_of(&k) else {
                if hop == 0 {
                    found.rcode = ResponseCode::Refused;
                }
                break;
            };
            if hop == 0 {
                found.authoritative = true;
            }
            match self.step(apex, &k, qtype, &name) {
                Step::Answer(set, owner) => {
                    found.answers.extend(set.iter().map(|r| owned(r, &owner)));
                    break;
                }
                Step::All(node, owner) => {
                    for (_, set) in &node.sets {
                        found.answers.extend(set.iter().map(|r| owned(r, &owner)));
                    }
                    break;
                }
                Step::Cname(c, owner) => {
                    found.answers.push(owned(c, &owner));
                    seen.push(k.clone());
                    let RData::CNAME(target) = &c.data else {
                        break;
                    };
                    name = target.0.clone();
                    k = key(&name);
                    if seen.contains(&k) {
                        break;
                    }
                }
                Step::NoData => {
                    found.authorities.push(zone.negative.clone());
                    break;
                }
                Step::NxDomain => {
                    found.rcode = ResponseCode::NXDomain;
                    found.authorities.push(zone.negative.clone());
                    break;
                }
                Step::Referral(ns) => {
                    if hop == 0 {
                        found.authoritative = false;
                    }
                    found.authorities.extend(ns.iter().cloned());
                    break;
                }
            }
        }
        self.add_additionals(&mut found);
        found
    }

    /// The addresses of the MX, NS and SRV targets named in the answer and authority
    /// sections, where the server holds them (glue included), as NSD adds them.
    fn add_additionals(&self, found: &mut Found) {
        let mut targets: Vec<String> = Vec::new();
        for r in found.answers.iter().chain(&found.authorities) {
            let t = match &r.data {
                RData::MX(mx) => &mx.exchange,
                RData::NS(ns) => &ns.0,
                RData::SRV(srv) => &srv.target,
                _ => continue,
            };
            let t = key(t);
            if !t.is_empty() && !targets.contains(&t) {
                targets.push(t);
            }
        }
        for t in targets {
            for rt in [RecordType::A, RecordType::AAAA] {
                if let Some(set) = self.nodes.get(&t).and_then(|n| n.get(rt)) {
                    found.additionals.extend(set.iter().cloned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME, MX, NS, SOA, TXT};

    fn n(s: &str) -> Name {
        Name::from_ascii(s).expect("name")
    }

    fn rec(owner: &str, ttl: u32, data: RData) -> Record {
        Record::from_rdata(n(owner), ttl, data)
    }

    /// A zone with every case of the lookup, built record by record.
    fn authority() -> Authority {
        let mut a = Authority::default();
        let soa = SOA::new(
            n("ns.lab.test."),
            n("h.lab.test."),
            1,
            3600,
            600,
            86400,
            300,
        );
        a.add_zone(rec("lab.test.", 3600, RData::SOA(soa)))
            .expect("zone");
        let ip = |s: &str| RData::A(A(s.parse().expect("ip")));
        for r in [
            rec("lab.test.", 60, RData::MX(MX::new(10, n("mx.lab.test.")))),
            rec("mx.lab.test.", 60, ip("127.0.2.1")),
            rec(
                "alias.lab.test.",
                60,
                RData::CNAME(CNAME(n("mx.lab.test."))),
            ),
            rec(
                "dangle.lab.test.",
                60,
                RData::CNAME(CNAME(n("no.lab.test."))),
            ),
            rec(
                "loop.lab.test.",
                60,
                RData::CNAME(CNAME(n("loop.lab.test."))),
            ),
            rec(
                "*.wild.lab.test.",
                60,
                RData::TXT(TXT::new(vec!["w".into()])),
            ),
            rec("real.wild.lab.test.", 60, ip("127.0.0.9")),
            rec("x.ent.wild.lab.test.", 60, ip("127.0.0.8")),
            rec(
                "sel._domainkey.lab.test.",
                60,
                RData::TXT(TXT::new(vec!["k".into()])),
            ),
            rec(
                "child.lab.test.",
                60,
                RData::NS(NS(n("ns.child.lab.test."))),
            ),
            rec("ns.child.lab.test.", 60, ip("127.0.0.7")),
        ] {
            a.add(r);
        }
        a
    }

    fn ask(a: &Authority, q: &str, t: RecordType) -> Found {
        let name = n(q);
        a.resolve(&name, &key(&name), t)
    }

    fn datas(rs: &[Record]) -> Vec<String> {
        rs.iter()
            .map(|r| format!("{} {}", r.name, r.data))
            .collect()
    }

    #[test]
    fn exact_names_nodata_nxdomain_and_other_zones() {
        let a = authority();
        let f = ask(&a, "lab.test.", RecordType::MX);
        assert_eq!(
            (f.rcode, f.authoritative, datas(&f.additionals)),
            (
                ResponseCode::NoError,
                true,
                vec!["mx.lab.test. 127.0.2.1".to_string()]
            )
        );
        let f = ask(&a, "mx.lab.test.", RecordType::AAAA);
        assert_eq!((f.rcode, f.answers.len()), (ResponseCode::NoError, 0));
        assert_eq!(f.authorities[0].ttl, 300, "min(SOA TTL 3600, MINIMUM 300)");
        let f = ask(&a, "nope.lab.test.", RecordType::A);
        assert_eq!(f.rcode, ResponseCode::NXDomain);
        assert_eq!(
            ask(&a, "other.test.", RecordType::A).rcode,
            ResponseCode::Refused
        );
    }

    #[test]
    fn empty_non_terminals_are_nodata_and_names_below_them_nxdomain() {
        let a = authority();
        let f = ask(&a, "_domainkey.lab.test.", RecordType::TXT);
        assert_eq!(
            (f.rcode, f.answers.len(), f.authorities.len()),
            (ResponseCode::NoError, 0, 1)
        );
        assert_eq!(
            ask(&a, "x._domainkey.lab.test.", RecordType::TXT).rcode,
            ResponseCode::NXDomain
        );
    }

    #[test]
    fn cnames_are_followed_and_a_dangling_one_is_nxdomain_with_the_cname() {
        let a = authority();
        let f = ask(&a, "alias.lab.test.", RecordType::A);
        assert_eq!(
            datas(&f.answers),
            ["alias.lab.test. mx.lab.test.", "mx.lab.test. 127.0.2.1"]
        );
        let f = ask(&a, "dangle.lab.test.", RecordType::A);
        assert_eq!(
            (f.rcode, f.answers.len(), f.authorities.len()),
            (ResponseCode::NXDomain, 1, 1)
        );
        let f = ask(&a, "alias.lab.test.", RecordType::CNAME);
        assert_eq!(f.answers.len(), 1, "a CNAME question gets the CNAME only");
        assert_eq!(
            ask(&a, "loop.lab.test.", RecordType::A).answers.len(),
            1,
            "a loop stops"
        );
    }

    #[test]
    fn wildcards_synthesise_but_not_over_names_that_exist() {
        let a = authority();
        let f = ask(&a, "any.wild.lab.test.", RecordType::TXT);
        assert_eq!(datas(&f.answers), ["any.wild.lab.test. w"]);
        let f = ask(&a, "a.b.wild.lab.test.", RecordType::TXT);
        assert_eq!(f.answers.len(), 1, "deeper names match too");
        let f = ask(&a, "real.wild.lab.test.", RecordType::TXT);
        assert_eq!(
            (f.rcode, f.answers.len()),
            (ResponseCode::NoError, 0),
            "exists: NODATA"
        );
        let f = ask(&a, "ent.wild.lab.test.", RecordType::TXT);
        assert_eq!(
            (f.rcode, f.answers.len()),
            (ResponseCode::NoError, 0),
            "ENT: NODATA"
        );
        let f = ask(&a, "y.ent.wild.lab.test.", RecordType::TXT);
        assert_eq!(f.rcode, ResponseCode::NXDomain, "no wildcard at ent.wild");
        let f = ask(&a, "any.wild.lab.test.", RecordType::A);
        assert_eq!((f.rcode, f.answers.len()), (ResponseCode::NoError, 0));
    }

    #[test]
    fn names_at_and_below_a_cut_get_a_referral_with_glue() {
        let a = authority();
        for q in [
            "child.lab.test.",
            "www.child.lab.test.",
            "ns.child.lab.test.",
        ] {
            let f = ask(&a, q, RecordType::A);
            assert_eq!(
                (f.rcode, f.authoritative, f.answers.len()),
                (ResponseCode::NoError, false, 0),
                "{q}"
            );
            assert_eq!(
                datas(&f.authorities),
                ["child.lab.test. ns.child.lab.test."]
            );
            assert_eq!(datas(&f.additionals), ["ns.child.lab.test. 127.0.0.7"]);
        }
        let f = ask(&a, "child.lab.test.", RecordType::DS);
        assert!(f.authoritative, "DS is the parent's");
    }
}
