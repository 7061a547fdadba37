//! Times per sequence number, written by many tasks at once: when the MTA accepted each
//! message (the generator), when it arrived (the sink), so that a relay matches them.

/// Wall-clock microseconds per sequence number, written by many tasks. Bounded: beyond
/// `TimeLog::CAP` entries nothing more is kept.
#[derive(Debug, Default)]
pub struct TimeLog(std::sync::Mutex<std::collections::HashMap<u64, u64>>);

impl TimeLog {
    /// Most entries kept.
    pub const CAP: usize = 4_000_000;

    /// Records now for `seq` (the first time only).
    pub fn record(&self, seq: u64) {
        self.record_at(seq, super::clock::unix_us());
    }

    /// Records `us` for `seq` (the first time only).
    pub fn record_at(&self, seq: u64, us: u64) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() < Self::CAP {
            m.entry(seq).or_insert(us);
        }
    }

    /// The recorded time of `seq`.
    pub fn get(&self, seq: u64) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&seq)
            .copied()
    }

    /// How many sequence numbers have a time (a fault's trigger polls it: no copy).
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no sequence number has a time yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (seq, time) pair.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }
}
