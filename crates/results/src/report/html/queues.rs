//! The chart of a lab MTA's queues over a relay run: one curve per queue (Postfix
//! incoming, active, deferred, hold; qmail queue and todo; one queue for the MTAs that
//! keep deferred mail in place), the way `qshape` and `qmail-qstat` would have shown them
//! each interval — an active queue flat at its limit or a deferred queue climbing is
//! where an MTA's time went. Drawn whenever the results have queue states, even all zero
//! (an empty queue throughout is a finding too).

use super::charts::{self, Chart, Line, MAX_POINTS, XAxis};
use crate::stats::results::Results;

/// The queue chart of `runs`, when any of them watched a lab MTA's queues.
pub fn chart(runs: &[(String, &Results)]) -> Option<Chart> {
    let mut lines: Vec<Line> = Vec::new();
    for (label, r) in runs {
        let per = r.series.len().div_ceil(MAX_POINTS).max(1);
        let mut names: Vec<&str> = Vec::new();
        for p in &r.series {
            for q in p.relay.queue_states.iter().flatten() {
                if !names.contains(&q.queue.as_str()) {
                    names.push(&q.queue);
                }
            }
        }
        for queue in names {
            // A long run keeps each bucket's highest count: a peak is what the chart is for.
            let points = r
                .series
                .chunks(per)
                .filter_map(|bucket| {
                    let t = bucket.last()?.t_s;
                    let most = bucket
                        .iter()
                        .filter_map(|p| p.relay.queue_states.as_ref())
                        .filter_map(|s| s.iter().find(|q| q.queue == queue))
                        .map(|q| q.messages as f64)
                        .reduce(f64::max);
                    Some((t, most))
                })
                .collect();
            lines.push(Line {
                label: charts::name(runs, label, queue),
                points,
            });
        }
    }
    charts::chart(
        "queue_states",
        "MTA queues (messages in each at an interval's end)",
        "messages",
        XAxis::Time,
        "seconds",
        false,
        lines,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::queues::QueueState;
    use crate::stats::results::{RunParts, SelfReport};
    use crate::stats::summary::{RelaySummary, Summary};
    use crate::stats::{IntervalPoint, Recorder, Steps};

    fn results(series: Vec<IntervalPoint>) -> Results {
        Results::assemble(RunParts {
            command: "relay",
            run_id: 1,
            started_us: 0,
            duration_s: 3.0,
            config: serde_json::json!({}),
            summary: Summary::Relay(RelaySummary::default()),
            steps: Steps(&["total"]),
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series,
        })
    }

    fn point(t: f64, active: u64, deferred: u64) -> IntervalPoint {
        let mut p = IntervalPoint {
            t_s: t,
            dt_s: 1.0,
            ..Default::default()
        };
        p.relay.queue_states = Some(vec![
            QueueState::new("active", active),
            QueueState::new("deferred", deferred),
        ]);
        p
    }

    #[test]
    fn each_queue_is_a_curve_of_its_counts_and_runs_without_states_draw_none() {
        let r = results(vec![
            point(1.0, 100, 0),
            point(2.0, 100, 7),
            point(3.0, 0, 20),
        ]);
        let c = chart(&[("run".into(), &r)]).expect("a chart");
        assert_eq!(c.series, ["active", "deferred"]);
        assert_eq!(
            c.data,
            [
                vec![Some(1.0), Some(2.0), Some(3.0)],
                vec![Some(100.0), Some(100.0), Some(0.0)],
                vec![Some(0.0), Some(7.0), Some(20.0)],
            ]
        );
        let none = results(vec![IntervalPoint::default()]);
        assert!(chart(&[("run".into(), &none)]).is_none());
    }
}
