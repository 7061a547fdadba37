//! DNS fault rules, like the sink's: `TYPE[@PATTERN]:ACTION[:PERCENT%][:until=DUR]`, e.g.
//! `mx:delay=200ms:10%`, `a:servfail:5%`, `any@d1*.example.test:drop`,
//! `mx:servfail:100%:until=5s` (lifted after the server's first five seconds).
//! Each matching rule draws on its own; delays add up and the first other action that
//! fires decides the answer.

use std::time::Duration;

use serde::Serialize;

/// The classes of question the server counts and rules name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QClass {
    /// IPv4 address.
    A,
    /// IPv6 address.
    Aaaa,
    /// Mail exchanger.
    Mx,
    /// Text (SPF, DKIM keys).
    Txt,
    /// Reverse lookup.
    Ptr,
    /// Anything else (SOA, NS, ANY, ...).
    Other,
}

impl QClass {
    /// Every class, in report order.
    pub const ALL: [QClass; 6] = [
        QClass::A,
        QClass::Aaaa,
        QClass::Mx,
        QClass::Txt,
        QClass::Ptr,
        QClass::Other,
    ];

    /// Stable names, in [`QClass::ALL`]'s order: the steps of a DNS run's latency table
    /// (the results' `stats::dns::STEPS`; the engine's `dns` tests that the two agree).
    pub const NAMES: &'static [&'static str] = &["a", "aaaa", "mx", "txt", "ptr", "other"];

    /// The class of a record type.
    pub fn of(t: hickory_proto::rr::RecordType) -> QClass {
        use hickory_proto::rr::RecordType as T;
        match t {
            T::A => QClass::A,
            T::AAAA => QClass::Aaaa,
            T::MX => QClass::Mx,
            T::TXT => QClass::Txt,
            T::PTR => QClass::Ptr,
            _ => QClass::Other,
        }
    }

    /// Position in [`QClass::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

/// What a rule does to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Answer after a delay drawn between the two bounds.
    Delay(Duration, Duration),
    /// SERVFAIL.
    Servfail,
    /// NXDOMAIN whatever the zone holds.
    Nxdomain,
    /// REFUSED.
    Refused,
    /// No answer at all: the resolver times out.
    Drop,
    /// An empty answer with the TC bit over UDP, which sends the resolver to TCP.
    Truncate,
}

/// One rule.
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    /// As written.
    pub spec: String,
    /// The class of question it applies to; `None` for all.
    pub class: Option<QClass>,
    /// A glob on the question name (`*` matches any run of characters), lower case.
    pub pattern: Option<String>,
    /// What it does.
    pub action: Action,
    /// The chance it fires on a matching question, 0..=1.
    pub probability: f64,
    /// It applies only during the server's first this-long.
    pub until: Option<Duration>,
}

/// Parses one rule given with `flag` (`dns --rule`, `relay --dns-rule`); the error names
/// the flag and shows the form and examples.
pub fn parse_rule(flag: &str, spec: &str) -> Result<Rule, String> {
    let bad = |why: &str| {
        format!(
            "bad {flag} {spec:?}: {why}; write TYPE[@NAME-GLOB]:ACTION[:PERCENT%][:until=DURATION], e.g. mx:delay=200ms:10%, a:servfail:5%, any@d1*.example.test:drop"
        )
    };
    let mut parts = spec.split(':');
    let head = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let (ty, pattern) = match head.split_once('@') {
        Some((t, p)) if !p.is_empty() => (t.to_string(), Some(p.trim_end_matches('.').to_string())),
        Some(_) => return Err(bad("empty name glob after '@'")),
        None => (head.clone(), None),
    };
    let class = match ty.as_str() {
        "any" | "*" => None,
        t => Some(
            QClass::NAMES
                .iter()
                .position(|n| *n == t)
                .map(|i| QClass::ALL[i])
                .ok_or_else(|| bad("unknown type (a, aaaa, mx, txt, ptr, other, any)"))?,
        ),
    };
    let act = parts.next().ok_or_else(|| bad("no action"))?.trim();
    let action = match act.to_ascii_lowercase().as_str() {
        "servfail" => Action::Servfail,
        "nxdomain" => Action::Nxdomain,
        "refused" => Action::Refused,
        "drop" | "timeout" => Action::Drop,
        "truncate" | "tc" => Action::Truncate,
        a => {
            let d = a.strip_prefix("delay=").ok_or_else(|| {
                bad("action must be delay=DUR[-DUR], servfail, nxdomain, refused, drop or truncate")
            })?;
            let (lo, hi) = crate::units::duration_range(d).map_err(|e| bad(&e))?;
            Action::Delay(lo, hi)
        }
    };
    let (mut probability, mut until) = (1.0, None);
    for p in parts {
        match p.trim().strip_prefix("until=") {
            Some(d) => until = Some(crate::units::duration(d)?),
            None => probability = crate::units::percent(p).map_err(|e| bad(&e))? / 100.0,
        }
    }
    Ok(Rule {
        spec: spec.to_string(),
        class,
        pattern,
        action,
        probability,
        until,
    })
}

/// `*`-glob match of a lower-case name.
fn glob(pattern: &str, name: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut tail) = name.strip_prefix(first) else {
        return false;
    };
    let mut pieces: Vec<&str> = rest.split('*').collect();
    let last = pieces.pop().unwrap_or_default();
    for p in pieces {
        match tail.find(p) {
            Some(i) => tail = &tail[i + p.len()..],
            None => return false,
        }
    }
    tail.len() >= last.len() && tail.ends_with(last)
}

/// What the rules decided for one question.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Wait this long before answering.
    pub delay: Duration,
    /// Answer this way instead of from the zone (never a delay).
    pub action: Option<Action>,
    /// Which rule decided `action`, and which added delay (indexes into the rules).
    pub fired: [Option<usize>; 2],
}

/// The rules of one server.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// In the order given.
    pub rules: Vec<Rule>,
}

impl Faults {
    /// Decides one question of `class` for `qname` (lower case, no final dot), `elapsed`
    /// after the server started.
    pub fn decide(
        &self,
        class: QClass,
        qname: &str,
        elapsed: Duration,
        rng: &mut fastrand::Rng,
    ) -> Decision {
        let mut d = Decision::default();
        for (i, r) in self.rules.iter().enumerate() {
            let applies = r.class.is_none_or(|c| c == class)
                && r.until.is_none_or(|u| elapsed < u)
                && r.pattern.as_deref().is_none_or(|p| glob(p, qname));
            if !applies || (r.probability < 1.0 && rng.f64() >= r.probability) {
                continue;
            }
            match r.action {
                Action::Delay(lo, hi) => {
                    let span = hi.saturating_sub(lo).as_micros() as u64;
                    let extra = if span == 0 { 0 } else { rng.u64(0..=span) };
                    d.delay += lo + Duration::from_micros(extra);
                    d.fired[1] = Some(i);
                }
                a if d.action.is_none() => {
                    d.action = Some(a);
                    d.fired[0] = Some(i);
                }
                _ => {}
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_types_globs_shares_and_windows() {
        let r = parse_rule("--rule", "mx:delay=200ms:10%").expect("rule");
        assert_eq!(r.class, Some(QClass::Mx));
        assert_eq!(
            r.action,
            Action::Delay(Duration::from_millis(200), Duration::from_millis(200))
        );
        assert!((r.probability - 0.1).abs() < 1e-9);
        let r = parse_rule("--rule", "ANY@D1*.example.test.:servfail:100%:until=5s").expect("rule");
        assert_eq!(
            (r.class, r.pattern.as_deref()),
            (None, Some("d1*.example.test"))
        );
        assert_eq!(r.until, Some(Duration::from_secs(5)));
        assert_eq!(
            parse_rule("--rule", "a:delay=10ms-30ms")
                .expect("range")
                .action,
            Action::Delay(Duration::from_millis(10), Duration::from_millis(30))
        );
        for (spec, why) in [
            ("soa:drop", "unknown type"),
            ("mx", "no action"),
            ("mx:explode", "action must be"),
            ("mx:delay=2s-1s", "minimum is above its maximum"),
            ("mx:drop:150%", "bad --dns-rule"),
            ("mx@:drop", "empty name glob"),
        ] {
            let e = parse_rule("--dns-rule", spec).expect_err(spec);
            assert!(e.contains(why), "{spec}: {e}");
        }
        // Issue 40: `dns --rule` errors named `--dns-rule` (relay's flag).
        let e = parse_rule("--rule", "mx").expect_err("no action");
        assert!(e.starts_with("bad --rule \"mx\": "), "{e}");
    }

    #[test]
    fn globs_match_as_written() {
        assert!(glob("d1*.example.test", "d17.example.test"));
        assert!(glob("d1*.example.test", "d1.example.test"));
        assert!(!glob("d1*.example.test", "d2.example.test"));
        assert!(glob("*", "anything"));
        assert!(glob("*.test", "a.b.test"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(!glob("ab*ba", "aba"), "the pieces may not overlap");
    }

    #[test]
    fn decisions_follow_type_pattern_share_and_window() {
        let faults = Faults {
            rules: [
                "mx:servfail:100%:until=1s",
                "a:delay=5ms",
                "a@x*:nxdomain:50%",
            ]
            .iter()
            .map(|s| parse_rule("--rule", s).expect("rule"))
            .collect(),
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let early = Duration::from_millis(10);
        let d = faults.decide(QClass::Mx, "d1.test", early, &mut rng);
        assert_eq!(d.action, Some(Action::Servfail));
        let d = faults.decide(QClass::Mx, "d1.test", Duration::from_secs(2), &mut rng);
        assert_eq!(d, Decision::default(), "lifted after its window");
        let d = faults.decide(QClass::A, "d1.test", early, &mut rng);
        assert_eq!((d.delay, d.action), (Duration::from_millis(5), None));
        let fired = (0..10_000)
            .filter(|_| {
                faults
                    .decide(QClass::A, "x1.test", early, &mut rng)
                    .action
                    .is_some()
            })
            .count();
        assert!(
            (4_700..5_300).contains(&fired),
            "50 % of 10,000 fired {fired} times"
        );
    }
}
