//! A lab MTA's queue states once per interval of a relay run (as `qshape` and
//! `qmail-qstat` would show them), read off the runtime beside the sampler, put into the
//! series point by point and each queue's largest into the summary, so that a deferred
//! queue growing or an active queue held at its limit shows as a curve. Only directory
//! reads: no message is opened and nothing is logged per message.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::lab::MtaLab;
use crate::stats::Results;
use crate::stats::queues::{self, QueueState};
use crate::stats::summary::Summary;

/// One reading: seconds since the run's start when it was taken, and the queues then.
pub type Reading = (f64, Vec<QueueState>);

/// The reading under way; [`Watch::finish`] stops it.
pub struct Watch {
    stop: CancellationToken,
    task: JoinHandle<Vec<Reading>>,
}

impl Watch {
    /// Reads `lab`'s queues at the end of every `interval` from `start`, the ends the
    /// series' points mostly have (a point that ends elsewhere, as the injection's last,
    /// takes the reading nearest its end: [`record`]).
    pub fn start(lab: Arc<dyn MtaLab>, interval: Duration, start: Instant) -> Watch {
        let stop = CancellationToken::new();
        let task = tokio::spawn(read_loop(lab, interval, start, stop.clone()));
        Watch { stop, task }
    }

    /// Stops reading; the readings, one per interval ended so far.
    pub async fn finish(self) -> Vec<Reading> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

async fn read_loop(
    lab: Arc<dyn MtaLab>,
    interval: Duration,
    start: Instant,
    stop: CancellationToken,
) -> Vec<Reading> {
    let mut out = Vec::new();
    let mut ticker = tokio::time::interval_at((start + interval).into(), interval);
    loop {
        // Once more when stopped: the run's last point ends then, between two ticks.
        let last = tokio::select! {
            _ = ticker.tick() => false,
            _ = stop.cancelled() => true,
        };
        let l = lab.clone();
        let states = tokio::task::spawn_blocking(move || l.queue_states())
            .await
            .unwrap_or_default();
        out.push((start.elapsed().as_secs_f64(), states));
        if last {
            return out;
        }
    }
}

/// Gives each series point the reading taken nearest its end, when one is within half an
/// interval of it (points do not all end on the reading's ticks: the injection's last
/// ends when it does), and each queue's largest to the relay summary (nothing when no
/// interval ended).
pub fn record(results: &mut Results, readings: Vec<Reading>, interval: Duration) {
    if readings.is_empty() {
        return;
    }
    let max = queues::max_per_queue(readings.iter().map(|(_, q)| q.as_slice()));
    for p in results.series.iter_mut() {
        p.relay.queue_states = nearest(&readings, p.t_s, interval.as_secs_f64() / 2.0);
    }
    if let Summary::Relay(s) = &mut results.summary {
        s.max_queue_states = Some(max);
    }
}

/// The states of the reading taken nearest `t`, if within `within` seconds of it.
fn nearest(readings: &[Reading], t: f64, within: f64) -> Option<Vec<QueueState>> {
    readings
        .iter()
        .map(|(at, q)| ((at - t).abs(), q))
        .filter(|(d, _)| *d <= within)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, q)| q.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(n: u64) -> Vec<QueueState> {
        vec![QueueState {
            queue: "active".into(),
            messages: n,
        }]
    }

    #[test]
    fn each_point_takes_the_reading_nearest_its_end_not_the_next_in_line() {
        // Readings each second; the injection's last point ends at 2.9 s, then the drain's
        // at 3.0 s and 4.0 s: the old pairing by position gave 2.9 s the 3.0 s reading and
        // 3.0 s the 4.0 s one, a second late.
        let readings: Vec<Reading> = vec![
            (1.001, active(10)),
            (2.002, active(20)),
            (3.001, active(30)),
            (4.003, active(40)),
        ];
        let ends = [1.0, 2.0, 2.9, 3.0, 4.0, 5.0];
        let got: Vec<Option<u64>> = ends
            .iter()
            .map(|t| nearest(&readings, *t, 0.5).map(|q| q[0].messages))
            .collect();
        assert_eq!(
            got,
            [Some(10), Some(20), Some(30), Some(30), Some(40), None],
            "readings per point end {ends:?}"
        );
    }
}
