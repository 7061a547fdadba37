//! `--rounds N`: the same benchmark run N times, kept as one results document. A single
//! run on a shared machine swings by ±10 %, so the document carries every round
//! (`extra.rounds`: each round's summary, latency percentiles, server and tool figures —
//! what `compare` tests round by round) and the median and spread of each compared figure
//! (`extra.rounds_summary`). Its top level is the median round by the primary rate, a real
//! run whose series and histograms the report draws; each round names its own lab logs
//! (`mta_logs`), so the top level's are the median round's.

use serde_json::{Value, json};

use super::compare::{metrics, noise};
use crate::stats::results::Results;

/// The rounds of one benchmark as one results document; `None` when there is none.
pub fn combine(rounds: Vec<Results>) -> Option<Results> {
    let docs: Vec<Value> = rounds
        .iter()
        .enumerate()
        .map(|(i, r)| round_doc(i + 1, r))
        .collect();
    let figures: Vec<Vec<metrics::Figure>> = docs.iter().map(metrics::figures).collect();
    let primary = metrics::PRIMARY
        .iter()
        .find(|p| figures.iter().flatten().any(|f| f.name == **p));
    let value = |i: usize, name: &str| {
        figures[i]
            .iter()
            .find(|f| f.name == name)
            .map_or(0.0, |f| f.value)
    };
    // The median round: the lower middle by the primary rate (the first when there is none).
    let mut order: Vec<usize> = (0..rounds.len()).collect();
    if let Some(p) = primary {
        order.sort_by(|a, b| value(*a, p).total_cmp(&value(*b, p)));
    }
    let middle = *order.get(order.len().saturating_sub(1) / 2)?;
    let mut names: Vec<String> = Vec::new();
    for f in figures.iter().flatten() {
        if !names.contains(&f.name) {
            names.push(f.name.clone());
        }
    }
    let summary: serde_json::Map<String, Value> = names
        .into_iter()
        .map(|name| {
            let v: Vec<f64> = figures
                .iter()
                .filter_map(|fs| fs.iter().find(|f| f.name == name).map(|f| f.value))
                .collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            let row = json!({
                "median": noise::median(&v),
                "min": lo,
                "max": hi,
                "spread_pct": noise::spread_pct(&v),
                "n": v.len(),
            });
            (name, row)
        })
        .collect();
    let interrupted = rounds.iter().any(|r| r.interrupted);
    let count = rounds.len();
    let mut top = rounds.into_iter().nth(middle)?;
    top.interrupted = interrupted;
    top.config["rounds"] = count.into();
    top.extra.insert("rounds".into(), docs.into());
    top.extra.insert("rounds_summary".into(), summary.into());
    top.extra.insert("median_round".into(), (middle + 1).into());
    Some(top)
}

/// What a round keeps: the keys `compare` reads, without series or histogram buckets.
fn round_doc(round: usize, r: &Results) -> Value {
    let latency: serde_json::Map<String, Value> = r
        .latency
        .iter()
        .map(|(k, h)| {
            let mut v = serde_json::to_value(h).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.remove("buckets");
            }
            (k.clone(), v)
        })
        .collect();
    json!({
        "round": round,
        "run_id": r.run_id,
        "started_at": r.started_at,
        "duration_s": r.duration_s,
        "interrupted": r.interrupted,
        "summary": r.summary,
        "latency": latency,
        "self": r.self_report,
        // A profile round's capacity says whether its ramp broke: without it a comparison
        // could not say that a capacity is only "at least".
        "extra": {
            "sut": r.extra.get("sut"),
            "sink": r.extra.get("sink"),
            "capacity": r.extra.get("capacity"),
        },
        // The lab logs of this very round (each round keeps its own).
        "mta_logs": r.extra.get("mta_logs"),
    })
}

/// The lines the text summary adds for a run of several rounds: the primary rate's and
/// the headline latencies' median and spread.
pub fn text(r: &Results) -> String {
    let Some(summary) = r.extra.get("rounds_summary").and_then(Value::as_object) else {
        return String::new();
    };
    let mut out = format!(
        "  rounds     {} (figures above: round {}, the median by rate)\n",
        r.config["rounds"],
        r.extra.get("median_round").unwrap_or(&Value::Null)
    );
    let wanted = metrics::PRIMARY.iter().copied().chain([
        "p50_ms",
        "p99_ms",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "server cpu ms/unit",
        "mailbench cpu µs/unit",
    ]);
    for name in wanted {
        if let Some(row) = summary.get(name) {
            let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
            out.push_str(&format!(
                "             {name}: median {:.2}  min {:.2}  max {:.2}  ±{:.1} %\n",
                f("median"),
                f("min"),
                f("max"),
                f("spread_pct")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summary::ProfileSummary;
    use crate::stats::summary::Summary;

    fn profile(users: u64, at_least: bool) -> Results {
        let mut r = Results::assemble(crate::stats::results::RunParts {
            command: "mailbox profile",
            run_id: 1,
            started_us: 0,
            duration_s: 4.0,
            config: json!({"population": {"ramp_start": 4}}),
            summary: Summary::Profile(ProfileSummary {
                capacity_users: Some(users),
                ..Default::default()
            }),
            steps: crate::stats::Steps::NONE,
            self_report: Default::default(),
            total: crate::stats::Recorder::new(),
            series: Vec::new(),
        });
        let capacity = json!({"capacity_users": users, "capacity_at_least": at_least});
        r.extra.insert("capacity".into(), capacity);
        r
    }

    /// Issue 40: `profile --lab dovecot,cyrus` compares combined rounds, whose rounds kept
    /// no capacity, so a ramp that never broke showed as a measured "8 / 8".
    #[test]
    fn issue_40_a_round_keeps_whether_its_ramp_broke() {
        let held = combine(vec![profile(8, true), profile(8, true)]).expect("two rounds");
        let broke = combine(vec![profile(8, false), profile(8, false)]).expect("two rounds");
        let sides = [
            super::super::compare::Side::of("dovecot".into(), &broke).expect("side"),
            super::super::compare::Side::of("cyrus".into(), &held).expect("side"),
        ];
        let c = super::super::compare::compare(&sides, false).expect("comparable");
        assert_eq!(
            c.notes,
            vec!["cyrus: capacity_users is at least 8: its ramp never broke (every step held)"]
        );
    }
}
