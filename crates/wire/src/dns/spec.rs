//! Synthetic zones from a compact spec: `--domains 'd{1..254}.example.test'` becomes 254
//! zones, each with MX records pointing at hosts whose A/AAAA records are the addresses
//! given (spread over the domains, so several sinks share the mail), an SPF TXT record,
//! optionally a DKIM key TXT record, and the reverse (PTR) zones of those addresses.

use std::net::IpAddr;

use hickory_proto::rr::rdata::{A, AAAA, MX, NS, PTR, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record};

use super::zone::Authority;

/// Most synthetic domains one spec may make (each costs a few hundred bytes).
pub const MAX_DOMAINS: usize = 1_000_000;

/// What `--domains` and its companions ask for.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Synthetic {
    /// The domains, expanded.
    pub domains: Vec<String>,
    /// MX records per domain (preferences 10, 20, ...).
    pub mx_per_domain: u8,
    /// The MX hosts' addresses: domain k's j-th MX host gets `addresses[(k + j) % len]`.
    pub addresses: Vec<IpAddr>,
    /// `(selector, record text)`: a DKIM key TXT record at `SELECTOR._domainkey.DOMAIN`.
    pub dkim: Option<(String, String)>,
    /// The TTL of every record, seconds: what lets a resolver cache.
    pub ttl: u32,
    /// No MX records: each domain's own name has the A (or AAAA) record instead, so an MTA
    /// delivers to it as RFC 5321 §5.1's implicit MX (seed 002's A-only zones).
    pub no_mx: bool,
}

/// Expands a domain spec: comma-separated names, each with at most one `{A..B}` range
/// (`d{1..254}.example.test`), or a bare count N for `d{0..N-1}.example.test` (so that an
/// address template's `{mod:N}` walks them all). The error says what to write instead.
pub fn expand_domains(spec: &str) -> Result<Vec<String>, String> {
    let bad = |why: String| {
        format!(
            "--domains {spec:?}: {why}; write a count (50) or names with one range each, e.g. 'd{{1..254}}.example.test,other.test'"
        )
    };
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Ok(n) = item.parse::<usize>() {
            if n == 0 {
                return Err(bad("a count must be above zero".into()));
            }
            expand_range("d", 0, n as u64 - 1, ".example.test", &mut out, &bad)?;
            continue;
        }
        match item.split_once('{') {
            None => out.push(checked(item).map_err(bad)?),
            Some((head, rest)) => {
                let (range, tail) = rest
                    .split_once('}')
                    .ok_or_else(|| bad(format!("unclosed '{{' in {item:?}")))?;
                let (lo, hi) = range
                    .split_once("..")
                    .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
                    .filter(|(a, b)| a <= b)
                    .ok_or_else(|| bad(format!("{{{range}}} is not a range like {{1..254}}")))?;
                if tail.contains('{') {
                    return Err(bad(format!("{item:?} has more than one range")));
                }
                expand_range(head, lo, hi, tail, &mut out, &bad)?;
            }
        }
        if out.len() > MAX_DOMAINS {
            return Err(bad(format!("more than {MAX_DOMAINS} domains")));
        }
    }
    if out.is_empty() {
        return Err(bad("no domain".into()));
    }
    Ok(out)
}

fn expand_range(
    head: &str,
    lo: u64,
    hi: u64,
    tail: &str,
    out: &mut Vec<String>,
    bad: &dyn Fn(String) -> String,
) -> Result<(), String> {
    if hi - lo >= MAX_DOMAINS as u64 {
        return Err(bad(format!("more than {MAX_DOMAINS} domains")));
    }
    for i in lo..=hi {
        out.push(checked(&format!("{head}{i}{tail}")).map_err(bad)?);
    }
    Ok(())
}

/// A domain name in lower case, checked: labels of letters, digits and hyphens, at least
/// two of them.
fn checked(d: &str) -> Result<String, String> {
    let d = d.trim_end_matches('.').to_ascii_lowercase();
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if d.len() > 240 || d.split('.').count() < 2 || !d.split('.').all(ok_label) {
        return Err(format!("{d:?} is not a domain name"));
    }
    Ok(d)
}

fn name(s: &str) -> Result<Name, String> {
    Name::from_ascii(format!("{s}.")).map_err(|e| format!("{s:?} is not a domain name: {e}"))
}

/// The reverse-lookup name of an address and the zone holding it (the /24 of IPv4, the
/// /64 of IPv6).
pub fn reverse(ip: IpAddr) -> (String, String) {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0]),
                format!("{}.{}.{}.in-addr.arpa", o[2], o[1], o[0]),
            )
        }
        IpAddr::V6(v6) => {
            let nibbles: Vec<String> = v6
                .octets()
                .iter()
                .rev()
                .flat_map(|b| [b & 0xf, b >> 4])
                .map(|n| format!("{n:x}"))
                .collect();
            (
                format!("{}.ip6.arpa", nibbles.join(".")),
                format!("{}.ip6.arpa", nibbles[16..].join(".")),
            )
        }
    }
}

/// TXT data in strings of at most 255 bytes (a DKIM key is longer than one).
fn txt(text: &str) -> TXT {
    let chunks: Vec<String> = text
        .as_bytes()
        .chunks(255)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    TXT::new(chunks)
}

/// The A (IPv4) or AAAA (IPv6) data of an address.
fn address(ip: IpAddr) -> RData {
    match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    }
}

fn soa(apex: &Name, ttl: u32) -> Result<Record, String> {
    let ns = name(&format!("ns.{}", super::zone::key(apex)))?;
    let mbox = name(&format!("hostmaster.{}", super::zone::key(apex)))?;
    Ok(Record::from_rdata(
        apex.clone(),
        ttl,
        RData::SOA(SOA::new(ns, mbox, 1, 3600, 600, 86400, ttl)),
    ))
}

impl Synthetic {
    /// Adds every zone of the spec to `auth`.
    pub fn build(&self, auth: &mut Authority) -> Result<(), String> {
        if self.addresses.is_empty() {
            return Err("--mx-address: give at least one address for the MX hosts".into());
        }
        let ttl = self.ttl;
        let mut ptr_of: Vec<(IpAddr, Name)> = Vec::new();
        for (k, d) in self.domains.iter().enumerate() {
            let apex = name(d)?;
            auth.add_zone(soa(&apex, ttl)?)
                .map_err(|e| format!("--domains: {e}"))?;
            auth.add(Record::from_rdata(
                apex.clone(),
                ttl,
                RData::NS(NS(name(&format!("ns.{d}"))?)),
            ));
            if self.no_mx {
                let ip = self.addresses[k % self.addresses.len()];
                auth.add(Record::from_rdata(apex.clone(), ttl, address(ip)));
                if !ptr_of.iter().any(|(a, _)| *a == ip) {
                    ptr_of.push((ip, apex.clone()));
                }
            }
            let mx_hosts = if self.no_mx {
                0
            } else {
                usize::from(self.mx_per_domain.max(1))
            };
            for j in 0..mx_hosts {
                let host = name(&format!("mx{}.{d}", j + 1))?;
                let pref = 10 * (j as u16 + 1);
                auth.add(Record::from_rdata(
                    apex.clone(),
                    ttl,
                    RData::MX(MX::new(pref, host.clone())),
                ));
                let ip = self.addresses[(k + j) % self.addresses.len()];
                auth.add(Record::from_rdata(host.clone(), ttl, address(ip)));
                if !ptr_of.iter().any(|(a, _)| *a == ip) {
                    ptr_of.push((ip, host));
                }
            }
            auth.add(Record::from_rdata(
                apex.clone(),
                ttl,
                RData::TXT(txt("v=spf1 ip4:127.0.0.0/8 ip6:::1/128 -all")),
            ));
            if let Some((selector, record)) = &self.dkim {
                auth.add(Record::from_rdata(
                    name(&format!("{selector}._domainkey.{d}"))?,
                    ttl,
                    RData::TXT(txt(record)),
                ));
            }
        }
        for (ip, host) in ptr_of {
            let (rname, zone) = reverse(ip);
            let zone = name(&zone)?;
            if !auth.is_zone(&zone) {
                auth.add_zone(soa(&zone, ttl)?)?;
            }
            auth.add(Record::from_rdata(
                name(&rname)?,
                ttl,
                RData::PTR(PTR(host)),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::zone::key;
    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::RecordType;

    #[test]
    fn specs_expand_to_the_names_asked_for() {
        let d = expand_domains("d{1..254}.example.test").expect("range");
        assert_eq!(d.len(), 254);
        assert_eq!(
            (d[0].as_str(), d[253].as_str()),
            ("d1.example.test", "d254.example.test")
        );
        let d = expand_domains("3, Other.Test").expect("count and a name");
        assert_eq!(
            d,
            [
                "d0.example.test",
                "d1.example.test",
                "d2.example.test",
                "other.test"
            ]
        );
    }

    #[test]
    fn bad_specs_say_what_to_write() {
        for (spec, why) in [
            ("d{5..1}.test", "is not a range"),
            ("d{1..2.test", "unclosed"),
            ("a{1..2}b{1..2}.test", "more than one range"),
            ("x", "is not a domain name"),
            ("bad_label!.test", "is not a domain name"),
            ("0", "above zero"),
            ("d{0..2000000}.test", "more than"),
            ("", "no domain"),
        ] {
            let e = expand_domains(spec).expect_err(spec);
            assert!(
                e.starts_with("--domains ") && e.contains(why),
                "{spec}: {e}"
            );
        }
    }

    #[test]
    fn zones_hold_mx_a_aaaa_txt_dkim_and_ptr() {
        let s = Synthetic {
            domains: expand_domains("2").expect("spec"),
            mx_per_domain: 2,
            addresses: vec!["127.0.2.1".parse().expect("ip"), "::1".parse().expect("ip")],
            dkim: Some(("sel".into(), "v=DKIM1; k=ed25519; p=AAAA".into())),
            ttl: 60,
            no_mx: false,
        };
        let mut a = Authority::default();
        s.build(&mut a).expect("build");
        let ask = |q: &str, t| {
            let n = Name::from_ascii(q).expect("name");
            a.resolve(&n, &key(&n), t)
        };
        assert_eq!(ask("d1.example.test.", RecordType::MX).answers.len(), 2);
        // Domain 1's first MX host takes the second address: domains spread over sinks.
        let v6 = ask("mx1.d1.example.test.", RecordType::AAAA).answers;
        assert_eq!(v6[0].data, RData::AAAA(AAAA("::1".parse().expect("ip"))));
        assert_eq!(
            ask("sel._domainkey.d0.example.test.", RecordType::TXT)
                .answers
                .len(),
            1
        );
        let ent = ask("_domainkey.d0.example.test.", RecordType::TXT);
        assert_eq!(
            (ent.rcode, ent.answers.len(), ent.authorities.len()),
            (ResponseCode::NoError, 0, 1),
            "_domainkey is an empty non-terminal: NODATA, not NXDOMAIN"
        );
        let ptr = ask("1.2.0.127.in-addr.arpa.", RecordType::PTR).answers;
        assert_eq!(ptr[0].data.to_string(), "mx1.d0.example.test.");
        assert_eq!(
            ask("9.2.0.127.in-addr.arpa.", RecordType::PTR).rcode,
            ResponseCode::NXDomain
        );
        let (v6name, _) = reverse("::1".parse().expect("ip"));
        assert_eq!(ask(&format!("{v6name}."), RecordType::PTR).answers.len(), 1);
        assert_eq!(a.zone_count(), 2 + 2, "two domains and two reverse zones");
    }

    #[test]
    fn without_mx_each_domain_has_its_own_address() {
        let s = Synthetic {
            domains: expand_domains("3").expect("spec"),
            mx_per_domain: 2,
            addresses: vec![
                "127.0.2.1".parse().expect("ip"),
                "127.0.2.2".parse().expect("ip"),
            ],
            dkim: None,
            ttl: 60,
            no_mx: true,
        };
        let mut a = Authority::default();
        s.build(&mut a).expect("build");
        let ask = |q: &str, t| {
            let n = Name::from_ascii(q).expect("name");
            a.resolve(&n, &key(&n), t)
        };
        let mx = ask("d1.example.test.", RecordType::MX);
        assert_eq!(
            (mx.rcode, mx.answers.len()),
            (ResponseCode::NoError, 0),
            "no MX: NODATA"
        );
        let got: Vec<String> = ["d0", "d1", "d2"]
            .iter()
            .map(|d| {
                ask(&format!("{d}.example.test."), RecordType::A).answers[0]
                    .data
                    .to_string()
            })
            .collect();
        assert_eq!(
            got,
            ["127.0.2.1", "127.0.2.2", "127.0.2.1"],
            "spread over the addresses"
        );
        assert_eq!(
            ask("mx1.d0.example.test.", RecordType::A).rcode,
            ResponseCode::NXDomain,
            "no MX hosts either"
        );
    }
}
