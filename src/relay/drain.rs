//! The drain: after injection, waiting until everything the MTA accepted has arrived and
//! the MTA holds nothing more, or until that cannot happen in time. How much the MTA
//! still holds comes from the lab's queue or from `--queue-cmd`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::lab::LabServer;
use crate::run::Progress;
use crate::run::live::Live;
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;

/// The first number a queue command prints.
pub(super) async fn queue_value(cmd: &str) -> Option<f64> {
    tokio::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .await
        .ok()
        .and_then(|o| first_number(&String::from_utf8_lossy(&o.stdout)))
}

/// The first number in a command's output (`mailq`'s "-- 1234 Kbytes in 56 Requests."
/// gives 1234; use e.g. `find DIR -type f | wc -l` for a plain count).
fn first_number(text: &str) -> Option<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|t| !t.is_empty() && t.chars().any(|c| c.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
}

/// Where the drain learns whether the MTA still holds mail: the lab's queue, or the
/// `--queue-cmd` value (0 means empty).
pub(super) struct QueueProbe<'a> {
    /// The lab, when the MTA is one.
    pub(super) lab: Option<&'a dyn LabServer>,
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

/// Waits until every expected recipient arrived and the MTA holds nothing more, the
/// MTA's queue is empty with nothing arriving (the rest was refused or bounced, it will
/// not come), the timeout passes, or a second signal. True when drained. Only atomics are
/// polled while mail flows; the queue is looked at when arrivals pause or are complete,
/// because reading it costs CPU the MTA needs.
pub(super) async fn drain(
    delivery: &Delivery,
    expected: u64,
    queue: &QueueProbe<'_>,
    timeout: Duration,
    progress: Progress,
    start: Instant,
    shutdown: &Shutdown,
) -> bool {
    let interval = progress.interval;
    let deadline = Instant::now() + timeout;
    let live = Live::new(progress.quiet);
    let mut next_line = Instant::now() + interval;
    let mut next_probe = Instant::now();
    let drained = loop {
        let got = delivery.recipients.load(Ordering::Relaxed);
        let now = Instant::now();
        let idle_ms = (start.elapsed().as_millis() as u64)
            .saturating_sub(delivery.last_any_ms.load(Ordering::Relaxed));
        if (got >= expected || idle_ms >= 1000) && now >= next_probe {
            next_probe = now + Duration::from_millis(250);
            match queue.held().await {
                Some(0) => break true,
                Some(_) => {}
                None if got >= expected => break true,
                None => {}
            }
        }
        if now >= deadline || shutdown.abort.is_cancelled() {
            break false;
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

#[cfg(test)]
mod tests {
    use super::first_number;

    #[test]
    fn the_first_number_of_a_command_output_is_taken() {
        assert_eq!(
            first_number("-- 1234 Kbytes in 56 Requests.\n"),
            Some(1234.0)
        );
        assert_eq!(first_number("42\n"), Some(42.0));
        assert_eq!(first_number("Mail queue is empty"), None);
    }
}
