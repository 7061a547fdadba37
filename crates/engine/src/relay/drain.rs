//! The drain: after injection, waiting until everything the MTA accepted has arrived and
//! the MTA holds nothing more, or until that cannot happen in time. How much the MTA
//! still holds comes from the lab's queue or from `--queue-cmd`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::lab::MtaLab;
use crate::run::Progress;
use crate::run::live::Live;
use crate::run::sampler::queue_value;
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;
use crate::stats::summary::RelaySummary;

/// Where the drain learns whether the MTA still holds mail: the lab's queue, or the
/// `--queue-cmd` value (0 means empty).
pub(super) struct QueueProbe<'a> {
    /// The lab, when the MTA is one.
    pub(super) lab: Option<&'a dyn MtaLab>,
    /// The `--queue-cmd`.
    pub(super) cmd: Option<&'a str>,
}

impl QueueProbe<'_> {
    /// Messages the MTA still holds, when that can be known.
    async fn held(&self) -> Option<u64> {
        if let Some(l) = self.lab {
            return Some(l.queued() as u64);
        }
        match self.cmd {
            Some(c) => queue_value(c).await.map(|v| v as u64),
            None => None,
        }
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DrainEnd {
    /// Everything expected arrived (or will not come) and the MTA holds nothing more.
    Drained,
    /// The drain timeout passed first: what has not arrived is lost.
    TimedOut,
    /// A signal cut the wait short (a second one, or the first after
    /// [`AFTER_SIGNAL`]): what has not arrived is not known lost.
    Aborted,
}

/// How long the drain goes on after Ctrl-C or SIGTERM: long enough for what is in flight
/// to land, short enough that one Ctrl-C stops the run in seconds, not at the drain
/// timeout (a deferred message may wait minutes for its next retry).
pub(super) const AFTER_SIGNAL: Duration = Duration::from_secs(10);

/// What `relay` prints at the first Ctrl-C or SIGTERM: what stopping means for it.
pub const SIGNAL_NOTICE: &str = "mailbench relay: stopping: no new messages; deliveries in flight have 10 s to land (signal again to stop now)";

/// How long the drain may last, and how long arrivals may pause.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The longest drain.
    pub(super) timeout: Duration,
    /// How long arrivals may pause, the MTA's queue empty, before the rest is taken as
    /// not coming.
    pub(super) settle: Duration,
}

/// Waits until every expected recipient arrived and the MTA holds nothing more, the
/// MTA's queue is empty with nothing arriving for `settle` (the rest was refused or
/// bounced, it will not come), the timeout passes, or a signal cuts it short (a second
/// one, or the first after [`AFTER_SIGNAL`]); says which. Only atomics are
/// polled while mail flows; the queue is looked at when arrivals pause or are complete,
/// because reading it costs CPU the MTA needs.
pub(super) async fn drain(
    delivery: &Delivery,
    expected: u64,
    queue: &QueueProbe<'_>,
    limits: Limits,
    progress: Progress,
    start: Instant,
    shutdown: &Shutdown,
) -> DrainEnd {
    let Limits { timeout, settle } = limits;
    let interval = progress.interval;
    let deadline = Instant::now() + timeout;
    let live = Live::new(progress.quiet);
    let mut next_line = Instant::now() + interval;
    let mut next_probe = Instant::now();
    // Empty twice in a row: a scan of the queue's directories can miss a message the MTA
    // moves between two of them while it reads (deferred → active), once, not twice.
    let mut empty_before = false;
    let mut signalled_at = None;
    let drained = loop {
        let got = delivery.recipients.load(Ordering::Relaxed);
        let now = Instant::now();
        let idle_ms = (start.elapsed().as_millis() as u64)
            .saturating_sub(delivery.last_any_ms.load(Ordering::Relaxed));
        if (got >= expected || idle_ms >= settle.as_millis() as u64) && now >= next_probe {
            next_probe = now + Duration::from_millis(250);
            match queue.held().await {
                Some(0) if empty_before => break DrainEnd::Drained,
                Some(0) => empty_before = true,
                Some(_) => empty_before = false,
                None if got >= expected => break DrainEnd::Drained,
                None => {}
            }
        }
        if shutdown.interrupted() && signalled_at.is_none() {
            signalled_at = Some(now);
        }
        if shutdown.abort.is_cancelled() || signalled_at.is_some_and(|t| now >= t + AFTER_SIGNAL) {
            break DrainEnd::Aborted;
        }
        if now >= deadline {
            break DrainEnd::TimedOut;
        }
        if now >= next_line {
            next_line = now + interval;
            live.line(&format!(
                "{:>7.1}s draining: delivered {got} of {expected} recipients",
                start.elapsed().as_secs_f64()
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = shutdown.abort.cancelled() => {}
        }
    };
    live.finish();
    drained
}

/// The warning of a drain the timeout ended, fitted to its cause. Commonly the MTA was
/// slow (or waiting to retry) and a longer `--drain-timeout` would have seen the rest
/// arrive. After a power cut that dropped queue files the MTA had not synced, with nothing
/// arriving for the drain's last second or more, what had not arrived went with those
/// files: lost for good.
pub(super) fn timed_out_warning(s: &RelaySummary) -> String {
    let held = s
        .queued_left
        .map_or(String::new(), |q| format!(" ({q} messages still queued)"));
    let power_cut = s
        .fault
        .as_deref()
        .is_some_and(|f| f.starts_with("power-loss"));
    let dropped = s.fault_unsynced_files.unwrap_or(0);
    let idle_s = match (
        s.drain_end_after_injection_s,
        s.last_arrival_after_injection_s,
    ) {
        (Some(end), Some(last)) => Some(end - last),
        (Some(end), None) => Some(end),
        _ => None,
    };
    match idle_s {
        Some(idle) if power_cut && dropped > 0 && idle >= 1.0 => format!(
            "the drain timeout passed after the power cut had dropped {dropped} queue files the MTA had not synced, and nothing arrived in the drain's last {idle:.1} s{held}: what had not arrived went with those files and is lost for good, not late; a longer --drain-timeout would not bring it"
        ),
        _ => format!(
            "the drain timeout passed before the MTA had delivered everything{held}: what had not arrived is counted lost; raise --drain-timeout if the MTA was only slow"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A newcomer's finding: after `relay --lab sendmail --mta-conf SuperSafe=False
    /// --fault power-loss@100`, whose cut dropped 92 unsynced queue files and left 47
    /// zero-length `qf` files Sendmail never delivers, the warning said to raise
    /// --drain-timeout. The figures are that run's.
    #[test]
    fn a_power_cut_s_losses_are_lost_not_late() {
        let mut s = RelaySummary {
            queued_left: Some(47),
            last_arrival_after_injection_s: Some(1.35),
            drain_end_after_injection_s: Some(10.01),
            ..RelaySummary::default()
        };
        assert_eq!(
            timed_out_warning(&s),
            "the drain timeout passed before the MTA had delivered everything (47 messages still queued): what had not arrived is counted lost; raise --drain-timeout if the MTA was only slow",
            "no fault: the MTA was slow, or waits to retry"
        );
        s.fault = Some("power-loss@100".into());
        s.fault_unsynced_files = Some(92);
        assert_eq!(
            timed_out_warning(&s),
            "the drain timeout passed after the power cut had dropped 92 queue files the MTA had not synced, and nothing arrived in the drain's last 8.7 s (47 messages still queued): what had not arrived went with those files and is lost for good, not late; a longer --drain-timeout would not bring it"
        );
        // Still delivering at the end: slow, whatever the cut did.
        s.last_arrival_after_injection_s = Some(9.5);
        assert!(timed_out_warning(&s).contains("raise --drain-timeout"));
        // A crash drops nothing: the queue recovers, late.
        s.last_arrival_after_injection_s = Some(1.35);
        s.fault = Some("crash@100".into());
        s.fault_unsynced_files = None;
        assert!(timed_out_warning(&s).contains("raise --drain-timeout"));
    }

    #[test]
    fn the_notice_names_the_time_the_drain_keeps() {
        let secs = format!("have {} s", AFTER_SIGNAL.as_secs());
        assert!(
            SIGNAL_NOTICE.contains(&secs),
            "{SIGNAL_NOTICE} lacks {secs}"
        );
    }
}
