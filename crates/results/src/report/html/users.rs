//! Seed 001's figure: the store's CPU, and the response time, against the users a
//! capacity ramp ran, each run (each store compared) a line on one chart, with the
//! capacity it found marked as a point of its own named in the legend. Read from the
//! ramp's steps (`extra.capacity.steps`), which hold the store's use over each step.

use serde_json::Value;

use super::charts::{Chart, Line, XAxis, chart, name};
use crate::stats::results::Results;

/// A figure of one step, `None` where the step has none.
type Figure = fn(&Value) -> Option<f64>;

fn store_cpu(step: &Value) -> Option<f64> {
    let s = step.get("store")?;
    Some(s["cpu_user_pct"].as_f64()? + s["cpu_sys_pct"].as_f64()?)
}

fn mean_ms(step: &Value) -> Option<f64> {
    step["actions"]["action"]["mean_ms"].as_f64()
}

/// The charts of the runs that ramped users: store CPU, then mean response, against users.
pub fn charts(runs: &[(String, &Results)]) -> Vec<Chart> {
    let figures: [(&str, &str, &str, Figure); 2] = [
        (
            "users_store_cpu",
            "Store CPU against users, capacity marked",
            "% of one core",
            store_cpu,
        ),
        (
            "users_response",
            "Mean response against users, capacity marked",
            "ms",
            mean_ms,
        ),
    ];
    figures
        .iter()
        .filter_map(|(id, title, unit, y)| {
            let lines = runs
                .iter()
                .flat_map(|(label, r)| lines(runs, label, r, *y))
                .collect();
            chart(id, title, unit, XAxis::Linear, "users", false, lines)
        })
        .collect()
}

/// A run's curve of `y` against users, and its capacity as a one-point line; none when it
/// did not ramp or has no value of `y`.
fn lines(runs: &[(String, &Results)], label: &str, r: &Results, y: Figure) -> Vec<Line> {
    let Some(capacity) = r.extra.get("capacity") else {
        return Vec::new();
    };
    let Some(steps) = capacity["steps"].as_array() else {
        return Vec::new();
    };
    let points: Vec<(f64, Option<f64>)> = steps
        .iter()
        .filter_map(|s| Some((s["users"].as_f64()?, y(s))))
        .collect();
    if points.iter().all(|(_, v)| v.is_none()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(users) = capacity["capacity_users"].as_f64() {
        let at = points
            .iter()
            .find(|(x, _)| *x == users)
            .and_then(|(_, v)| *v);
        // A ramp that never broke found a lower bound, as the text summary says.
        let at_least = match capacity["capacity_at_least"].as_bool() {
            Some(true) => "at least ",
            _ => "",
        };
        out.push(Line {
            label: name(runs, label, &format!("capacity {at_least}{users} users")),
            points: vec![(users, at)],
        });
    }
    out.insert(
        0,
        Line {
            label: name(runs, label, "store"),
            points,
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ramp(cpu: [f64; 3], capacity: u64) -> Results {
        let steps: Vec<Value> = [10, 20, 30]
            .iter()
            .zip(cpu)
            .map(|(u, c)| {
                json!({"users": u, "store": {"cpu_user_pct": c, "cpu_sys_pct": 1.0},
                       "actions": {"action": {"mean_ms": c * 10.0}}})
            })
            .collect();
        let total = crate::stats::Recorder::new();
        let summary = crate::stats::summary::Summary::Send(
            crate::stats::summary::SendSummary::derive(&total, 0, 1.0, 1.0),
        );
        let mut r = Results::assemble(crate::stats::results::RunParts {
            command: "profile",
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config: json!({}),
            summary,
            steps: crate::stats::Steps::NONE,
            self_report: Default::default(),
            total,
            series: Vec::new(),
        });
        r.extra.insert(
            "capacity".into(),
            json!({"capacity_users": capacity, "steps": steps}),
        );
        r
    }

    #[test]
    fn both_stores_on_one_chart_with_their_capacities() {
        let (a, b) = (ramp([9.0, 19.0, 29.0], 20), ramp([4.0, 49.0, 99.0], 10));
        let runs = vec![("dovecot".to_string(), &a), ("cyrus".to_string(), &b)];
        let charts = charts(&runs);
        let cpu = charts
            .iter()
            .find(|c| c.id == "users_store_cpu")
            .expect("cpu chart");
        assert_eq!(
            cpu.series,
            [
                "dovecot: store",
                "dovecot: capacity 20 users",
                "cyrus: store",
                "cyrus: capacity 10 users"
            ]
        );
        assert_eq!(cpu.data[0], [Some(10.0), Some(20.0), Some(30.0)], "users");
        assert_eq!(
            cpu.data[1],
            [Some(10.0), Some(20.0), Some(30.0)],
            "9 + 1 % …"
        );
        assert_eq!(
            cpu.data[2],
            [None, Some(20.0), None],
            "dovecot's capacity point"
        );
        assert_eq!(
            cpu.data[4],
            [Some(5.0), None, None],
            "cyrus's capacity point"
        );
        let rt = charts
            .iter()
            .find(|c| c.id == "users_response")
            .expect("response chart");
        assert_eq!(rt.data[3], [Some(40.0), Some(490.0), Some(990.0)]);
    }

    #[test]
    fn a_run_without_a_ramp_draws_nothing() {
        let r = ramp([1.0; 3], 10);
        let mut r = r.clone();
        r.extra.clear();
        assert!(charts(&[("x".to_string(), &r)]).is_empty());
    }
}
