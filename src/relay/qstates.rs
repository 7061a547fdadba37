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

/// The reading under way; [`Watch::finish`] stops it.
pub struct Watch {
    stop: CancellationToken,
    task: JoinHandle<Vec<Vec<QueueState>>>,
}

impl Watch {
    /// Reads `lab`'s queues at the end of every `interval` from `start`, the ends the
    /// series' points have (reading `i` is point `i`'s).
    pub fn start(lab: Arc<dyn MtaLab>, interval: Duration, start: Instant) -> Watch {
        let stop = CancellationToken::new();
        let task = tokio::spawn(read_loop(lab, interval, start, stop.clone()));
        Watch { stop, task }
    }

    /// Stops reading; the readings, one per interval ended so far.
    pub async fn finish(self) -> Vec<Vec<QueueState>> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

async fn read_loop(
    lab: Arc<dyn MtaLab>,
    interval: Duration,
    start: Instant,
    stop: CancellationToken,
) -> Vec<Vec<QueueState>> {
    let mut out = Vec::new();
    let mut ticker = tokio::time::interval_at((start + interval).into(), interval);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return out,
        }
        let l = lab.clone();
        let states = tokio::task::spawn_blocking(move || l.queue_states())
            .await
            .unwrap_or_default();
        out.push(states);
    }
}

/// Puts reading `i` into series point `i`, and each queue's largest into the relay
/// summary (nothing when no interval ended).
pub fn record(results: &mut Results, readings: Vec<Vec<QueueState>>) {
    if readings.is_empty() {
        return;
    }
    let max = queues::max_per_queue(readings.iter().map(Vec::as_slice));
    for (p, states) in results.series.iter_mut().zip(readings) {
        p.relay.queue_states = Some(states);
    }
    if let Summary::Relay(s) = &mut results.summary {
        s.max_queue_states = Some(max);
    }
}
