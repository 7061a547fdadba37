//! The master-file reader of RFC 1035 §5.1: quoted strings (a `;` inside one is data, the
//! quotes are not), `;` comments outside them, parentheses over lines, `\X` and `\DDD`
//! escapes, `$ORIGIN`, `$TTL`, `@`, relative names, and an omitted owner, TTL or class.
//! Whatever it cannot serve right is refused with `FILE:LINE: why` — never served wrong
//! (fuzzed in `fuzz/fuzz_targets/zone_file.rs`).

use hickory_proto::rr::{DNSClass, Name, Record, RecordType};

use super::rdata;
use super::token::{Token, name, ttl};
use super::zone::{Authority, key, parent};

/// One entry: the tokens of a line, or of lines joined by parentheses.
#[derive(Debug)]
struct Entry {
    /// Where it starts (1-based).
    line: usize,
    /// It starts with a blank: the owner is the previous record's.
    blank_owner: bool,
    tokens: Vec<Token>,
}

/// Splits the text into entries; the error is `(line, why)`.
fn entries(text: &[u8]) -> Result<Vec<Entry>, (usize, String)> {
    let mut out = Vec::new();
    let (mut line, mut depth, mut open_at) = (1usize, 0usize, 0usize);
    let mut cur: Option<Entry> = None;
    let mut i = 0;
    let mut line_start = true;
    while i < text.len() {
        if line_start && depth == 0 {
            if let Some(e) = cur.take().filter(|e| !e.tokens.is_empty()) {
                out.push(e);
            }
            cur = Some(Entry {
                line,
                blank_owner: matches!(text[i], b' ' | b'\t'),
                tokens: Vec::new(),
            });
        }
        line_start = false;
        let c = text[i];
        match c {
            b' ' | b'\t' | b'\r' => i += 1,
            b'\n' => {
                line += 1;
                line_start = true;
                i += 1;
            }
            b';' => {
                while i < text.len() && text[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' => {
                if depth == 0 {
                    open_at = line;
                }
                depth += 1;
                i += 1;
            }
            b')' => {
                if depth == 0 {
                    return Err((line, "')' without '('".into()));
                }
                depth -= 1;
                i += 1;
            }
            b'"' => {
                let mut t = Vec::new();
                i += 1;
                loop {
                    match text.get(i) {
                        None | Some(b'\n') => {
                            return Err((line, "a quoted string is not closed on its line".into()));
                        }
                        Some(b'"') => break,
                        Some(b'\\') => {
                            let next = *text
                                .get(i + 1)
                                .filter(|b| **b != b'\n')
                                .ok_or((line, "'\\' at the end of a line".to_string()))?;
                            t.extend([b'\\', next]);
                            i += 2;
                        }
                        Some(b) => {
                            t.push(*b);
                            i += 1;
                        }
                    }
                }
                i += 1;
                push(&mut cur, line, t, true);
            }
            _ => {
                let mut t = Vec::new();
                while let Some(&b) = text.get(i) {
                    if matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' | b'"') {
                        break;
                    }
                    if b == b'\\' {
                        let next = *text
                            .get(i + 1)
                            .filter(|b| **b != b'\n')
                            .ok_or((line, "'\\' at the end of a line".to_string()))?;
                        t.extend([b'\\', next]);
                        i += 2;
                    } else {
                        t.push(b);
                        i += 1;
                    }
                }
                push(&mut cur, line, t, false);
            }
        }
    }
    if depth > 0 {
        return Err((open_at, "'(' is never closed".into()));
    }
    if let Some(e) = cur.filter(|e| !e.tokens.is_empty()) {
        out.push(e);
    }
    Ok(out)
}

fn push(cur: &mut Option<Entry>, line: usize, text: Vec<u8>, quoted: bool) {
    cur.get_or_insert(Entry {
        line,
        blank_owner: false,
        tokens: Vec::new(),
    })
    .tokens
    .push(Token { text, quoted });
}

/// A record as read, with the line it came from.
#[derive(Debug)]
pub struct Read {
    /// 1-based line of the entry.
    pub line: usize,
    /// The record.
    pub record: Record,
}

fn class_of(t: &Token) -> Option<DNSClass> {
    if t.quoted {
        return None;
    }
    let s = String::from_utf8_lossy(&t.text).to_ascii_uppercase();
    match s.as_str() {
        "IN" => Some(DNSClass::IN),
        "CH" => Some(DNSClass::CH),
        "HS" => Some(DNSClass::HS),
        "NONE" => Some(DNSClass::NONE),
        "ANY" => Some(DNSClass::ANY),
        _ => s
            .strip_prefix("CLASS")
            .and_then(|n| n.parse::<u16>().ok())
            .map(DNSClass::from),
    }
}

/// Reads a zone file's records (no checks across records yet); the error is `(line, why)`.
pub fn read(text: &[u8]) -> Result<Vec<Read>, (usize, String)> {
    let mut origin: Option<Name> = None;
    let mut default_ttl: Option<u32> = None;
    let mut last_ttl: Option<u32> = None;
    let mut owner: Option<Name> = None;
    let mut out = Vec::new();
    for e in entries(text)? {
        let at = |why: String| (e.line, why);
        let first = &e.tokens[0];
        if !e.blank_owner && !first.quoted && first.text.first() == Some(&b'$') {
            let arg = e.tokens.get(1);
            match first.text.to_ascii_uppercase().as_slice() {
                b"$ORIGIN" => {
                    let t = arg.ok_or_else(|| at("$ORIGIN needs a name".into()))?;
                    origin = Some(name(t, origin.as_ref()).map_err(at)?);
                }
                b"$TTL" => {
                    default_ttl = Some(
                        arg.and_then(ttl)
                            .ok_or_else(|| at("$TTL needs a TTL in seconds (or 1h, 1d)".into()))?,
                    );
                }
                d => {
                    return Err(at(format!(
                        "{} is not read by mailbench; write the records out in this file",
                        String::from_utf8_lossy(d)
                    )));
                }
            }
            if e.tokens.len() > 2 {
                return Err(at("a directive takes one argument".into()));
            }
            continue;
        }
        let mut rest = &e.tokens[..];
        if !e.blank_owner {
            owner = Some(name(&rest[0], origin.as_ref()).map_err(at)?);
            rest = &rest[1..];
        }
        let owner = owner
            .clone()
            .ok_or_else(|| at("the first record needs an owner name".into()))?;
        let (mut rttl, mut class) = (None, None);
        while let Some(t) = rest.first() {
            if rttl.is_none() && t.text.first().is_some_and(u8::is_ascii_digit) {
                rttl = Some(ttl(t).ok_or_else(|| {
                    at(format!(
                        "{:?} is not a TTL (seconds up to 2147483647, or units: 1h30m, 2d)",
                        String::from_utf8_lossy(&t.text)
                    ))
                })?);
            } else if class.is_none()
                && let Some(c) = class_of(t)
            {
                class = Some(c);
            } else {
                break;
            }
            rest = &rest[1..];
        }
        if let Some(c) = class.filter(|c| *c != DNSClass::IN) {
            return Err(at(format!("class {c} is not served; only IN")));
        }
        let Some((tt, rdata_tokens)) = rest.split_first() else {
            return Err(at("no record type".into()));
        };
        let rtype = rdata::record_type(tt).map_err(at)?;
        let data = rdata::parse(rtype, rdata_tokens, origin.as_ref()).map_err(at)?;
        let ttl = match rttl {
            Some(t) => {
                last_ttl = Some(t);
                t
            }
            None => default_ttl
                .or(last_ttl)
                .ok_or_else(|| at("no TTL: add $TTL at the top or a TTL to the record".into()))?,
        };
        out.push(Read {
            line: e.line,
            record: Record::from_rdata(owner, ttl, data),
        });
    }
    Ok(out)
}

impl Authority {
    /// Loads a zone file: one SOA makes its zone, every other record must lie in it; what
    /// cannot be served right (data under a delegation, a CNAME beside other data, a set
    /// whose TTLs differ, …) is refused. The error is `--zone-file FILE:LINE: why`.
    pub fn load_zone_file(&mut self, text: &[u8], source: &str) -> Result<usize, String> {
        let fail = |line: usize, why: String| format!("--zone-file {source}:{line}: {why}");
        let records = read(text).map_err(|(l, w)| fail(l, w))?;
        let mut soas = records
            .iter()
            .filter(|r| r.record.record_type() == RecordType::SOA);
        let soa = soas.next().ok_or_else(|| {
            format!("--zone-file {source}: no SOA record; add one at the zone's apex")
        })?;
        if let Some(second) = soas.next() {
            return Err(fail(second.line, "a second SOA; one zone per file".into()));
        }
        let apex = soa.record.name.clone();
        check(&records, &apex).map_err(|(l, w)| fail(l, w))?;
        self.add_zone(soa.record.clone())
            .map_err(|w| fail(soa.line, w))?;
        let mut n = 1;
        for r in records {
            if r.record.record_type() != RecordType::SOA {
                self.add(r.record);
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The checks across records of one zone at `apex`.
fn check(records: &[Read], apex: &Name) -> Result<(), (usize, String)> {
    let apex_key = key(apex);
    let cuts: std::collections::HashSet<String> = records
        .iter()
        .filter(|r| r.record.record_type() == RecordType::NS && r.record.name != *apex)
        .map(|r| key(&r.record.name))
        .collect();
    // The names NS records point at: below a cut, only their addresses are served (as
    // glue in a referral's additional section).
    let ns_targets: std::collections::HashSet<String> = records
        .iter()
        .filter_map(|r| match &r.record.data {
            hickory_proto::rr::RData::NS(ns) => Some(key(&ns.0)),
            _ => None,
        })
        .collect();
    // The delegation strictly above `k`, if any.
    let cut_above = |k: &str| -> Option<String> {
        let mut up = parent(k);
        while let Some(p) = up.filter(|p| p.len() > apex_key.len()) {
            if cuts.contains(p) {
                return Some(p.to_string());
            }
            up = parent(p);
        }
        None
    };
    let mut sets: std::collections::HashMap<(String, RecordType), (u32, usize)> =
        std::collections::HashMap::new();
    for r in records {
        let (rec, line) = (&r.record, r.line);
        let k = key(&rec.name);
        let t = rec.record_type();
        if !apex.zone_of(&rec.name) {
            return Err((line, format!("{} is outside the zone {apex}", rec.name)));
        }
        if let Some(cut) = cut_above(&k) {
            let why = match t {
                RecordType::A | RecordType::AAAA if ns_targets.contains(&k) => None,
                RecordType::A | RecordType::AAAA => Some(
                    "; an address there is served only as glue of a name an NS record names, and none names it",
                ),
                _ => Some(""),
            };
            if let Some(why) = why {
                return Err((
                    line,
                    format!(
                        "{} {t} is below the delegation at {cut}. and would never be served{why}; remove it",
                        rec.name
                    ),
                ));
            }
        }
        if cuts.contains(&k) && !matches!(t, RecordType::NS | RecordType::DS) {
            return Err((
                line,
                format!(
                    "{} {t} is at the delegation {k}. and would never be served; remove it",
                    rec.name
                ),
            ));
        }
        if k.starts_with("*.") && t == RecordType::NS {
            return Err((
                line,
                "a wildcard delegation is not served (RFC 4592 §4.2)".into(),
            ));
        }
        if let Some((ttl0, line0)) = sets.get(&(k.clone(), t)) {
            if *ttl0 != rec.ttl {
                return Err((
                    line,
                    format!(
                        "TTL {} differs from the {} of the same set on line {line0} (RFC 2181 §5.2)",
                        rec.ttl, ttl0
                    ),
                ));
            }
        } else {
            sets.insert((k.clone(), t), (rec.ttl, line));
        }
    }
    // A CNAME owner has nothing else (RFC 1034 §3.6.2), and one CNAME only.
    let mut cnames: std::collections::HashMap<&str, &Read> = std::collections::HashMap::new();
    let with_data: std::collections::HashSet<&str> = sets
        .keys()
        .filter(|(_, t)| *t != RecordType::CNAME)
        .map(|(k, _)| k.as_str())
        .collect();
    for r in records {
        if r.record.record_type() != RecordType::CNAME {
            continue;
        }
        let k = sets
            .get_key_value(&(key(&r.record.name), RecordType::CNAME))
            .map(|((k, _), _)| k.as_str())
            .unwrap_or_default();
        let conflict = k == apex_key
            || cnames
                .get(k)
                .is_some_and(|o| o.record.data != r.record.data)
            || with_data.contains(k);
        if conflict {
            return Err((
                r.line,
                format!(
                    "{} has a CNAME and other data (RFC 1034 §3.6.2); keep one",
                    r.record.name
                ),
            ));
        }
        cnames.insert(k, r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RData;

    fn one(text: &str) -> Vec<String> {
        read(text.as_bytes())
            .expect("reads")
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r.record.name,
                    r.record.ttl,
                    r.record.record_type(),
                    r.record.data
                )
            })
            .collect()
    }

    fn err(text: &str) -> (usize, String) {
        read(text.as_bytes()).expect_err("refused")
    }

    #[test]
    fn quotes_comments_parentheses_and_escapes_read_as_rfc_1035_says() {
        let got = one(concat!(
            "$ORIGIN lab.test.\n$TTL 300\n",
            "@ IN TXT \"v=DKIM1; k=rsa; p=AB\" ; a comment\n",
            "s1 IN TXT ( \"part one;\"\n",
            "   \"part two\" ) ; closes here\n",
            "one 60 IN TXT ( \"x\" )\n",
            "two IN A 127.0.0.1\n",
            "esc IN TXT \"a\\\"b\\059c\\\\d\" plain\\032word\n",
            "  IN A 127.0.0.2\n",
            "IN60 A 127.0.0.3\n",
        ));
        assert_eq!(
            got,
            [
                "lab.test. 300 TXT v=DKIM1; k=rsa; p=AB",
                "s1.lab.test. 300 TXT part one;part two",
                "one.lab.test. 60 TXT x",
                "two.lab.test. 300 A 127.0.0.1",
                "esc.lab.test. 300 TXT a\"b;c\\dplain word",
                "esc.lab.test. 300 A 127.0.0.2",
                "IN60.lab.test. 300 A 127.0.0.3",
            ]
        );
        let r = read(b"$ORIGIN t.\n$TTL 1\n@ TXT \"a\" \"b\"\n").expect("reads");
        let RData::TXT(txt) = &r[0].record.data else {
            panic!("TXT")
        };
        assert_eq!(txt.txt_data.len(), 2, "two strings stay two");
    }

    #[test]
    fn omitted_ttl_class_and_owner_and_ttl_units() {
        let got =
            one("$ORIGIN lab.test.\nw 1h IN A 127.0.0.1\n  A 127.0.0.2\nx IN 2d A 127.0.0.3\n");
        assert_eq!(
            got,
            [
                "w.lab.test. 3600 A 127.0.0.1",
                "w.lab.test. 3600 A 127.0.0.2",
                "x.lab.test. 172800 A 127.0.0.3"
            ]
        );
    }

    #[test]
    fn what_cannot_be_served_right_is_refused_with_its_line() {
        for (text, line, why) in [
            ("$ORIGIN t.\n$TTL 1\n@ TXT \"open\n", 3, "not closed"),
            ("$ORIGIN t.\n$TTL 1\n@ TXT ( \"a\"\n\n", 3, "never closed"),
            ("$ORIGIN t.\n$TTL 1\n@ TXT \"a\" )\n", 3, "without"),
            ("$TTL 1\nx A 127.0.0.1\n", 2, "no $ORIGIN"),
            ("$ORIGIN t.\nx A 127.0.0.1\n", 2, "no TTL"),
            ("$ORIGIN t.\n$TTL 1\nx CH A 127.0.0.1\n", 3, "only IN"),
            ("$ORIGIN t.\n$TTL 1\n$INCLUDE other\n", 3, "not read"),
            ("$ORIGIN t.\n$TTL 1\nx TXT \"\\999\"\n", 3, "\\DDD"),
            ("$ORIGIN t.\n$TTL 1\nx A 300.0.0.1\n", 3, "not an IPv4"),
            ("$ORIGIN t.\n$TTL 1\nx BOGUS 1\n", 3, "type"),
        ] {
            let (l, w) = err(text);
            assert!(l == line && w.contains(why), "{text:?}: got {l}: {w}");
        }
    }

    #[test]
    fn a_zone_is_checked_across_records() {
        let load = |text: &str| {
            Authority::default()
                .load_zone_file(text.as_bytes(), "z")
                .map(|_| ())
        };
        let head = "$ORIGIN lab.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n";
        assert_eq!(load(&format!("{head}@ MX 10 mx\nmx A 127.0.0.1\n")), Ok(()));
        // Glue: the addresses of the names the NS records name (in any case).
        assert_eq!(
            load(&format!(
                "{head}c NS NS.c\nns.c A 127.0.0.1\nns.c AAAA ::1\n"
            )),
            Ok(())
        );
        for (body, why) in [
            (
                "www.other.test. A 127.0.0.1\n",
                "z:4: www.other.test. is outside",
            ),
            (
                "c NS ns.c\nns.c A 127.0.0.1\nx.c TXT \"y\"\n",
                "z:6: x.c.lab.test. TXT is below",
            ),
            // Issue 40: an address below the cut that no NS names was loaded, never served.
            (
                "c NS ns.c\nns.c A 127.0.0.1\nwww.c A 127.0.0.2\n",
                "z:6: www.c.lab.test. A is below the delegation at c.lab.test. and would never be served; an address there is served only as glue of a name an NS record names, and none names it; remove it",
            ),
            (
                "c NS ns.c\nns.c AAAA ::1\nmail.c AAAA ::2\n",
                "z:6: mail.c.lab.test. AAAA is below",
            ),
            ("c CNAME x\nc A 127.0.0.1\n", "CNAME and other data"),
            (
                "a 60 A 127.0.0.1\na 61 A 127.0.0.2\n",
                "z:5: TTL 61 differs",
            ),
            ("@ SOA ns h 1 2 3 4 5\n", "second SOA"),
        ] {
            let e = load(&format!("{head}{body}")).expect_err(body);
            assert!(
                e.starts_with("--zone-file z:") && e.contains(why),
                "{body:?}: {e}"
            );
        }
        let e = load("$ORIGIN t.\n$TTL 1\nx A 127.0.0.1\n").expect_err("no SOA");
        assert!(e.starts_with("--zone-file z: no SOA record"), "{e}");
    }

    /// What the fuzz target checks, over random edits of a zone with every feature read:
    /// no panic, a one-line refusal naming the file, and a loaded zone answering for
    /// every record it read.
    #[test]
    fn edited_zones_load_or_are_refused_in_one_line() {
        let zone: &[u8] = b"$ORIGIN lab.test.\n$TTL 1h\n@ SOA ns h ( 1 2 3 4 5 )\n@ MX 10 mx\nmx A 127.0.0.1\n  AAAA ::1\n*.w TXT \"a;b\" c\\065\nc CNAME mx\nd NS ns.d\nns.d A 127.0.0.2\n_25._tcp TLSA 3 1 1 abcd\n@ CAA 0 issue \"ca\"\nx TYPE9999 \\# 2 abcd\n";
        let specials = b";()\"\\ \n\t.@$*0123456789";
        let mut rng = fastrand::Rng::with_seed(26);
        for _ in 0..20_000 {
            let mut t = zone.to_vec();
            for _ in 0..rng.usize(1..4) {
                let i = rng.usize(..t.len());
                match rng.u8(..3) {
                    0 => t[i] = specials[rng.usize(..specials.len())],
                    1 => t.insert(i, specials[rng.usize(..specials.len())]),
                    _ => {
                        t.remove(i);
                    }
                }
            }
            let mut a = Authority::default();
            match a.load_zone_file(&t, "f") {
                Err(e) => assert!(e.starts_with("--zone-file f") && !e.contains('\n'), "{e}"),
                Ok(_) => {
                    for r in read(&t).expect("reads") {
                        let f =
                            a.resolve(&r.record.name, &key(&r.record.name), r.record.record_type());
                        assert_ne!(
                            f.rcode,
                            hickory_proto::op::ResponseCode::Refused,
                            "{} {} in {:?}",
                            r.record.name,
                            r.record.record_type(),
                            String::from_utf8_lossy(&t)
                        );
                    }
                }
            }
        }
    }
}
