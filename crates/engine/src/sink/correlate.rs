//! Correlation of arrivals with the generator's trace headers: end-to-end latency, and per
//! run the sequence numbers seen, duplicates (the same message to the same recipient twice)
//! and loss (sequence numbers never seen). Memory is bounded however long the sink runs:
//! what was seen is kept in blocks (`SeqMap`: a stretch that arrived whole is one entry, a
//! block with gaps a bitmap — never an entry per message), and
//! the recipients of a message are remembered only for the last [`RECENT`] sequence
//! numbers (a ring of fixed slots, filled as the run goes), to tell a duplicate from
//! another recipient's copy.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Mutex;

use super::seqmap::SeqMap;
use crate::message::trace::Trace;
use crate::stats::seen::RunReport;

/// How many sequence numbers' recipients are remembered: sequence number `s` has slot
/// `s % RECENT`, taken over by the next new number of that slot. A copy of a message whose
/// slot was taken (an MTA's retry of a deferred recipient a long while later) is told
/// apart by its recipients' count alone: recipients beyond the number already seen for it
/// are new, the others duplicates. 4 MiB per run once its numbers pass `RECENT`.
pub const RECENT: usize = 1 << 17;
/// Slots allocated at a time, as a run's sequence numbers reach them.
const CHUNK: usize = 4096;
/// Most blocks of sequence numbers still filling per run (each a bitmap of
/// [`BLOCK`](super::seqmap::BLOCK) numbers, ~200 bytes: a hostile sender's scattered numbers, or a sink
/// that sees a sparse share of a very long run); beyond it arrivals of new blocks are
/// counted as untracked instead of growing memory.
const MAX_PARTS: usize = 1 << 20;
/// Most distinct run ids remembered.
const MAX_RUNS: usize = 64;

/// The recipient keys of one recent message: one inline (the common case), or several.
#[derive(Debug)]
enum Keys {
    One(u64),
    Many(Vec<u64>),
}

impl Keys {
    fn contains(&self, k: u64) -> bool {
        match self {
            Keys::One(one) => *one == k,
            Keys::Many(v) => v.contains(&k),
        }
    }

    fn push(&mut self, k: u64) {
        match self {
            Keys::One(one) => *self = Keys::Many(vec![*one, k]),
            Keys::Many(v) => v.push(k),
        }
    }
}

/// One slot of the ring: the sequence number it holds (plus one; 0 is empty) and its
/// recipients.
type Slot = (u64, Keys);

/// The ring of remembered recipients: chunks of [`CHUNK`] slots, each allocated when a
/// sequence number first reaches it.
struct Recent(Vec<Option<Box<[Slot]>>>);

impl Default for Recent {
    fn default() -> Self {
        Recent((0..RECENT / CHUNK).map(|_| None).collect())
    }
}

impl Recent {
    /// The recipients remembered for `seq`, if its slot still holds it.
    fn get_mut(&mut self, seq: u64) -> Option<&mut Keys> {
        let i = (seq % RECENT as u64) as usize;
        let (held, keys) = self.0[i / CHUNK].as_mut()?.get_mut(i % CHUNK)?;
        (*held == seq + 1).then_some(keys)
    }

    /// Heap bytes of the slots allocated so far (recipients beyond one each not counted).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.0.iter().flatten().count() * CHUNK * std::mem::size_of::<Slot>()
    }

    /// Gives `seq`'s slot to it, with `keys`.
    fn put(&mut self, seq: u64, keys: Keys) {
        let i = (seq % RECENT as u64) as usize;
        let chunk = self.0[i / CHUNK]
            .get_or_insert_with(|| (0..CHUNK).map(|_| (0, Keys::Many(Vec::new()))).collect());
        chunk[i % CHUNK] = (seq.wrapping_add(1), keys);
    }
}

#[derive(Default)]
struct Run {
    /// Distinct recipients seen per sequence number.
    seen: SeqMap,
    /// The recipients of recent sequence numbers.
    recent: Recent,
    /// Distinct (sequence number, recipient) arrivals.
    recipients: u64,
    duplicates: u64,
}

impl Run {
    /// Counts `rcpts` arriving with `seq`.
    fn arrive(&mut self, seq: u64, rcpts: &[u64]) -> Arrival {
        let before = self.seen.get(seq);
        let mut a = Arrival {
            new_message: before.is_none(),
            ..Arrival::default()
        };
        let mut distinct = before.unwrap_or(0);
        match self.recent.get_mut(seq) {
            Some(keys) => {
                for r in rcpts {
                    if keys.contains(*r) {
                        a.duplicates += 1;
                    } else {
                        keys.push(*r);
                        a.new_recipients += 1;
                    }
                }
            }
            None if before.is_some() => {
                // Its recipients are forgotten: as many as were seen are duplicates.
                let n = rcpts.len() as u64;
                a.duplicates = n.min(u64::from(distinct));
                a.new_recipients = n - a.duplicates;
            }
            None => {
                let mut keys: Option<Keys> = None;
                for r in rcpts {
                    match &mut keys {
                        Some(k) if k.contains(*r) => a.duplicates += 1,
                        Some(k) => {
                            k.push(*r);
                            a.new_recipients += 1;
                        }
                        None => {
                            keys = Some(Keys::One(*r));
                            a.new_recipients += 1;
                        }
                    }
                }
                self.recent.put(seq, keys.unwrap_or(Keys::Many(Vec::new())));
            }
        }
        distinct = distinct.saturating_add(a.new_recipients.min(u64::from(u32::MAX)) as u32);
        self.seen.set(seq, distinct);
        self.recipients += a.new_recipients;
        self.duplicates += a.duplicates;
        a
    }
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
        if run.seen.parts() >= MAX_PARTS && !run.seen.holds_block_of(t.seq) {
            drop(runs);
            self.untracked_add(rcpts.len() as u64);
            return Arrival::default();
        }
        run.arrive(t.seq, rcpts)
    }

    /// What arrived of `run`'s messages, split by whether `accepted(seq)` says the
    /// upstream had them accepted.
    pub fn accounted(&self, run: u64, accepted: impl Fn(u64) -> bool) -> Accounted {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = runs.get(&run) else {
            return Accounted::default();
        };
        let mut out = Accounted::default();
        for (first, last, recipients) in r.seen.iter() {
            for seq in first..=last {
                if accepted(seq) {
                    out.messages += 1;
                    out.recipients += u64::from(recipients);
                } else {
                    out.unexpected += 1;
                }
            }
        }
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
                let seen = r.seen.seen();
                let max_seq = r.seen.max().unwrap_or(0);
                let distinct = r.seen.len();
                let mut missing = Vec::new();
                let mut next = 0u64;
                for [a, b] in &seen {
                    missing.extend((next..*a).take(1000 - missing.len()));
                    next = b + 1;
                }
                (
                    format!("{id:016x}"),
                    RunReport {
                        distinct,
                        arrivals: r.recipients + r.duplicates,
                        duplicates: r.duplicates,
                        max_seq,
                        missing,
                        missing_count: (max_seq + 1).saturating_sub(distinct),
                        seen,
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

    /// Issue 25 item 14: what is kept stays bounded over 400,000 messages while the counts
    /// of loss, duplicates (recent and long after) and another recipient's copy stay exact.
    #[test]
    fn issue_25_memory_is_bounded_and_the_counts_stay_exact() {
        let c = Correlator::default();
        let t = |seq| Trace {
            run: 9,
            seq,
            sent_us: 0,
        };
        let (a, b) = (c.key("a@x"), c.key("b@x"));
        let n = 400_000u64;
        let gaps: Vec<u64> = (0..n).filter(|s| s % 50_000 == 17).collect();
        for seq in (0..n).filter(|s| !gaps.contains(s)) {
            c.arrived(&t(seq), &[a]);
            if seq % 100_000 == 5 {
                // A copy straight after: a duplicate.
                assert_eq!(c.arrived(&t(seq), &[a]).duplicates, 1);
            }
        }
        // Long after (beyond the recipients remembered): a duplicate of seq 5.
        assert!(n as usize > 2 * RECENT);
        let late = c.arrived(&t(5), &[a]);
        assert_eq!(
            (late.duplicates, late.new_recipients),
            (1, 0),
            "late duplicate"
        );
        // Recent: another recipient's copy, and its duplicate.
        assert_eq!(c.arrived(&t(n - 2), &[b]).new_recipients, 1);
        assert_eq!(c.arrived(&t(n - 2), &[a, b]).duplicates, 2);
        let r = &c.report()["0000000000000009"];
        let want_dups = 4 + 1 + 2;
        assert_eq!(
            (r.distinct, r.duplicates, r.missing_count, r.max_seq),
            (n - gaps.len() as u64, want_dups, gaps.len() as u64, n - 1),
            "distinct, duplicates, missing, max"
        );
        assert_eq!(r.missing, gaps);
        assert_eq!(r.arrivals, n - gaps.len() as u64 + 1 + want_dups);
        let runs = c.runs.lock().expect("lock");
        let run = &runs[&9];
        assert_eq!(run.recent.0.len() * CHUNK, RECENT);
        // A block filling per gap, and one for the message with two recipients.
        assert_eq!(run.seen.parts(), gaps.len() + 1, "{:?}", run.seen);
        drop(runs);
        let acc = c.accounted(9, |seq| seq != n - 2);
        assert_eq!(
            (acc.messages, acc.recipients, acc.unexpected),
            (n - gaps.len() as u64 - 1, n - gaps.len() as u64 - 1, 1)
        );
    }

    /// Issue 40: over 5,000,000 sequence numbers arriving as a sink sees them — in order
    /// but overtaking each other within a window of 64, a few lost, one filled in long
    /// after — what is kept at 5 M is what was kept at 1 M (the ring of recent recipients
    /// plus a block per gap), while a duplicate long after, a duplicate out of order, the
    /// gap filled later and the lost numbers are all counted exactly.
    #[test]
    fn issue_40_memory_is_flat_from_1_m_to_5_m_and_the_counts_stay_exact() {
        let c = Correlator::default();
        let t = |seq| Trace {
            run: 40,
            seq,
            sent_us: 0,
        };
        let a = c.key("a@x");
        let n = 5_000_000u64;
        let late = 2_000_017u64;
        let lost = |s: u64| s % 250_000 == 123;
        let mut x = 88_172_645_463_325_252u64;
        let mut rng = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let bytes = |c: &Correlator| {
            let runs = c.runs.lock().expect("lock");
            let r = &runs[&40];
            (r.seen.bytes() + r.recent.bytes(), r.seen.parts())
        };
        let mut at_1m = None;
        let mut dups = 0;
        let mut window: Vec<u64> = Vec::with_capacity(64);
        for start in (0..n).step_by(64) {
            window.clear();
            window.extend((start..start + 64).filter(|s| !lost(*s) && *s != late));
            for i in (1..window.len()).rev() {
                window.swap(i, (rng() % (i as u64 + 1)) as usize);
            }
            for &seq in &window {
                let got = c.arrived(&t(seq), &[a]);
                assert_eq!((got.new_message, got.duplicates), (true, 0), "seq {seq}");
            }
            if start == 1_000_000 / 64 * 64 {
                // A copy of a message from the window just passed, after its successors.
                let again = window[0];
                assert_eq!(c.arrived(&t(again), &[a]).duplicates, 1, "out of order");
                // And of one long forgotten by the ring of recent recipients.
                const { assert!(1_000_000 > 4 * RECENT) };
                assert_eq!(c.arrived(&t(5), &[a]).duplicates, 1, "after 1 M");
                dups += 2;
                at_1m = Some(bytes(&c));
            }
        }
        let (kept_1m, parts_1m) = at_1m.expect("passed 1 M");
        let (kept_5m, parts_5m) = bytes(&c);
        // The gap filled long after it was left.
        assert!(c.arrived(&t(late), &[a]).new_message, "the late one");
        assert_eq!(c.arrived(&t(late), &[a]).duplicates, 1, "and its copy");
        dups += 1;
        let gaps: Vec<u64> = (0..n).filter(|s| lost(*s)).collect();
        let r = &c.report()["0000000000000028"];
        assert_eq!(
            (r.distinct, r.duplicates, r.missing_count, r.max_seq),
            (n - gaps.len() as u64, dups, gaps.len() as u64, n - 1),
            "distinct, duplicates, missing, max"
        );
        assert_eq!(r.missing, gaps, "lost = exactly the gaps");
        assert_eq!(r.seen.len(), gaps.len() + 1);
        // Flat: within 10 % (it is within a few kB: a block per gap).
        assert!(
            (kept_5m as f64) < 1.1 * kept_1m as f64,
            "kept {kept_1m} bytes at 1 M and {kept_5m} at 5 M"
        );
        // What grew is a block per gap left (and the one filling), not per message.
        assert!(
            parts_5m <= parts_1m + (gaps.len() - 4) + 1,
            "blocks filling: {parts_1m} at 1 M, {parts_5m} at 5 M"
        );
    }
}
