//! `--threshold` expressions, as in k6 and SPECmail's quality-of-service rules:
//! `p99(total)<500ms`, `mean(rcpt)<=20ms`, `errors<1%`, `msgs_per_sec>=1000`, `lost==0`.
//!
//! Left side: a percentile function (`p50`, `p90`, `p99`, `p999`, `max`, `mean`, `min`) of a
//! latency metric, or any numeric key of the results `summary`. A `%` on the right side
//! compares the key as a share of `sent`. Latency values take `us`, `ms` or `s` (default ms).

use std::collections::BTreeMap;

use crate::stats::hist::HistJson;
use crate::stats::results::ThresholdResult;

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

const FUNCS: [&str; 7] = ["p50", "p90", "p99", "p999", "max", "mean", "min"];

impl Threshold {
    /// Parses an expression; the error explains the accepted forms.
    pub fn parse(expr: &str) -> Result<Threshold, String> {
        let bad = |why: &str| {
            format!(
                "bad --threshold {expr:?}: {why}; examples: 'p99(total)<500ms', 'errors<1%', 'msgs_per_sec>100'"
            )
        };
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
                if crate::stats::Metric::from_name(metric).is_none() {
                    return Err(bad(&format!("unknown latency metric {metric:?}")));
                }
                Lhs::Latency {
                    func: func.to_string(),
                    metric: metric.to_string(),
                }
            }
            None if left.is_empty() => return Err(bad("nothing left of the comparison")),
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
        Ok(Threshold {
            expr: expr.to_string(),
            lhs,
            op,
            rhs: value * scale,
            percent,
        })
    }

    /// Evaluates against a results summary and its latency histograms.
    pub fn evaluate(
        &self,
        summary: &serde_json::Value,
        latency: &BTreeMap<String, HistJson>,
    ) -> ThresholdResult {
        let num = |k: &str| summary.get(k).and_then(|v| v.as_f64());
        let value = match &self.lhs {
            Lhs::Latency { func, metric } => latency.get(metric).map(|h| {
                let us = match func.as_str() {
                    "p50" => h.p50_us as f64,
                    "p90" => h.p90_us as f64,
                    "p99" => h.p99_us as f64,
                    "p999" => h.p999_us as f64,
                    "max" => h.max_us as f64,
                    "min" => h.min_us as f64,
                    _ => h.mean_us,
                };
                us / 1000.0
            }),
            Lhs::Key(k) if self.percent => {
                let sent = num("sent").unwrap_or(0.0);
                num(k).map(|v| if sent > 0.0 { v / sent * 100.0 } else { 0.0 })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::recorder::new_histogram;

    fn latency() -> BTreeMap<String, HistJson> {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("record"); // 1..1000 ms
        }
        BTreeMap::from([("total".to_string(), HistJson::from_hist(&h))])
    }

    #[test]
    fn latency_and_key_thresholds_hold_or_fail() {
        let summary = serde_json::json!({"sent": 1000, "errors": 5, "msgs_per_sec": 250.0});
        let lat = latency();
        let check = |e: &str| Threshold::parse(e).expect(e).evaluate(&summary, &lat).ok;
        assert!(check("p99(total)<1s"));
        assert!(!check("p99(total)<500ms"));
        assert!(check("p50(total) <= 501ms"));
        assert!(check("errors<1%"));
        assert!(!check("errors<0.1%"));
        assert!(check("errors<=5"));
        assert!(check("msgs_per_sec>100"));
        assert!(!check("p99(rcpt)<1s"), "no samples must not pass");
        assert!(!check("nosuchkey<1"), "unknown key must not pass");
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
            let err = Threshold::parse(bad).expect_err(bad);
            assert!(err.contains("--threshold"), "{err}");
        }
    }
}
