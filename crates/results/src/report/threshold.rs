//! `--threshold` expressions, as in k6 and SPECmail's quality-of-service rules:
//! `p99(total)<500ms`, `mean(rcpt)<=20ms`, `errors<1%`, `msgs_per_sec>=1000`, `lost==0`.
//!
//! Left side: a percentile function (`p50`, `p90`, `p95`, `p99`, `p999`, `max`, `mean`, `min`) of a
//! latency metric the command records, or a numeric key of its results `summary`; anything
//! else is refused when the command starts, with the list of what is valid. A `%` on the
//! right side compares the key as a share of `sent` (`unstarted` as a share of
//! `intended`). Latency values take `us`, `ms` or `s` (default ms).

use std::collections::BTreeMap;

use crate::stats::hist::HistJson;
use crate::stats::results::{Results, ThresholdResult};
use crate::stats::summary::Summary;
use crate::stats::summary::Vocabulary;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

#[derive(Debug, Clone, PartialEq)]
enum Lhs {
    /// A statistic of a latency metric; the value is compared in ms.
    Latency { func: String, metric: String },
    /// A summary key.
    Key(String),
}

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    expr: String,
    lhs: Lhs,
    op: Op,
    rhs: f64,
    percent: bool,
}

const FUNCS: [&str; 8] = ["p50", "p90", "p95", "p99", "p999", "max", "mean", "min"];

/// Summary keys that already are percentages (of a core): `sut_cpu>25%` compares them as
/// they are, not as a share of `sent`.
const PERCENT_KEYS: [&str; 1] = ["sut_cpu"];

impl Threshold {
    /// Parses an expression that may name only what `v` lists; the error explains the
    /// accepted forms and lists the valid names.
    pub fn parse(expr: &str, v: &Vocabulary) -> Result<Threshold, String> {
        Threshold::parse_as(expr, v, "--threshold")
    }

    /// `parse` for a flag of another name that takes the same expressions
    /// (`--capacity-rule`): its errors name that flag.
    pub fn parse_as(expr: &str, v: &Vocabulary, flag: &str) -> Result<Threshold, String> {
        let bad = |why: &str| format!("bad {flag} {expr:?}: {why}; examples: {}", examples(v));
        let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let (pos, op, len) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .iter()
        .find_map(|(s, op)| e.find(s).map(|p| (p, *op, s.len())))
        .ok_or_else(|| bad("no comparison (<, <=, >, >=, ==)"))?;
        let (left, right) = (&e[..pos], &e[pos + len..]);
        let lhs = match left.split_once('(') {
            Some((func, rest)) => {
                let metric = rest.strip_suffix(')').ok_or_else(|| bad("missing ')'"))?;
                if !FUNCS.contains(&func) {
                    return Err(bad(&format!(
                        "unknown function {func:?}, use one of {FUNCS:?}"
                    )));
                }
                if !v.steps.find(metric).is_some_and(v.metrics) {
                    return Err(bad(&format!(
                        "no latency metric {metric:?} here; use one of {}",
                        v.metric_names().join(", ")
                    )));
                }
                Lhs::Latency {
                    func: func.to_string(),
                    metric: metric.to_string(),
                }
            }
            None if left.is_empty() => return Err(bad("nothing left of the comparison")),
            None if !v.keys().any(|k| k == left) => {
                return Err(bad(&format!(
                    "no summary key {left:?} here; use one of {}, or a latency such as p99({})",
                    v.keys().collect::<Vec<_>>().join(", "),
                    v.metric_names().last().copied().unwrap_or("total")
                )));
            }
            None => Lhs::Key(left.to_string()),
        };
        let (num, percent, scale) = if let Some(n) = right.strip_suffix('%') {
            (n, true, 1.0)
        } else if let Some(n) = right.strip_suffix("us") {
            (n, false, 0.001)
        } else if let Some(n) = right.strip_suffix("ms") {
            (n, false, 1.0)
        } else if let Some(n) = right
            .strip_suffix('s')
            .filter(|_| matches!(lhs, Lhs::Latency { .. }))
        {
            (n, false, 1000.0)
        } else {
            (right, false, 1.0)
        };
        let value: f64 = num
            .parse()
            .map_err(|_| bad(&format!("{right:?} is not a number")))?;
        if percent && matches!(lhs, Lhs::Latency { .. }) {
            return Err(bad("a latency cannot be compared with a percentage"));
        }
        // A share is of `sent` (`unstarted` of `intended`): where the command reports no
        // such base, it would read 0 % whatever happened.
        if let Lhs::Key(k) = &lhs
            && percent
            && !PERCENT_KEYS.contains(&k.as_str())
        {
            let base = if k == "unstarted" { "intended" } else { "sent" };
            if !v.keys().any(|x| x == base) {
                return Err(bad(&format!(
                    "{k} cannot be a share here (this command reports no {base:?}); compare \
                     the count, e.g. '{k}==0'"
                )));
            }
        }
        Ok(Threshold {
            expr: expr.to_string(),
            lhs,
            op,
            rhs: value * scale,
            percent,
        })
    }

    /// The expression as given.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Evaluates against a results summary and its latency histograms.
    pub fn evaluate(
        &self,
        summary: &Summary,
        latency: &BTreeMap<String, HistJson>,
    ) -> ThresholdResult {
        let num = |k: &str| summary.number(k);
        let value = match &self.lhs {
            Lhs::Latency { func, metric } => latency.get(metric).map(|h| {
                let us = match func.as_str() {
                    "p50" => h.p50_us as f64,
                    "p90" => h.p90_us as f64,
                    "p95" => h.p95_us as f64,
                    "p99" => h.p99_us as f64,
                    "p999" => h.p999_us as f64,
                    "max" => h.max_us as f64,
                    "min" => h.min_us as f64,
                    _ => h.mean_us,
                };
                us / 1000.0
            }),
            Lhs::Key(k) if self.percent && !PERCENT_KEYS.contains(&k.as_str()) => {
                let base = if k == "unstarted" { "intended" } else { "sent" };
                let of = num(base).unwrap_or(0.0);
                num(k).map(|v| if of > 0.0 { v / of * 100.0 } else { 0.0 })
            }
            Lhs::Key(k) => num(k),
        };
        // A metric with no samples, or an unknown key, cannot prove the threshold held.
        let Some(value) = value else {
            return ThresholdResult {
                expr: self.expr.clone(),
                value: f64::NAN,
                ok: false,
            };
        };
        let ok = match self.op {
            Op::Lt => value < self.rhs,
            Op::Le => value <= self.rhs,
            Op::Gt => value > self.rhs,
            Op::Ge => value >= self.rhs,
            Op::Eq => (value - self.rhs).abs() < 1e-9,
        };
        ThresholdResult {
            expr: self.expr.clone(),
            value,
            ok,
        }
    }
}

/// Three expressions the command accepts, for its error messages: a latency of its first
/// metric, a failure count (as a share of `sent` only where there is a `sent`), a rate.
pub fn examples(v: &Vocabulary) -> String {
    let metrics = v.metric_names();
    let metric = ["total", "e2e", "action"]
        .into_iter()
        .find(|m| metrics.contains(m))
        .or(metrics.first().copied());
    let has = |k: &str| v.keys().any(|x| x == k);
    let failures = ["errors", "lost", "rejected", "servfail"]
        .into_iter()
        .find(|k| has(k))
        .map(|k| {
            if has("sent") {
                format!("'{k}<1%'")
            } else {
                format!("'{k}==0'")
            }
        });
    let rate = v
        .keys()
        .find(|k| k.ends_with("_per_sec") || k.ends_with("_per_min"))
        .map(|k| format!("'{k}>100'"));
    metric
        .map(|m| format!("'p99({m})<500ms'"))
        .into_iter()
        .chain(failures)
        .chain(rate)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks `thresholds` against a finished run's results and records the outcomes in it.
pub fn check(results: &mut Results, thresholds: &[Threshold]) {
    results.thresholds = thresholds
        .iter()
        .map(|t| t.evaluate(&results.summary, &results.latency))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::recorder::new_histogram;
    use crate::stats::{Metric, Steps};

    fn latency() -> BTreeMap<String, HistJson> {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("record"); // 1..1000 ms
        }
        BTreeMap::from([("total".to_string(), HistJson::from_hist(&h))])
    }

    const V: Vocabulary = Vocabulary {
        keys: &[
            &["sent", "errors", "msgs_per_sec"],
            &["intended", "unstarted", "drained"],
        ],
        steps: Steps(&["connect", "rcpt"]),
        metrics: |m| m != Metric::E2e,
    };

    #[test]
    fn latency_and_key_thresholds_hold_or_fail() {
        use crate::stats::summary::{Injection, RelaySummary};
        let summary = Summary::Relay(RelaySummary {
            injection: Injection {
                sent: 1000,
                errors: 5,
                msgs_per_sec: 250.0,
                intended: 2000,
                unstarted: 1000,
                ..Injection::default()
            },
            drained: true,
            ..RelaySummary::default()
        });
        let lat = latency();
        let check = |e: &str| {
            Threshold::parse(e, &V)
                .expect(e)
                .evaluate(&summary, &lat)
                .ok
        };
        assert!(check("p99(total)<1s"));
        assert!(!check("p99(total)<500ms"));
        assert!(check("p50(total) <= 501ms"));
        assert!(check("errors<1%"));
        assert!(!check("errors<0.1%"));
        assert!(check("errors<=5"));
        assert!(check("msgs_per_sec>100"));
        assert!(!check("p99(rcpt)<1s"), "no samples must not pass");
        assert!(check("unstarted<=50%"), "unstarted is a share of intended");
        assert!(!check("unstarted<50%"));
        assert!(check("drained==1"), "a yes/no key compares as 1 or 0");
    }

    #[test]
    fn names_the_command_does_not_have_are_refused_with_the_valid_ones() {
        for (expr, lists) in [
            ("lost==0", "sent, errors"),
            ("p99_total<5", "msgs_per_sec"),
            ("p99(e2e)<1s", "total"),
        ] {
            let err = Threshold::parse(expr, &V).expect_err(expr);
            assert!(err.contains(lists), "{expr}: {err}");
        }
    }

    #[test]
    fn bad_expressions_are_explained() {
        for bad in [
            "p99(total)",
            "p77(total)<1ms",
            "p99(nope)<1ms",
            "<5",
            "errors<x",
            "p99(total)<5%",
        ] {
            let err = Threshold::parse(bad, &V).expect_err(bad);
            assert!(err.contains("--threshold"), "{err}");
        }
    }
}
