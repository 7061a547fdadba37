//! A mailbox profile's summary: the capacity in users and the steps of the ramp it stands
//! on.

use std::fmt::Write as _;

use super::parts::store_report;
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

/// Renders the summary of a profile run: the capacity and the steps it stands on; `steps`
/// name its latency rows.
pub fn render_profile(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Profile(s) = &r.summary {
            profile_lines(out, r, s);
        }
    })
}

fn profile_lines(out: &mut String, r: &Results, s: &crate::stats::summary::ProfileSummary) {
    let cap = &r.extra.get("capacity").cloned().unwrap_or_default();
    let rules: Vec<&str> = cap["rules"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let rules = rules.join(" or ");
    let ramp = r.config["population"]["ramp_start"].is_number();
    let cut = cap["cut_short_at_users"]
        .as_u64()
        .map_or(String::new(), |u| {
            format!("; the step at {u} users was cut short (not judged)")
        });
    let _ = match (s.capacity_users, cap["broke_at_users"].as_u64(), ramp) {
        (Some(n), Some(b), _) => writeln!(
            out,
            "  capacity   {n} users: the largest step that held (no action failed, no rule broke: {rules}); it broke at {b} users"
        ),
        (Some(n), None, true) => writeln!(
            out,
            "  capacity   at least {n} users: every step held (no action failed, no rule broke: {rules}){cut}"
        ),
        (Some(n), None, false) => writeln!(
            out,
            "  capacity   {n} users held: no action failed, no rule broke ({rules})"
        ),
        (None, Some(b), true) => writeln!(
            out,
            "  capacity   below {b} users: the first step already broke (failed actions, or {rules})"
        ),
        (None, Some(b), false) => writeln!(
            out,
            "  capacity   {b} users did NOT hold (failed actions, or {rules})"
        ),
        (None, None, _) if !cut.is_empty() => writeln!(
            out,
            "  capacity   not found: the run was cut short before a step completed{cut}"
        ),
        (None, None, _) => writeln!(out, "  capacity   no step completed"),
    };
    let _ = writeln!(
        out,
        "  actions    {}  completed {}  refused {}  errors {}  overdue at the end {}  late {}  ({:.0}/min finished)",
        s.actions, s.completed, s.refused, s.errors, s.overdue, s.late, s.actions_per_min
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:>8} {:>11} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>10} {:>10}  verdict",
        "users",
        "actions/min",
        "mean ms",
        "p95 ms",
        "p99 ms",
        "failed",
        "overdue",
        "late",
        "store cpu%",
        "store MiB"
    );
    let mut observed = false;
    for st in cap["steps"].as_array().into_iter().flatten() {
        let m = &st["summary"];
        let f = |k: &str| m[k].as_f64().unwrap_or(0.0);
        let store =
            |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        observed |= st["store"].is_object();
        let _ = writeln!(
            out,
            "  {:>8} {:>11.0} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>6} {:>10} {:>10}  {}",
            st["users"].as_u64().unwrap_or(0),
            f("actions_per_min"),
            f("mean_ms"),
            f("p95_ms"),
            f("p99_ms"),
            st["failed"].as_u64().unwrap_or(0),
            m["overdue"].as_u64().unwrap_or(0),
            m["late"].as_u64().unwrap_or(0),
            store(m["sut_cpu"].as_f64(), 0),
            store(st["store"]["rss_kib"].as_f64().map(|k| k / 1024.0), 1),
            step_verdict(st)
        );
    }
    if !observed {
        let _ = writeln!(
            out,
            "  store      not observed (give --sut-pid with the store's main process)"
        );
    }
}

/// A step's verdict as the results file has it: held, broke (and why), or cut short.
fn step_verdict(st: &serde_json::Value) -> String {
    if st["cut_short"].as_bool() == Some(true) {
        return format!(
            "CUT SHORT after {:.1} s of {:.0} s: not judged",
            st["seconds"].as_f64().unwrap_or(0.0),
            st["planned_s"].as_f64().unwrap_or(0.0)
        );
    }
    let mut why: Vec<String> = st["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["ok"].as_bool() == Some(true))
        .filter_map(|r| r["expr"].as_str().map(str::to_string))
        .collect();
    let failed = st["failed"].as_u64().unwrap_or(0);
    if failed > 0 {
        why.push(format!(
            "{failed} of {} actions failed",
            st["summary"]["actions"].as_u64().unwrap_or(0)
        ));
    }
    if why.is_empty() {
        "ok".into()
    } else {
        format!("BROKE {}", why.join(", "))
    }
}
