//! A server down on purpose for a while (a relay's `--fault` crash or power cut, until the
//! restarted MTA greets again). In closed loop every connection slot would otherwise spin
//! through the count while it is down: a newcomer's `relay --lab sendmail --fault
//! power-loss@100 -n 300` (64 connections) spent the 200 messages left on 128 cut
//! transactions and 72 refused connects in Sendmail's 0.28 s down, and accepted nothing
//! after its restart. With an outage, a unit whose connection it cut or refused (one
//! attempted before the server went down, or while it was down: [`Outage::cut`]) is
//! counted as it was (an error), then its worker waits for the server to be up again (at
//! most [`Outage::WAIT_AT_MOST`]) and the count gets one more unit for it, sent on a new
//! connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Whether the server is down on purpose now, and a way to wait until it is up.
#[derive(Debug)]
pub struct Outage {
    /// True while the server is down.
    down: watch::Sender<bool>,
    /// Outages begun so far: a connection opened before the last one began was cut by it,
    /// however late its worker sees the failure.
    begun: AtomicU64,
    /// Units that failed while it was down (made up by one more unit each).
    made_up: AtomicU64,
}

impl Default for Outage {
    fn default() -> Self {
        Outage {
            down: watch::Sender::new(false),
            begun: AtomicU64::new(0),
            made_up: AtomicU64::new(0),
        }
    }
}

impl Outage {
    /// The longest a worker waits for the server to be up again: a restart the lab could
    /// not finish fails the run on its own; this only keeps a worker from waiting forever.
    pub const WAIT_AT_MOST: Duration = Duration::from_secs(60);

    /// The server goes down now (set before it is killed, so that every failure the kill
    /// causes is seen inside the outage).
    pub fn begin(&self) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        self.down.send_replace(true);
    }

    /// Where the outages stand as a connection attempt starts, for [`Outage::cut`].
    pub fn mark(&self) -> Mark {
        Mark {
            begun: self.begun.load(Ordering::SeqCst),
            down: self.is_down(),
        }
    }

    /// Whether a connection attempted at `at` failed because of an outage: the server
    /// is down now, or was when it was attempted, or went down since. Not only "down
    /// now": the restarted server may greet before a worker on a loaded machine gets to
    /// the reset it was given at the kill (a closed-loop crash run made up 11 of 69
    /// such failures and spent the other 58 messages of its count).
    pub fn cut(&self, at: Mark) -> bool {
        at.down || self.is_down() || self.begun.load(Ordering::SeqCst) > at.begun
    }

    /// The server is up again (it greets): waiting workers go on.
    pub fn end(&self) {
        self.down.send_replace(false);
    }

    /// True while the server is down.
    pub fn is_down(&self) -> bool {
        *self.down.borrow()
    }

    /// Waits until the server is up, at most `limit`; false when the limit passed first.
    pub async fn wait_up(&self, limit: Duration) -> bool {
        let mut rx = self.down.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|down| !*down))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Counts `n` units that failed during the outage and were made up.
    pub(super) fn made_up(&self, n: u64) {
        self.made_up.fetch_add(n, Ordering::Relaxed);
    }

    /// Units that failed while the server was down and were made up by as many more.
    pub fn units_made_up(&self) -> u64 {
        self.made_up.load(Ordering::Relaxed)
    }
}

/// Where the outages stood when a connection was attempted ([`Outage::mark`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark {
    begun: u64,
    down: bool,
}

/// Ends the outage when dropped: a fault task that fails or is cancelled between killing
/// the server and seeing it greet must not leave the workers waiting out their limit.
pub struct EndOnDrop(pub std::sync::Arc<Outage>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiting worker goes on when the outage ends, and not before; with no end it
    /// gives up at its limit.
    #[tokio::test]
    async fn a_wait_ends_with_the_outage_or_at_its_limit() {
        let o = std::sync::Arc::new(Outage::default());
        assert!(!o.is_down());
        assert!(o.wait_up(Duration::from_millis(1)).await, "up: no wait");
        o.begin();
        assert!(o.is_down());
        assert!(
            !o.wait_up(Duration::from_millis(20)).await,
            "still down: the limit passes"
        );
        let o2 = o.clone();
        let ender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(EndOnDrop(o2));
        });
        assert!(
            o.wait_up(Duration::from_secs(5)).await,
            "ended by the guard"
        );
        assert!(!o.is_down());
        let _ = ender.await;
    }

    /// A connection attempted before an outage began, or during it, was cut by it even
    /// when its failure is seen after the server is up again; one attempted after is not.
    #[test]
    fn a_connection_is_cut_by_an_outage_that_began_after_it_was_attempted() {
        let o = Outage::default();
        let before = o.mark();
        assert!(!o.cut(before), "no outage yet");
        o.begin();
        let during = o.mark();
        o.end();
        let after = o.mark();
        assert!(o.cut(before), "attempted before the outage began");
        assert!(o.cut(during), "attempted while the server was down");
        assert!(!o.cut(after), "attempted once it was up again");
    }
}
