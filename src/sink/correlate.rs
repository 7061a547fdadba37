//! Correlation of arrivals with the generator's trace headers: end-to-end latency, and per
//! run the sequence numbers seen, duplicates (the same message to the same recipient twice)
//! and loss (sequence numbers never seen). Memory is bounded against hostile input.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Mutex;

use crate::message::trace::Trace;
use crate::stats::seen::{RunReport, ranges};

/// Most (sequence, recipient) arrivals remembered; beyond it arrivals are counted as
/// untracked instead of growing memory.
const MAX_TRACKED: usize = 4_000_000;
/// Most distinct run ids remembered.
const MAX_RUNS: usize = 64;

#[derive(Default)]
struct Run {
    arrivals: HashSet<(u64, u64)>,
    seqs: HashSet<u64>,
    max_seq: u64,
    duplicates: u64,
}

/// What one arrival added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Recipients seen for the first time with this sequence number.
    pub new_recipients: u64,
    /// Recipients that had this sequence number already.
    pub duplicates: u64,
    /// The sequence number itself was new.
    pub new_message: bool,
}

/// What arrived of the messages one run had accepted upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accounted {
    /// Distinct recipients of accepted messages.
    pub recipients: u64,
    /// Distinct accepted messages seen at least once.
    pub messages: u64,
    /// Distinct messages that arrived although the upstream never saw them accepted
    /// (cut off by the end of the run after the server had taken them).
    pub unexpected: u64,
}

/// Shared by all connections of a sink.
#[derive(Default)]
pub struct Correlator {
    runs: Mutex<HashMap<u64, Run>>,
    hasher: RandomState,
    /// Messages without a readable trace header, and arrivals beyond the memory cap.
    untracked: std::sync::atomic::AtomicU64,
}

impl Correlator {
    /// The key of a recipient address: a hash of its lower-case form (no allocation).
    pub fn key(&self, rcpt: &str) -> u64 {
        let mut h = self.hasher.build_hasher();
        for b in rcpt.bytes() {
            h.write_u8(b.to_ascii_lowercase());
        }
        h.finish()
    }

    /// Records one arrival for each recipient (by [`Correlator::key`]).
    pub fn arrived(&self, t: &Trace, rcpts: &[u64]) -> Arrival {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if !runs.contains_key(&t.run) && runs.len() >= MAX_RUNS {
            drop(runs);
            self.untracked_add(rcpts.len() as u64);
            return Arrival::default();
        }
        let run = runs.entry(t.run).or_default();
        let mut a = Arrival {
            new_message: run.seqs.insert(t.seq),
            ..Arrival::default()
        };
        run.max_seq = run.max_seq.max(t.seq);
        for r in rcpts {
            if run.arrivals.len() >= MAX_TRACKED {
                self.untracked_add(1);
                continue;
            }
            if run.arrivals.insert((t.seq, *r)) {
                a.new_recipients += 1;
            } else {
                run.duplicates += 1;
                a.duplicates += 1;
            }
        }
        a
    }

    /// What arrived of `run`'s messages, split by whether `accepted(seq)` says the
    /// upstream had them accepted.
    pub fn accounted(&self, run: u64, accepted: impl Fn(u64) -> bool) -> Accounted {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = runs.get(&run) else {
            return Accounted::default();
        };
        let mut out = Accounted::default();
        for seq in &r.seqs {
            if accepted(*seq) {
                out.messages += 1;
            } else {
                out.unexpected += 1;
            }
        }
        out.recipients = r.arrivals.iter().filter(|(seq, _)| accepted(*seq)).count() as u64;
        out
    }

    /// Counts messages that could not be correlated.
    pub fn untracked_add(&self, n: u64) {
        self.untracked
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Untracked arrivals.
    pub fn untracked(&self) -> u64 {
        self.untracked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Total duplicates over all runs.
    pub fn duplicates(&self) -> u64 {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.values().map(|r| r.duplicates).sum()
    }

    /// The report per run id (hex).
    pub fn report(&self) -> BTreeMap<String, RunReport> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.iter()
            .map(|(id, r)| {
                let missing_count = (r.max_seq + 1).saturating_sub(r.seqs.len() as u64);
                let missing = if missing_count == 0 {
                    Vec::new()
                } else {
                    (0..=r.max_seq)
                        .filter(|s| !r.seqs.contains(s))
                        .take(1000)
                        .collect()
                };
                (
                    format!("{id:016x}"),
                    RunReport {
                        distinct: r.seqs.len() as u64,
                        arrivals: r.arrivals.len() as u64 + r.duplicates,
                        duplicates: r.duplicates,
                        max_seq: r.max_seq,
                        missing,
                        missing_count,
                        seen: ranges(r.seqs.iter().copied()),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_gaps_are_found() {
        let c = Correlator::default();
        let t = |seq| Trace {
            run: 7,
            seq,
            sent_us: 0,
        };
        let rc = vec![c.key("a@x"), c.key("b@x")];
        assert_eq!(c.key("A@X"), rc[0], "addresses compare case-insensitively");
        assert_eq!(c.arrived(&t(0), &rc).new_recipients, 2);
        assert_eq!(c.arrived(&t(2), &rc[..1]).duplicates, 0);
        let other = c.arrived(&t(2), &rc[1..]);
        assert_eq!(
            (other.duplicates, other.new_message),
            (0, false),
            "another recipient is not a duplicate"
        );
        assert_eq!(c.arrived(&t(2), &rc[..1]).duplicates, 1);
        let r = &c.report()["0000000000000007"];
        assert_eq!(
            (r.distinct, r.duplicates, r.max_seq, r.missing_count),
            (2, 1, 2, 1)
        );
        assert_eq!(r.missing, vec![1]);
        assert_eq!(r.seen, vec![[0, 0], [2, 2]]);
        let acc = c.accounted(7, |seq| seq != 2);
        assert_eq!(
            acc,
            Accounted {
                recipients: 2,
                messages: 1,
                unexpected: 1
            }
        );
    }
}
