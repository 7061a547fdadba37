//! How long a connection waits for its server, kept in one alarm per connection instead
//! of a timer per read.
//!
//! A timeout around every read registered a timer in the runtime's wheel when the read
//! had to wait and removed it when the data came: at one read per IMAP command that was
//! ~8 % of the client's instructions per command and a good part of its code footprint,
//! and any pending timer makes the runtime sleep with a kernel timer armed (see
//! [`crate::alarm`]). Here each command written or completed only moves the connection's
//! mark (an [`Instant`] the caller read anyway to time the command). The alarm stays set
//! for the deadline of an earlier mark; when it rings, a wait whose mark has moved since
//! sets it again for the new deadline and goes on waiting. That is one alarm per `limit`
//! on a busy connection instead of two per command. The limit is the same: a wait fails
//! when nothing was written or completed for `limit`.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::alarm::Alarm;
use tokio::io::AsyncReadExt;

use super::link::{LinkError, LinkPhase};
use super::stream::Stream;

/// One connection's limit on waiting for its server, counted from the last mark.
pub struct Patience {
    alarm: Arc<Alarm>,
    limit: Duration,
    since: Instant,
}

impl Patience {
    /// Waits of at most `limit`, counted from now until the first [`Patience::restart`].
    pub fn new(limit: Duration) -> Patience {
        let p = Patience {
            alarm: Alarm::new(),
            limit,
            since: Instant::now(),
        };
        p.alarm.set(p.due());
        p
    }

    /// When the current wait fails: `limit` after the mark (a limit too large for the
    /// clock never passes).
    fn due(&self) -> Instant {
        const NEVER: Duration = Duration::from_secs(100 * 365 * 86_400);
        (self.since.checked_add(self.limit)).unwrap_or(self.since + NEVER)
    }

    /// Counts the limit anew from `at` (a command written, a reply completed). The alarm
    /// is left as it is: it rings early, and the wait then sets it anew (see `bound`).
    pub fn restart(&mut self, at: Instant) {
        self.since = at;
    }

    /// The last mark: where the current wait is counted from.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Reads what is there (at least one octet) from `stream` into `buf` within the
    /// limit; the server closing the connection is a failure at `phase`.
    pub async fn read<P: LinkPhase>(
        &mut self,
        stream: &mut Stream,
        buf: &mut Vec<u8>,
        phase: P,
    ) -> Result<(), LinkError<P>> {
        if self.bound(stream.read_buf(buf), phase).await? > 0 {
            return Ok(());
        }
        Err(LinkError::Io {
            phase,
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ),
        })
    }

    /// Runs `io` until it ends or `limit` has passed since the last mark; its failure (or
    /// the limit passing) is charged to `phase`.
    pub async fn bound<T, P: LinkPhase>(
        &mut self,
        io: impl Future<Output = io::Result<T>>,
        phase: P,
    ) -> Result<T, LinkError<P>> {
        let mut io = std::pin::pin!(io);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = io.as_mut().poll(cx) {
                return Poll::Ready(r.map_err(|source| LinkError::Io { phase, source }));
            }
            if self.alarm.poll_rung(cx) {
                let due = self.due();
                if Instant::now() >= due {
                    return Poll::Ready(Err(LinkError::Timeout {
                        phase,
                        after: self.limit,
                    }));
                }
                // The ring of a deadline since moved: wait for the new one.
                self.alarm.set(due);
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::link::LinkPhase;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Step;
    impl std::fmt::Display for Step {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("step")
        }
    }
    impl LinkPhase for Step {
        const CONNECT: Self = Step;
        const TLS_HANDSHAKE: Self = Step;
    }

    fn never() -> impl Future<Output = io::Result<()>> {
        std::future::pending()
    }

    /// Marks now, waits for nothing, and checks the wait timed out `limit` after the mark
    /// (within 150 ms).
    async fn times_out_a_limit_after_a_mark(p: &mut Patience, limit: Duration) {
        let marked = Instant::now();
        p.restart(marked);
        let r = p.bound(never(), Step).await;
        let took = marked.elapsed();
        assert!(
            matches!(r, Err(LinkError::Timeout { after, .. }) if after == limit),
            "expected a timeout after {limit:?}, got {r:?}"
        );
        assert!(
            took >= limit && took < limit + Duration::from_millis(150),
            "expected the timeout {limit:?} after the mark, it came {took:?} after it"
        );
    }

    #[tokio::test]
    async fn a_wait_fails_once_the_limit_has_passed_since_the_mark() {
        let limit = Duration::from_millis(200);
        times_out_a_limit_after_a_mark(&mut Patience::new(limit), limit).await;
    }

    #[tokio::test]
    async fn a_mark_moves_the_limit_of_a_timer_already_armed() {
        let limit = Duration::from_millis(200);
        let mut p = Patience::new(limit);
        // Arm the timer with a wait that ends before the limit.
        let done = p
            .bound(
                async {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    io::Result::Ok(7)
                },
                Step,
            )
            .await;
        assert_eq!(done.ok(), Some(7), "a wait within the limit must succeed");
        times_out_a_limit_after_a_mark(&mut p, limit).await;
    }

    #[tokio::test]
    async fn an_alarm_that_rang_between_waits_does_not_cut_the_next_one_short() {
        let limit = Duration::from_millis(100);
        let mut p = Patience::new(limit);
        // The first deadline passes while nothing waits (a connection between commands).
        tokio::time::sleep(Duration::from_millis(150)).await;
        times_out_a_limit_after_a_mark(&mut p, limit).await;
    }

    #[tokio::test]
    async fn a_limit_past_the_clocks_range_never_passes() {
        let mut p = Patience::new(Duration::MAX);
        p.restart(Instant::now());
        let r = p
            .bound(
                async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    io::Result::Ok(())
                },
                Step,
            )
            .await;
        assert!(r.is_ok(), "got {r:?}");
    }

    #[tokio::test]
    async fn a_failing_io_is_charged_to_the_phase() {
        let mut p = Patience::new(Duration::from_secs(5));
        let r = p
            .bound(
                async { io::Result::<()>::Err(io::Error::other("reset")) },
                Step,
            )
            .await;
        assert!(
            matches!(r, Err(LinkError::Io { phase: Step, .. })),
            "got {r:?}"
        );
    }
}
