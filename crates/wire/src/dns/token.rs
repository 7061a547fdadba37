//! The words of a zone file as RFC 1035 §5.1 writes them, read alike by the file's
//! reader (`zonefile`) and by each record type's RDATA (`rdata`): a token (escapes kept,
//! quoted or not), `\X` and `\DDD` escapes, domain names (`@`, absolute, relative to the
//! origin) and TTLs (seconds or BIND's units).

use hickory_proto::rr::Name;

/// One token of a record: its text as written (escapes kept), and whether it was quoted.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The characters between separators (or between the quotes), escapes undecoded.
    pub text: Vec<u8>,
    /// It was a "quoted string".
    pub quoted: bool,
}

/// Decodes `\X` and `\DDD` escapes into bytes.
pub fn unescape(t: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        if t[i] != b'\\' {
            out.push(t[i]);
            i += 1;
            continue;
        }
        match t.get(i + 1..i + 4) {
            Some(d) if d[0].is_ascii_digit() => {
                if !d.iter().all(u8::is_ascii_digit) {
                    return Err(bad_escape(t));
                }
                let v = d.iter().fold(0u32, |v, b| v * 10 + u32::from(b - b'0'));
                out.push(u8::try_from(v).map_err(|_| bad_escape(t))?);
                i += 4;
            }
            _ => match t.get(i + 1) {
                Some(b) if b.is_ascii_digit() => return Err(bad_escape(t)),
                Some(b) => {
                    out.push(*b);
                    i += 2;
                }
                None => return Err(bad_escape(t)),
            },
        }
    }
    Ok(out)
}

fn bad_escape(t: &[u8]) -> String {
    format!(
        "{:?}: a '\\' escape is \\X or three digits \\DDD up to 255",
        String::from_utf8_lossy(t)
    )
}

/// A domain name as written: `@`, absolute (final dot), or relative to `origin`.
pub fn name(t: &Token, origin: Option<&Name>) -> Result<Name, String> {
    let shown = || String::from_utf8_lossy(&t.text).into_owned();
    if t.quoted {
        return Err(format!("{:?}: a domain name is not quoted", shown()));
    }
    if t.text == b"@" {
        return origin
            .cloned()
            .ok_or_else(|| "'@' needs $ORIGIN first".to_string());
    }
    if t.text == b"." {
        return Ok(Name::root());
    }
    // Split at unescaped dots.
    let (mut labels, mut cur, mut absolute) = (Vec::<Vec<u8>>::new(), Vec::new(), false);
    let b = &t.text;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                cur.extend_from_slice(&b[i..(i + 2).min(b.len())]);
                i += 2;
            }
            b'.' => {
                if cur.is_empty() {
                    return Err(format!("{:?}: an empty label", shown()));
                }
                labels.push(label(&cur, &shown)?);
                cur.clear();
                i += 1;
                absolute = i == b.len();
            }
            c => {
                cur.push(c);
                i += 1;
            }
        }
    }
    if !cur.is_empty() {
        labels.push(label(&cur, &shown)?);
    }
    let mut n = Name::from_labels(labels).map_err(|e| format!("{:?}: {e}", shown()))?;
    if !absolute {
        let o = origin.ok_or_else(|| {
            format!(
                "{:?} is relative and there is no $ORIGIN; add $ORIGIN or a final dot",
                shown()
            )
        })?;
        n = n
            .append_domain(o)
            .map_err(|e| format!("{:?}: {e}", shown()))?;
    }
    if n.len() > 255 {
        return Err(format!("{:?}: a name is at most 255 bytes", shown()));
    }
    Ok(n)
}

/// One label, escapes decoded.
fn label(raw: &[u8], shown: &dyn Fn() -> String) -> Result<Vec<u8>, String> {
    let l = unescape(raw)?;
    if l.len() > 63 {
        return Err(format!("{:?}: a label is at most 63 bytes", shown()));
    }
    Ok(l)
}

/// A TTL: seconds, or BIND's units (`1h30m`, `2d`, `1w`); at most 2^31 - 1 (RFC 2181 §8).
pub fn ttl(t: &Token) -> Option<u32> {
    if t.quoted || t.text.is_empty() {
        return None;
    }
    let s = std::str::from_utf8(&t.text).ok()?;
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u32>().ok().filter(|v| *v <= i32::MAX as u32);
    }
    let (mut total, mut num) = (0u64, None::<u64>);
    for b in s.bytes() {
        if b.is_ascii_digit() {
            num = Some(
                num.unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(b - b'0'))?,
            );
            continue;
        }
        let unit = match b.to_ascii_lowercase() {
            b's' => 1,
            b'm' => 60,
            b'h' => 3600,
            b'd' => 86400,
            b'w' => 604_800,
            _ => return None,
        };
        total = total.checked_add(num.take()?.checked_mul(unit)?)?;
    }
    if let Some(n) = num {
        total = total.checked_add(n)?;
    }
    u32::try_from(total).ok().filter(|v| *v <= i32::MAX as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ttl_of(s: &str) -> Option<u32> {
        ttl(&Token {
            text: s.as_bytes().to_vec(),
            quoted: false,
        })
    }

    #[test]
    fn a_ttl_in_units_sums_its_parts_and_refuses_what_overflows() {
        for (text, want) in [
            ("1h30m", Some(5400)),
            ("2d", Some(172_800)),
            ("1w1s", Some(604_801)),
            ("2147483647", Some(i32::MAX as u32)),
            ("2147483648", None),
            ("68y", None),
            // Digits past u64 before a unit, and after the last one: refused, not a panic.
            ("18446744073709551616S", None),
            ("1s18446744073709551616", None),
        ] {
            assert_eq!(ttl_of(text), want, "TTL {text:?}");
        }
    }
}
