//! A mailbox profile's summary: the capacity in users and the steps of the ramp it stands
//! on.

use std::fmt::Write as _;

use super::parts::store_report;
use crate::stats::kind::profile::verdict_text;
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
    let unjudged: Vec<String> = cap["unjudged_users"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_u64().map(|u| u.to_string()))
        .collect();
    let _ = match (s.capacity_users, cap["broke_at_users"].as_u64(), ramp) {
        (Some(n), Some(b), _) => writeln!(
            out,
            "  capacity   {n} users: the largest step that held (no action failed, every user served, no rule broke: {rules}); it broke at {b} users"
        ),
        (Some(n), None, true) => writeln!(
            out,
            "  capacity   at least {n} users: every step held (no action failed, every user served, no rule broke: {rules}){cut}"
        ),
        (Some(n), None, false) => writeln!(
            out,
            "  capacity   {n} users held: no action failed, every user served, no rule broke ({rules})"
        ),
        (None, Some(b), true) => writeln!(
            out,
            "  capacity   below {b} users: the first step already broke (failed actions, users not served, or {rules})"
        ),
        (None, Some(b), false) => writeln!(
            out,
            "  capacity   {b} users did NOT hold (failed actions, users not served, or {rules})"
        ),
        (None, None, _) if !cut.is_empty() => writeln!(
            out,
            "  capacity   not found: the run was cut short before a step completed{cut}"
        ),
        (None, None, _) if !unjudged.is_empty() => writeln!(
            out,
            "  capacity   not found: no action fell due in the step{} of {} users (not judged); lengthen the steps or raise --time-scale",
            if unjudged.len() == 1 { "" } else { "s" },
            unjudged.join(", ")
        ),
        (None, None, _) => writeln!(out, "  capacity   not found: no step ran"),
    };
    let _ = writeln!(
        out,
        "  actions    {}  completed {}  refused {}  errors {}  never done {}  not begun at their step's end {}  late {}  ({:.0}/min finished)",
        s.actions,
        s.completed,
        s.refused,
        s.errors,
        s.overdue,
        s.unstarted,
        s.late,
        s.actions_per_min
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:>8} {:>11} {:>9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>7} {:>6} {:>10} {:>10}  verdict",
        "users",
        "actions/min",
        "mean ms",
        "p95 ms",
        "p99 ms",
        "failed",
        "overdue",
        "not begun",
        "waiting",
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
            "  {:>8} {:>11.0} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>9} {:>7} {:>6} {:>10} {:>10}  {}",
            st["users"].as_u64().unwrap_or(0),
            f("actions_per_min"),
            f("mean_ms"),
            f("p95_ms"),
            f("p99_ms"),
            st["failed"].as_u64().unwrap_or(0),
            m["overdue"].as_u64().unwrap_or(0),
            m["unstarted"].as_u64().unwrap_or(0),
            st["stuck_users"].as_u64().unwrap_or(0),
            m["late"].as_u64().unwrap_or(0),
            store(m["sut_cpu"].as_f64(), 0),
            store(st["store"]["rss_kib"].as_f64().map(|k| k / 1024.0), 1),
            step_verdict(st)
        );
    }
    let steps: &[serde_json::Value] = cap["steps"].as_array().map_or(&[], |v| v);
    super::parts::settles(out, steps, "step", |st| {
        let s = &st["settle"];
        let users = st["users"].as_u64().unwrap_or(0);
        format!(
            "{users} user{}: {:.1} s, {} actions",
            if users == 1 { "" } else { "s" },
            s["duration_s"].as_f64().unwrap_or(0.0),
            s["actions"]
        )
    });
    if !observed {
        let _ = writeln!(
            out,
            "  store      not observed (give --sut-pid with the store's main process)"
        );
    }
}

/// A step's verdict as the results file has it: held, broke (and why), not judged
/// (worked out again for a file written before steps kept it).
fn step_verdict(st: &serde_json::Value) -> String {
    if let Some(v) = st["verdict"].as_str() {
        return v.to_string();
    }
    let why: Vec<String> = st["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["ok"].as_bool() == Some(true))
        .filter_map(|r| r["expr"].as_str().map(str::to_string))
        .collect();
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    verdict_text(
        st["cut_short"].as_bool() == Some(true),
        st["seconds"].as_f64().unwrap_or(0.0),
        st["planned_s"].as_f64().unwrap_or(0.0),
        why,
        n(&st["failed"]),
        n(&st["stuck_users"]),
        n(&st["summary"]["actions"]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(capacity: serde_json::Value, ramp: bool) -> Results {
        let total = crate::stats::Recorder::new();
        let mut r = Results::assemble(crate::stats::results::RunParts {
            command: "profile",
            run_id: 1,
            started_us: 0,
            duration_s: 4.0,
            config: match ramp {
                true => json!({"population": {"ramp_start": 4}}),
                false => json!({"population": {"users": 4}}),
            },
            summary: Summary::Profile(crate::stats::summary::ProfileSummary {
                capacity_users: capacity["capacity_users"].as_u64(),
                ..Default::default()
            }),
            steps: Steps::NONE,
            self_report: Default::default(),
            total,
            series: Vec::new(),
        });
        r.extra.insert("capacity".into(), capacity);
        r
    }

    fn text(r: &Results) -> String {
        let Summary::Profile(s) = &r.summary else {
            return String::new();
        };
        let mut out = String::new();
        profile_lines(&mut out, r, s);
        out
    }

    /// Issue 40: a step in which no action fell due is "not judged" in its row and in the
    /// capacity line (the row said "ok" beside "capacity no step completed").
    #[test]
    fn a_step_without_actions_is_not_judged_in_the_row_nor_the_line() {
        let step = json!({"users": 4, "seconds": 2.0, "planned_s": 2.0, "failed": 0,
            "stuck_users": 0, "cut_short": false, "rules": [], "summary": {"actions": 0}});
        let r = profile(
            json!({"capacity_users": null, "broke_at_users": null, "unjudged_users": [4],
                   "rules": ["mean(action)>1s"], "steps": [step]}),
            true,
        );
        let t = text(&r);
        assert!(
            t.contains("capacity   not found: no action fell due in the step of 4 users"),
            "{t}"
        );
        assert!(t.contains("NO ACTION was due: not judged"), "{t}");
        assert!(!t.contains(" ok\n"), "{t}");
    }

    /// Issue 40: a ramp that never broke is "at least" its last step; a step's row shows
    /// its actions never done, not begun, and the users it left waiting.
    #[test]
    fn a_ramp_that_never_broke_is_at_least_and_rows_show_the_waits() {
        let step = json!({"users": 8, "seconds": 2.0, "planned_s": 2.0, "failed": 0,
            "stuck_users": 3, "cut_short": false, "rules": [],
            "verdict": "BROKE 3 users not served for half the step",
            "summary": {"actions": 40, "overdue": 7, "unstarted": 9, "late": 1}});
        let r = profile(
            json!({"capacity_users": 8, "capacity_at_least": true, "broke_at_users": null,
                   "rules": ["mean(action)>1s"], "steps": [step]}),
            true,
        );
        let t = text(&r);
        assert!(t.contains("capacity   at least 8 users"), "{t}");
        let row = t
            .lines()
            .find(|l| l.trim_start().starts_with("8 "))
            .unwrap_or_else(|| panic!("{t}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[6..10], ["7", "9", "3", "1"], "{row}");
        assert!(
            row.ends_with("BROKE 3 users not served for half the step"),
            "{row}"
        );
    }

    /// Issue 43: each step's settle is one line under the table, what it kept out of the
    /// step's figures; a run without one has no such line.
    #[test]
    fn the_settles_are_said_under_the_steps() {
        let step = |users: u64, settle: serde_json::Value| {
            json!({"users": users, "seconds": 2.0, "planned_s": 2.0, "failed": 0,
                "stuck_users": 0, "cut_short": false, "rules": [], "verdict": "ok",
                "settle": settle, "summary": {"actions": 10}})
        };
        let settle = |actions: u64| json!({"from_s": 0.0, "duration_s": 0.5, "actions": actions});
        let r = profile(
            json!({"capacity_users": 4, "broke_at_users": null, "rules": [],
                   "steps": [step(2, settle(3)), step(4, settle(6))]}),
            true,
        );
        let t = text(&r);
        assert!(
            t.contains(
                "  settle     kept out of each step's figures (2 users: 0.5 s, 3 actions; 4 users: 0.5 s, 6 actions)\n"
            ),
            "{t}"
        );
        let r = profile(
            json!({"capacity_users": 4, "broke_at_users": null, "rules": [],
                   "steps": [step(4, serde_json::Value::Null)]}),
            true,
        );
        assert!(!text(&r).contains("settle"), "{}", text(&r));
    }
}
