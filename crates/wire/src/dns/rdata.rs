//! A record's type and RDATA as a zone file writes them (RFC 1035 §5.1 and each type's
//! RFC): the types an MTA asks for, and any other in RFC 3597's generic form
//! (`TYPE65534 \# 3 abcdef`). A type it does not read is refused, not guessed at.

use std::str::FromStr;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, NULL, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, RecordType};

use super::token::{Token, name, ttl, unescape};

/// Types read in their usual text form.
const READ: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::NS,
    RecordType::CNAME,
    RecordType::SOA,
    RecordType::PTR,
    RecordType::MX,
    RecordType::TXT,
    RecordType::SRV,
    RecordType::CAA,
    RecordType::TLSA,
];

/// Types whose meaning the server would have to act on (DNSSEC, DNAME) or that are no
/// data at all: refused even in the generic form.
const REFUSED: &[u16] = &[
    39, 41, 43, 46, 47, 48, 50, 51, 249, 250, 251, 252, 253, 254, 255,
];

fn text(t: &Token) -> String {
    String::from_utf8_lossy(&t.text).into_owned()
}

/// The record type a token names: a mnemonic or `TYPEn`.
pub fn record_type(t: &Token) -> Result<RecordType, String> {
    let s = text(t).to_ascii_uppercase();
    let rt = match s.strip_prefix("TYPE").and_then(|n| n.parse::<u16>().ok()) {
        Some(n) => RecordType::from(n),
        None => RecordType::from_str(&s)
            .map_err(|_| format!("{s:?} is not a record type (or the TTL or class is misspelt)"))?,
    };
    if REFUSED.contains(&u16::from(rt)) {
        return Err(format!(
            "type {rt} is not served by mailbench (no DNSSEC, DNAME or meta types)"
        ));
    }
    Ok(rt)
}

/// The RDATA of a record of type `rt` from its tokens.
pub fn parse(rt: RecordType, t: &[Token], origin: Option<&Name>) -> Result<RData, String> {
    if t.first().is_some_and(|f| !f.quoted && f.text == b"\\#") {
        if READ.contains(&rt) {
            return Err(format!(
                "write {rt} in its usual form, not RFC 3597's \\# form"
            ));
        }
        let bytes = generic(&t[1..])?;
        let rdata = if bytes.is_empty() {
            NULL::new()
        } else {
            NULL::with(bytes)
        };
        return Ok(RData::Unknown { code: rt, rdata });
    }
    if !READ.contains(&rt) {
        return Err(format!(
            "type {rt} is not read in its usual form; write it as TYPE{} \\# LENGTH HEX (RFC 3597)",
            u16::from(rt)
        ));
    }
    let want = |n: usize| -> Result<(), String> {
        if t.len() == n {
            Ok(())
        } else {
            Err(format!("{rt} takes {n} fields, got {}", t.len()))
        }
    };
    let num = |i: usize| -> Result<u16, String> {
        let s = text(&t[i]);
        s.parse::<u16>()
            .map_err(|_| format!("{rt}: {s:?} is not a number from 0 to 65535"))
    };
    let host = |i: usize| name(&t[i], origin).map_err(|e| format!("{rt}: {e}"));
    Ok(match rt {
        RecordType::A => {
            want(1)?;
            let s = text(&t[0]);
            RData::A(A(s
                .parse()
                .map_err(|_| format!("A: {s:?} is not an IPv4 address"))?))
        }
        RecordType::AAAA => {
            want(1)?;
            let s = text(&t[0]);
            RData::AAAA(AAAA(
                s.parse()
                    .map_err(|_| format!("AAAA: {s:?} is not an IPv6 address"))?,
            ))
        }
        RecordType::NS => {
            want(1)?;
            RData::NS(NS(host(0)?))
        }
        RecordType::CNAME => {
            want(1)?;
            RData::CNAME(CNAME(host(0)?))
        }
        RecordType::PTR => {
            want(1)?;
            RData::PTR(PTR(host(0)?))
        }
        RecordType::MX => {
            want(2)?;
            RData::MX(MX::new(num(0)?, host(1)?))
        }
        RecordType::SRV => {
            want(4)?;
            RData::SRV(SRV::new(num(0)?, num(1)?, num(2)?, host(3)?))
        }
        RecordType::SOA => {
            want(7)?;
            let serial = text(&t[2])
                .parse::<u32>()
                .map_err(|_| format!("SOA: serial {:?} is not a number", text(&t[2])))?;
            let time = |i: usize| {
                ttl(&t[i]).ok_or_else(|| format!("SOA: {:?} is not a time", text(&t[i])))
            };
            RData::SOA(SOA::new(
                host(0)?,
                host(1)?,
                serial,
                time(3)? as i32,
                time(4)? as i32,
                time(5)? as i32,
                time(6)?,
            ))
        }
        RecordType::TXT => {
            if t.is_empty() {
                return Err("TXT needs at least one string".into());
            }
            let strings = t
                .iter()
                .map(|s| unescape(&s.text))
                .collect::<Result<Vec<_>, _>>()?;
            if strings.iter().any(|s| s.len() > 255) {
                return Err(
                    "a TXT string is at most 255 bytes; split it into several quoted strings"
                        .into(),
                );
            }
            RData::TXT(TXT::from_bytes(strings.iter().map(Vec::as_slice).collect()))
        }
        RecordType::CAA => {
            want(3)?;
            let flags = text(&t[0])
                .parse::<u8>()
                .map_err(|_| format!("CAA: flags {:?} is not 0-255", text(&t[0])))?;
            let tag = unescape(&t[1].text)?;
            if tag.is_empty() || tag.len() > 15 || !tag.iter().all(u8::is_ascii_alphanumeric) {
                return Err(format!(
                    "CAA: tag {:?} is not 1-15 letters or digits",
                    text(&t[1])
                ));
            }
            let value = unescape(&t[2].text)?;
            let mut w = vec![flags, tag.len() as u8];
            w.extend(tag);
            w.extend(value);
            RData::Unknown {
                code: rt,
                rdata: NULL::with(w),
            }
        }
        RecordType::TLSA => {
            if t.len() < 4 {
                return Err("TLSA takes usage, selector, matching type and hex data".into());
            }
            let mut w = Vec::new();
            for f in &t[..3] {
                w.push(
                    text(f)
                        .parse::<u8>()
                        .map_err(|_| format!("TLSA: {:?} is not 0-255", text(f)))?,
                );
            }
            w.extend(hex(&t[3..])?);
            RData::Unknown {
                code: rt,
                rdata: NULL::with(w),
            }
        }
        _ => return Err(format!("type {rt} is not read")),
    })
}

/// Hex digits over one or more tokens.
fn hex(t: &[Token]) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = t.iter().flat_map(|x| x.text.iter().copied()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err("an odd number of hex digits".into());
    }
    digits
        .chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| format!("{:?} is not hex", String::from_utf8_lossy(p)))
        })
        .collect()
}

/// RFC 3597's `LENGTH HEX…`, the length checked.
fn generic(t: &[Token]) -> Result<Vec<u8>, String> {
    let (len, rest) = t.split_first().ok_or("\\# needs a length and hex data")?;
    let len: usize = text(len)
        .parse()
        .map_err(|_| format!("\\# length {:?} is not a number", text(len)))?;
    let bytes = if rest.is_empty() {
        Vec::new()
    } else {
        hex(rest)?
    };
    if bytes.len() != len || len > 65_535 {
        return Err(format!("\\# says {len} bytes, the hex has {}", bytes.len()));
    }
    Ok(bytes)
}
