//! The top of the page: what each run found, as its kind's headline figures say
//! (`stats::kind::headline`), in plain words with units. Each figure keeps its raw value
//! in `data-value`, so that a reader or a test can check it against the results file.

use std::fmt::Write as _;

use serde_json::Value;

use super::format::{escape, show};
use crate::stats::kind::{self, headline::Headline};
use crate::stats::results::Results;

/// The headline of the kind that wrote `r`; a results file of an unknown kind (none is
/// read without one) gets the generator's.
pub fn of(r: &Results) -> &'static Headline {
    kind::find(&r.command).map_or(&kind::headline::SEND, |k| k.headline)
}

/// The parts of a results file a figure may read, as one JSON document.
fn document(r: &Results) -> Value {
    serde_json::json!({
        "summary": serde_json::to_value(&r.summary).unwrap_or(Value::Null),
        "extra": r.extra,
        "config": r.config,
    })
}

/// One block of figures per run, its label above it when there are several.
pub fn section(runs: &[(String, &Results)]) -> String {
    let mut h = String::from("<section id=\"headline\">");
    for (run, (label, r)) in runs.iter().enumerate() {
        let doc = document(r);
        if runs.len() > 1 {
            let _ = write!(h, "<h3>{}</h3>", escape(label));
        }
        h.push_str("<div class=\"figures\">");
        for f in of(r).figures {
            let Some((v, of_rounds)) = value(r, &doc, f.id, f.value) else {
                continue;
            };
            let unit = if f.unit.is_empty() {
                String::new()
            } else {
                format!(" <span class=\"unit\">{}</span>", escape(f.unit))
            };
            let _ = write!(
                h,
                "<div class=\"figure\" data-run=\"{run}\" data-figure=\"{}\" data-value=\"{}\"><b class=\"value\">{}</b>{unit}<div class=\"label\">{}</div></div>",
                escape(f.id),
                escape(&v.to_string()),
                escape(&figure_text(&v)),
                escape(&format!("{}{of_rounds}", f.label)),
            );
        }
        h.push_str("</div>");
    }
    h.push_str("</section>\n");
    h
}

/// A figure's value and what it is of: a file holding rounds (`--rounds`, an MTA
/// comparison) gives the median of its rounds where it has one, as `compare` does, not the
/// median round's own value.
fn value(
    r: &Results,
    doc: &Value,
    id: &str,
    read: fn(&Value) -> Option<Value>,
) -> Option<(Value, String)> {
    let rounds = r
        .extra
        .get("rounds_summary")
        .and_then(|s| s.get(compare_name(id)));
    match rounds.and_then(|s| Some((s.get("median")?.as_f64()?, s.get("n")?.as_u64()?))) {
        Some((median, n)) => Some((number(median), format!(", median of {n} rounds"))),
        None => read(doc).map(|v| (v, String::new())),
    }
}

/// The name `compare` (and so `extra.rounds_summary`) gives a headline figure: its id,
/// but for the MTA's CPU per message, which `compare` names by its unit (the same CPU over
/// the same delivered messages). Without it an MTA comparison showed the median round's
/// CPU per message among medians of rounds (2.40 where `compare` said 2.24).
pub fn compare_name(id: &str) -> &str {
    match id {
        "mta_cpu_ms_per_message" => "server cpu ms/unit",
        other => other,
    }
}

/// A median as a figure: a count's median is whole unless two rounds straddle it, and
/// then it reads as a count ("0", not "0.000").
pub fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// A figure as read at a glance: whole numbers from 100 up, in groups of three digits
/// ("49,023"), 2 decimals from 1 up, 3 below; anything else as the tables show it.
pub fn figure_text(v: &Value) -> String {
    let Some(f) = v.as_f64() else {
        return show(v);
    };
    if let Some(n) = v.as_i64() {
        return grouped(n);
    }
    if f.abs() >= 100.0 && f.abs() < 1e15 {
        grouped(f.round() as i64)
    } else if f.abs() >= 1.0 {
        format!("{f:.2}")
    } else {
        format!("{f:.3}")
    }
}

/// `n` with its digits in groups of three.
fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_40_the_mtas_cpu_per_message_is_the_median_of_its_rounds_as_compare_s() {
        use crate::stats::results::{Results, RunParts};
        use crate::stats::summary::{RelaySummary, Summary};
        // The median round used 0.24 s of CPU for 100 messages (2.40 ms each); compare's
        // median over the 4 rounds is 2.24.
        let mut r = Results::assemble(RunParts {
            command: "relay",
            run_id: 1,
            started_us: 1,
            duration_s: 1.0,
            config: serde_json::json!({}),
            summary: Summary::Relay(RelaySummary {
                delivered_messages: 100,
                ..Default::default()
            }),
            steps: crate::stats::Steps(&["total"]),
            self_report: Default::default(),
            total: crate::stats::Recorder::new(),
            series: Vec::new(),
        });
        r.extra.insert(
            "sut".into(),
            serde_json::json!({"cpu_user_s": 0.2, "cpu_sys_s": 0.04}),
        );
        r.extra.insert(
            "rounds_summary".into(),
            serde_json::json!({"server cpu ms/unit": {"median": 2.24, "n": 4}}),
        );
        let h = section(&[("postfix".into(), &r)]);
        let want = "data-figure=\"mta_cpu_ms_per_message\" data-value=\"2.24\"";
        assert!(h.contains(want), "expected {want} in {h}");
        assert!(h.contains("MTA CPU per message, median of 4 rounds"), "{h}");
    }

    #[test]
    fn figures_read_at_a_glance() {
        let t = |v: Value| figure_text(&v);
        assert_eq!(t(49022.95.into()), "49,023");
        assert_eq!(t(1234567.into()), "1,234,567");
        assert_eq!(t(0.into()), "0");
        assert_eq!(t(300.into()), "300");
        assert_eq!(t(80.639.into()), "80.64");
        assert_eq!(t(0.6667.into()), "0.667");
        assert_eq!(t(2000.0.into()), "2,000");
        assert_eq!(t("postfix".into()), "postfix");
        assert_eq!(t(number(0.0)), "0", "a median count");
        assert_eq!(t(number(2.5)), "2.50");
    }
}
