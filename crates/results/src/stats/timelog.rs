//! Times per sequence number, written by many tasks at once: when the MTA accepted each
//! message (the generator), when it arrived (the sink), so that a relay matches them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Wall-clock microseconds per sequence number, written by many tasks. Bounded: beyond
/// `TimeLog::CAP` entries nothing more is kept.
#[derive(Debug)]
pub struct TimeLog {
    times: Mutex<HashMap<u64, u64>>,
    /// The count a thread waits for in [`TimeLog::wait_len`] (`u64::MAX`: none), so that
    /// only the entry that reaches it wakes anyone: the hot path makes no call otherwise.
    want: AtomicU64,
    /// Signalled when the count reaches `want`.
    reached: Condvar,
}

impl Default for TimeLog {
    fn default() -> Self {
        TimeLog {
            times: Mutex::default(),
            want: AtomicU64::new(u64::MAX),
            reached: Condvar::new(),
        }
    }
}

impl TimeLog {
    /// Most entries kept.
    pub const CAP: usize = 4_000_000;

    /// Records now for `seq` (the first time only).
    pub fn record(&self, seq: u64) {
        self.record_at(seq, super::clock::unix_us());
    }

    /// Records `us` for `seq` (the first time only).
    pub fn record_at(&self, seq: u64, us: u64) {
        let mut m = self.times.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() < Self::CAP {
            m.entry(seq).or_insert(us);
        }
        if m.len() as u64 >= self.want.load(Ordering::Relaxed) {
            self.reached.notify_all();
        }
    }

    /// Waits until `n` sequence numbers have a time, at most `limit`; the count then. A
    /// fault's trigger waits here, woken by the entry that reaches its count, not by a
    /// poll of its own (one thread waits at a time).
    pub fn wait_len(&self, n: u64, limit: Duration) -> u64 {
        let m = self.times.lock().unwrap_or_else(|p| p.into_inner());
        self.want.store(n, Ordering::Relaxed);
        let (m, _) = self
            .reached
            .wait_timeout_while(m, limit, |m| (m.len() as u64) < n)
            .unwrap_or_else(|p| p.into_inner());
        self.want.store(u64::MAX, Ordering::Relaxed);
        m.len() as u64
    }

    /// The recorded time of `seq`.
    pub fn get(&self, seq: u64) -> Option<u64> {
        self.times
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&seq)
            .copied()
    }

    /// How many sequence numbers have a time.
    pub fn len(&self) -> usize {
        self.times.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no sequence number has a time yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (seq, time) pair.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        let m = self.times.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A waiter wakes when the count it waits for is reached, not before, and returns
    /// the count at its limit when it is not.
    #[test]
    fn a_wait_ends_at_its_count_or_its_limit() {
        let log = Arc::new(TimeLog::default());
        log.record_at(1, 10);
        assert_eq!(
            log.wait_len(2, Duration::from_millis(20)),
            1,
            "limit passed"
        );
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || {
                for seq in 2..=5 {
                    std::thread::sleep(Duration::from_millis(5));
                    log.record_at(seq, 10);
                }
            })
        };
        let got = log.wait_len(3, Duration::from_secs(10));
        assert!(
            (3..=5).contains(&got),
            "expected 3 (or a little more), got {got}"
        );
        let _ = writer.join();
        assert_eq!(log.wait_len(5, Duration::from_secs(10)), 5, "already there");
    }
}
