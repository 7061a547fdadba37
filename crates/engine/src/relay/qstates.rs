//! A lab MTA's queue states once per interval of a relay run (as `qshape` and
//! `qmail-qstat` would show them), read off the runtime beside the sampler, put into the
//! series point by point and each queue's largest into the summary, so that a deferred
//! queue growing or an active queue held at its limit shows as a curve. Only directory
//! reads: no message is opened and nothing is logged per message.
//!
//! A point's queues are those of the reading that ended it: the last one taken in its span
//! (or a little after its end: a reading is timed at the middle of its scan, and the scan
//! that ends the run comes once the watch has stopped). Each reading ends one point at
//! most, so none is repeated; besides the interval's ticks, a reading is taken when the
//! relay asks (where injection ends, inside an interval) and when the watch stops.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::alarm::Ticker;
use crate::lab::MtaLab;
use crate::stats::Results;
use crate::stats::queues::{self, QueueState};
use crate::stats::series::{MIN_SHARE, is_sliver};
use crate::stats::summary::Summary;

/// One reading: when it was taken (the middle of its scan, wall clock, µs since the Unix
/// epoch), and the queues then.
pub type Reading = (u64, Vec<QueueState>);

/// The reading under way; [`Watch::finish`] stops it.
pub struct Watch {
    stop: CancellationToken,
    now: Arc<Notify>,
    task: JoinHandle<Vec<Reading>>,
}

impl Watch {
    /// Reads `lab`'s queues at the end of every `interval` from `start`, the ends the
    /// series' points mostly have.
    pub fn start(lab: Arc<dyn MtaLab>, interval: Duration, start: Instant) -> Watch {
        let (stop, now) = (CancellationToken::new(), Arc::new(Notify::new()));
        let task = tokio::spawn(read_loop(lab, interval, start, (stop.clone(), now.clone())));
        Watch { stop, now, task }
    }

    /// Takes a reading now, besides the interval's (where a point ends between two ticks).
    pub fn read_now(&self) {
        self.now.notify_one();
    }

    /// Stops reading, with a last reading; every reading taken.
    pub async fn finish(self) -> Vec<Reading> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

async fn read_loop(
    lab: Arc<dyn MtaLab>,
    interval: Duration,
    start: Instant,
    (stop, now): (CancellationToken, Arc<Notify>),
) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    // On the alarm thread, as the sampler's: no tokio timer beside the load's waits.
    let mut ticker = Ticker::new(start + interval, interval);
    let mut last_tick: Option<Instant> = None;
    loop {
        // Once more when stopped: the run's last point ends then, between two ticks.
        let (asked, last) = tokio::select! {
            _ = ticker.tick() => (false, false),
            _ = now.notified() => (true, false),
            _ = stop.cancelled() => (true, true),
        };
        // Ticks missed while a scan was slow come at once: one reading is enough. A
        // reading asked for between two ticks never lets the next tick go.
        if !asked {
            if last_tick.is_some_and(|t| is_sliver(t.elapsed().as_secs_f64(), interval)) {
                continue;
            }
            last_tick = Some(Instant::now());
        }
        let l = lab.clone();
        let began = crate::stats::clock::unix_us();
        let states = tokio::task::spawn_blocking(move || l.queue_states())
            .await
            .unwrap_or_default();
        let ended = crate::stats::clock::unix_us();
        out.push((began + ended.saturating_sub(began) / 2, states));
        if last {
            return out;
        }
    }
}

/// Gives each series point the reading that ended it (see the module's note; none when no
/// reading did), and each queue's largest over every reading to the relay summary
/// (nothing when there was no reading).
pub fn record(results: &mut Results, readings: Vec<Reading>, interval: Duration) {
    if readings.is_empty() {
        return;
    }
    let max = queues::max_per_queue(readings.iter().map(|(_, q)| q.as_slice()));
    let zero = results.started_at_us as f64;
    let slack = interval.as_secs_f64() * MIN_SHARE * 1e6;
    for (i, p) in results.series.iter_mut().enumerate() {
        let (from, to) = (zero + (p.t_s - p.dt_s) * 1e6, zero + p.t_s * 1e6);
        // The first point has no point before it whose reading it could take again: an
        // injection shorter than the slack (20 messages in 26 ms) still has its reading.
        let from = if i == 0 { f64::MIN } else { from + slack };
        p.relay.queue_states = ending(&readings, from, to + slack);
    }
    if let Summary::Relay(s) = &mut results.summary {
        s.max_queue_states = Some(max);
    }
}

/// The states of the last reading taken in `(from, to]` (wall-clock µs).
fn ending(readings: &[Reading], from: f64, to: f64) -> Option<Vec<QueueState>> {
    readings
        .iter()
        .rev()
        .find(|(at, _)| (*at as f64) > from && (*at as f64) <= to)
        .map(|(_, q)| q.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::IntervalPoint;

    fn hold(n: u64) -> Vec<QueueState> {
        vec![QueueState {
            queue: "hold".into(),
            messages: n,
        }]
    }

    #[test]
    fn issue_40_each_point_takes_the_reading_that_ended_it_never_one_twice() {
        // `--flush`: ticks read 400 and 800 held; injection ended at 2.499 s, where the
        // relay asked for a reading (1,000 held); the drain's points end at 3.0 and
        // 3.401 s (the watch's last reading). The old pairing by the nearest reading
        // within half an interval gave 2.499 s the 2.0 s reading (800) again.
        let zero = 1_000_000_000u64;
        let at = |s: f64| zero + (s * 1e6) as u64;
        let readings: Vec<Reading> = vec![
            (at(1.001), hold(400)),
            (at(2.002), hold(800)),
            (at(2.503), hold(1000)),
            (at(3.001), hold(0)),
            (at(3.42), hold(0)),
        ];
        let results = |series: Vec<IntervalPoint>| {
            crate::stats::Results::assemble(crate::stats::results::RunParts {
                command: "relay",
                run_id: 1,
                started_us: zero,
                duration_s: 3.0,
                config: serde_json::json!({}),
                summary: Summary::Relay(Default::default()),
                steps: crate::stats::Steps(&["total"]),
                self_report: Default::default(),
                total: crate::stats::Recorder::new(),
                series,
            })
        };
        let point = |t_s: f64, dt_s: f64| IntervalPoint {
            t_s,
            dt_s,
            ..IntervalPoint::default()
        };
        let mut r = results(vec![
            point(1.0, 1.0),
            point(2.001, 1.001),
            point(2.499, 0.498),
            point(3.0, 0.501),
            point(3.401, 0.401),
        ]);
        record(&mut r, readings, Duration::from_secs(1));
        let got: Vec<Option<u64>> = r
            .series
            .iter()
            .map(|p| p.relay.queue_states.as_ref().map(|q| q[0].messages))
            .collect();
        assert_eq!(got, [Some(400), Some(800), Some(1000), Some(0), Some(0)]);
        // A point no reading ended has none, not the one of its neighbour.
        let mut r2 = results(vec![point(1.0, 1.0), point(1.6, 0.6), point(2.0, 0.4)]);
        record(
            &mut r2,
            vec![(at(1.001), hold(1)), (at(2.002), hold(2))],
            Duration::from_secs(1),
        );
        let got: Vec<Option<u64>> = r2
            .series
            .iter()
            .map(|p| p.relay.queue_states.as_ref().map(|q| q[0].messages))
            .collect();
        assert_eq!(got, [Some(1), None, Some(2)]);
    }
}
