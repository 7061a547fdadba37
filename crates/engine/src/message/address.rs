//! Address templates: `--to 'user{seq}@d{mod:1000}.example.test'` renders a distinct
//! address per message (and per recipient), so thousands of domains can be addressed.
//!
//! Placeholders: `{seq}` message sequence number, `{rcpt}` recipient index within the
//! message, `{mod:N}` sequence number modulo N, `{rand:N}` a random number below N.

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Seq,
    Rcpt,
    Mod(u64),
    Rand(u64),
}

/// A parsed address template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrTemplate {
    pieces: Vec<Piece>,
}

impl AddrTemplate {
    /// Parses a template; the error names the bad placeholder.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Lit(rest[..open].to_string()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("address template {s:?} has an unclosed '{{'"))?
                + open;
            let name = &rest[open + 1..close];
            let number = |arg: &str| {
                arg.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("address template {s:?}: {{{name}}} needs a positive number")
                })
            };
            pieces.push(match name.split_once(':') {
                None if name == "seq" => Piece::Seq,
                None if name == "rcpt" => Piece::Rcpt,
                Some(("mod", n)) => Piece::Mod(number(n)?),
                Some(("rand", n)) => Piece::Rand(number(n)?),
                _ => {
                    return Err(format!(
                        "address template {s:?}: unknown placeholder {{{name}}}; use {{seq}}, {{rcpt}}, {{mod:N}} or {{rand:N}}"
                    ));
                }
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Lit(rest.to_string()));
        }
        let t = AddrTemplate { pieces };
        let sample = t.render(0, 0, &mut fastrand::Rng::with_seed(1));
        if !super::users::valid_address(&sample) {
            return Err(format!(
                "address template {s:?} renders {sample:?}, which is not local@domain"
            ));
        }
        Ok(t)
    }

    /// Whether it draws random numbers (`{rand:N}`): its addresses cannot be listed ahead
    /// of a run (a lab's recipient table needs them).
    pub fn is_random(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Rand(_)))
    }

    /// Renders the address for message `seq`, recipient `rcpt`.
    pub fn render(&self, seq: u64, rcpt: u32, rng: &mut fastrand::Rng) -> String {
        use std::fmt::Write as _;
        let mut out = String::with_capacity(48);
        for p in &self.pieces {
            let _ = match p {
                Piece::Lit(s) => {
                    out.push_str(s);
                    Ok(())
                }
                Piece::Seq => write!(out, "{seq}"),
                Piece::Rcpt => write!(out, "{rcpt}"),
                Piece::Mod(n) => write!(out, "{}", seq % n),
                Piece::Rand(n) => write!(out, "{}", rng.u64(0..*n)),
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_render() {
        let t = AddrTemplate::parse("u{seq}.{rcpt}@d{mod:3}.example.test").expect("valid");
        let mut rng = fastrand::Rng::with_seed(7);
        assert_eq!(t.render(7, 2, &mut rng), "u7.2@d1.example.test");
        let r = AddrTemplate::parse("x@d{rand:10}.test").expect("valid");
        let a = r.render(0, 0, &mut rng);
        assert!(a.starts_with("x@d") && a.ends_with(".test"));
        let plain = AddrTemplate::parse("plain@example.com").expect("valid");
        assert_eq!(plain.render(9, 9, &mut rng), "plain@example.com");
    }

    #[test]
    fn bad_templates_are_explained() {
        for bad in ["u{seq@x", "u{foo}@x", "u{mod:0}@x", "nodomain"] {
            assert!(AddrTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
