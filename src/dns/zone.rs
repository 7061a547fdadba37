//! The authority: every record the server answers with, by owner name and type, and the
//! zones it is authoritative for (the apex of each holds its SOA). Built from a synthetic
//! spec (`spec`) or from zone files; read-only while serving.

use std::collections::HashMap;
use std::sync::Arc;

use hickory_proto::rr::{Name, Record, RecordType};
use hickory_proto::serialize::txt::Parser;

/// The records of one owner name, by type.
#[derive(Debug, Default)]
struct Node {
    sets: Vec<(RecordType, Arc<[Record]>)>,
}

/// What the authority says about one question.
#[derive(Debug, PartialEq)]
pub enum Lookup<'a> {
    /// The name has records of that type.
    Answer(&'a [Record]),
    /// The name exists but has none of that type: NOERROR with the zone's SOA.
    NoData(&'a Record),
    /// The name does not exist in a zone of ours: NXDOMAIN with the zone's SOA.
    NxDomain(&'a Record),
    /// Not our zone: REFUSED (the server never recurses).
    Refused,
}

/// All zones served, looked up by lower-case names without the final dot.
#[derive(Debug, Default)]
pub struct Authority {
    nodes: HashMap<String, Node>,
    /// Zone apex → its SOA record.
    zones: HashMap<String, Record>,
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

impl Authority {
    /// Adds a zone apex with its SOA record (which is also served at the apex).
    pub fn add_zone(&mut self, soa: Record) {
        self.zones.insert(key(&soa.name), soa.clone());
        self.add(soa);
    }

    /// Adds one record; records of one name and type form one set, in the order added.
    pub fn add(&mut self, record: Record) {
        let node = self.nodes.entry(key(&record.name)).or_default();
        let rtype = record.record_type();
        match node.sets.iter_mut().find(|(t, _)| *t == rtype) {
            Some((_, set)) => {
                let mut v = set.to_vec();
                v.push(record);
                *set = v.into();
            }
            None => node.sets.push((rtype, vec![record].into())),
        }
    }

    /// Loads a standard zone file (`$ORIGIN`, `$TTL`, relative names); its SOA makes the
    /// zone. The error names the file and what to fix.
    pub fn load_zone_file(&mut self, text: &str, source: &str) -> Result<usize, String> {
        let (origin, sets) = Parser::new(text, None, None)
            .parse()
            .map_err(|e| format!("--zone {source}: {e}; a zone file needs $ORIGIN (or absolute names), $TTL or TTLs, and one SOA"))?;
        let mut soa = None;
        let mut n = 0;
        for set in sets.into_values() {
            for r in set.records_without_rrsigs() {
                if r.record_type() == RecordType::SOA {
                    soa = Some(r.clone());
                } else {
                    self.add(r.clone());
                    n += 1;
                }
            }
        }
        let soa = soa.ok_or_else(|| {
            format!("--zone {source}: no SOA record for {origin}; add one at the zone's apex")
        })?;
        self.add_zone(soa);
        Ok(n + 1)
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

    /// Answers one question (`qname` as [`key`] makes it).
    pub fn lookup(&self, qname: &str, qtype: RecordType) -> Lookup<'_> {
        if let Some(node) = self.nodes.get(qname) {
            let found = node
                .sets
                .iter()
                .find(|(t, _)| *t == qtype || qtype == RecordType::ANY);
            if let Some((_, set)) = found {
                return Lookup::Answer(set);
            }
        }
        let Some(soa) = self.zone_of(qname) else {
            return Lookup::Refused;
        };
        if self.nodes.contains_key(qname) {
            Lookup::NoData(soa)
        } else {
            Lookup::NxDomain(soa)
        }
    }

    /// The SOA of the closest zone holding `qname`.
    fn zone_of(&self, qname: &str) -> Option<&Record> {
        let mut rest = qname;
        loop {
            if let Some(soa) = self.zones.get(rest) {
                return Some(soa);
            }
            rest = rest.split_once('.')?.1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RData;

    const ZONE: &str = "$ORIGIN lab.test.
$TTL 300
@   IN SOA ns.lab.test. hostmaster.lab.test. 1 3600 600 86400 60
@   IN MX 10 mx1
@   IN MX 20 mx2.lab.test.
mx1 IN A 127.0.2.1
mx2 IN AAAA ::1
@   IN TXT \"v=spf1 -all\"
";

    fn loaded() -> Authority {
        let mut a = Authority::default();
        let n = a.load_zone_file(ZONE, "lab.zone").expect("zone");
        assert_eq!(n, 6, "records loaded, SOA included");
        a
    }

    #[test]
    fn a_zone_file_answers_nodata_nxdomain_and_refuses_other_zones() {
        let a = loaded();
        let Lookup::Answer(mx) = a.lookup("lab.test", RecordType::MX) else {
            panic!("expected MX records");
        };
        assert_eq!(mx.len(), 2);
        let Lookup::Answer(a1) = a.lookup("mx1.lab.test", RecordType::A) else {
            panic!("expected an A record");
        };
        assert_eq!(
            a1[0].data,
            RData::A("127.0.2.1".parse().expect("ip")),
            "the relative name mx1 is under the origin"
        );
        assert!(matches!(
            a.lookup("mx1.lab.test", RecordType::AAAA),
            Lookup::NoData(_)
        ));
        assert!(matches!(
            a.lookup("nope.lab.test", RecordType::A),
            Lookup::NxDomain(soa) if key(&soa.name) == "lab.test"
        ));
        assert_eq!(a.lookup("example.com", RecordType::A), Lookup::Refused);
        assert_eq!(a.lookup("test", RecordType::A), Lookup::Refused);
    }

    #[test]
    fn a_zone_file_without_soa_or_origin_is_refused_with_the_fix() {
        let mut a = Authority::default();
        let e = a
            .load_zone_file("$ORIGIN x.test.\n$TTL 60\n@ IN A 127.0.0.1\n", "x.zone")
            .expect_err("no SOA");
        assert!(e.starts_with("--zone x.zone: no SOA record"), "{e}");
        let e = a
            .load_zone_file("@ 60 IN A 127.0.0.1\n", "y.zone")
            .expect_err("no origin");
        assert!(e.starts_with("--zone y.zone: "), "{e}");
    }
}
