//! What has arrived, counted the way a relay benchmark needs it: a message is delivered
//! only once the sink's accepting reply has reached the client (an MTA that gave up
//! waiting for it will send the message again), and only messages of the run being
//! measured count as its deliveries — bounces (null sender) and mail without the run's
//! trace header are counted apart. A message whose body is not the one its trace header
//! describes (cut or altered on the way) still arrived — it is not lost — but is counted
//! damaged, unless an intact copy of it arrived too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::correlate::Correlator;
use crate::message::trace::Trace;
use crate::stats::timelog::TimeLog;

/// Deliveries seen so far, readable while the sink runs; shared with a relay.
#[derive(Default)]
pub struct Delivery {
    /// The run a relay waits for; `None` for a standalone sink (every traced run counts).
    pub run: Option<u64>,
    /// Trace correlation of every run seen: loss, duplicates.
    pub correlator: Correlator,
    /// First confirmed arrival of each sequence number of `run`, wall-clock µs.
    pub arrivals: TimeLog,
    /// Every confirmed copy of `run`'s messages that brought new recipients: (sequence
    /// number, arrival µs, how many) — a message fanned out to many destinations arrives
    /// many times, and its end to end per recipient is taken from these. Bounded by
    /// `TimeLog::CAP`.
    pub recipient_arrivals: Mutex<Vec<(u64, u64, u64)>>,
    /// Every confirmed copy of `run`'s messages that brought only recipients already
    /// delivered: (sequence number, arrival µs) — the duplicates a crash between delivery
    /// and the queue file's removal makes, named by message. Bounded by `TimeLog::CAP`.
    pub duplicated: Mutex<Vec<(u64, u64)>>,
    /// Distinct recipients of `run`'s messages delivered.
    pub recipients: AtomicU64,
    /// Distinct messages of `run` delivered.
    pub messages: AtomicU64,
    /// Milliseconds after the sink's start of the latest new message of `run`.
    pub last_ms: AtomicU64,
    /// Messages with the null sender: bounces and other notifications.
    pub bounces: AtomicU64,
    /// Recipients reported failed by bounces of `run`'s messages, per sequence number.
    pub bounced: Mutex<HashMap<u64, u64>>,
    /// Delay notices of `run`'s messages: notices to the null sender that report
    /// recipients late (`Action: delayed`) and none failed — warnings, not bounces.
    pub delay_notices: AtomicU64,
    /// Messages with no readable trace header, or (with `run` set) another run's.
    pub untraced: AtomicU64,
    /// Copies of any run's messages whose body was not the one sent (cut or altered).
    pub damaged_copies: AtomicU64,
    /// `run`'s messages of which a damaged copy arrived, by sequence number, each with
    /// whether an intact copy arrived too. Bounded by `TimeLog::CAP`.
    pub damaged: Mutex<BTreeMap<u64, bool>>,
    /// Milliseconds after the sink's start of the latest confirmed delivery of any kind.
    pub last_any_ms: AtomicU64,
}

/// One confirmed delivery, as the connection hands it over.
pub struct Confirmed<'a> {
    /// The trace header, when the message had one (for a bounce: the returned message's,
    /// with the recipients it reports failed).
    pub trace: Option<Trace>,
    /// For a bounce, how many recipients it reports failed.
    pub bounced: u64,
    /// For a notice to the null sender, how many recipients it reports only late.
    pub delayed: u64,
    /// Its body is not the one its trace header describes.
    pub damaged: bool,
    /// Correlation keys of the recipients it was accepted for.
    pub keys: &'a [u64],
    /// The envelope sender was null.
    pub null_sender: bool,
}

impl Delivery {
    /// A delivery record that waits for run `run`.
    pub fn tracking(run: u64) -> Delivery {
        Delivery {
            run: Some(run),
            ..Delivery::default()
        }
    }

    /// Counts one confirmed delivery at `now_us` (wall clock) and `now_ms` (since start).
    pub fn confirm(&self, c: &Confirmed<'_>, now_us: u64, now_ms: u64) {
        self.last_any_ms.store(now_ms, Ordering::Relaxed);
        if c.null_sender {
            self.bounces.fetch_add(1, Ordering::Relaxed);
            if let (Some(run), Some(t)) = (self.run, c.trace)
                && run == t.run
            {
                if c.bounced > 0 {
                    let mut b = self.bounced.lock().unwrap_or_else(|p| p.into_inner());
                    if b.len() < TimeLog::CAP {
                        *b.entry(t.seq).or_insert(0) += c.bounced;
                    }
                } else if c.delayed > 0 {
                    self.delay_notices.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        let Some(t) = c.trace else {
            self.correlator.untracked_add(c.keys.len() as u64);
            self.untraced.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let a = self.correlator.arrived(&t, c.keys);
        if c.damaged {
            self.damaged_copies.fetch_add(1, Ordering::Relaxed);
        }
        if self.run.is_some_and(|run| run != t.run) {
            self.untraced.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.run.is_some() {
            // Only once something arrived damaged is an intact copy looked up.
            if c.damaged || self.damaged_copies.load(Ordering::Relaxed) > 0 {
                self.note_body(t.seq, c.damaged, a.new_message);
            }
            self.arrivals.record_at(t.seq, now_us);
            if a.duplicates > 0 && a.new_recipients == 0 {
                let mut d = self.duplicated.lock().unwrap_or_else(|p| p.into_inner());
                if d.len() < TimeLog::CAP {
                    d.push((t.seq, now_us));
                }
            }
            if a.new_recipients > 0 {
                let mut r = self
                    .recipient_arrivals
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if r.len() < TimeLog::CAP {
                    r.push((t.seq, now_us, a.new_recipients));
                }
            }
        }
        self.recipients
            .fetch_add(a.new_recipients, Ordering::Relaxed);
        if a.new_message {
            self.messages.fetch_add(1, Ordering::Relaxed);
            self.last_ms.store(now_ms, Ordering::Relaxed);
        }
    }
}

impl Delivery {
    /// Notes a copy of `run`'s message `seq` whose body was `damaged` or not; `new` when
    /// it is the message's first copy (otherwise an earlier copy that is not noted damaged
    /// was intact: every damaged copy is noted).
    fn note_body(&self, seq: u64, damaged: bool, new: bool) {
        let mut d = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(intact) = d.get_mut(&seq) {
            *intact |= !damaged;
        } else if damaged && d.len() < TimeLog::CAP {
            d.insert(seq, !new);
        }
    }

    /// The messages `accepted(seq)` says the upstream had accepted that arrived only
    /// damaged (no intact copy), in order.
    pub fn damaged_only(&self, accepted: impl Fn(u64) -> bool) -> Vec<u64> {
        let d = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        d.iter()
            .filter(|(seq, intact)| !**intact && accepted(**seq))
            .map(|(seq, _)| *seq)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tracked_runs_mail_counts_as_delivered() {
        let d = Delivery::tracking(7);
        let keys = [d.correlator.key("a@x"), d.correlator.key("b@x")];
        let trace = |run, seq| {
            Some(Trace {
                run,
                seq,
                sent_us: 0,
            })
        };
        let mine = Confirmed {
            trace: trace(7, 1),
            bounced: 0,
            delayed: 0,
            damaged: false,
            keys: &keys,
            null_sender: false,
        };
        d.confirm(&mine, 100, 1);
        d.confirm(&mine, 200, 2); // a duplicate adds nothing
        d.confirm(
            &Confirmed {
                trace: trace(7, 2),
                bounced: 1,
                delayed: 0,
                damaged: false,
                keys: &keys[..1],
                null_sender: true,
            },
            300,
            3,
        );
        d.confirm(
            &Confirmed {
                trace: None,
                bounced: 0,
                delayed: 0,
                damaged: false,
                keys: &keys[..1],
                null_sender: false,
            },
            400,
            4,
        );
        d.confirm(
            &Confirmed {
                trace: trace(8, 1),
                bounced: 0,
                delayed: 0,
                damaged: false,
                keys: &keys[..1],
                null_sender: false,
            },
            500,
            5,
        );
        // A delay notice of message 3: a notice, not a bounce.
        d.confirm(
            &Confirmed {
                trace: trace(7, 3),
                bounced: 0,
                delayed: 1,
                damaged: false,
                keys: &keys[..1],
                null_sender: true,
            },
            600,
            6,
        );
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((n(&d.messages), n(&d.recipients)), (1, 2));
        assert_eq!((n(&d.bounces), n(&d.untraced)), (2, 2));
        assert_eq!(n(&d.delay_notices), 1);
        assert_eq!((n(&d.last_ms), n(&d.last_any_ms)), (1, 6));
        assert_eq!(d.arrivals.get(1), Some(100), "the first arrival is kept");
        assert_eq!(d.arrivals.get(2), None, "a bounce is not an arrival");
        assert_eq!(
            *d.duplicated.lock().expect("lock"),
            vec![(1, 200)],
            "the second copy of message 1 is named as its duplicate, and no other"
        );
        let bounced = d.bounced.lock().expect("lock");
        assert_eq!(
            bounced.get(&2),
            Some(&1),
            "but it says which message bounced"
        );
        assert_eq!(bounced.get(&3), None, "a delay notice is no bounce");
    }

    /// Issue 42: a message that arrived only cut or altered is damaged (and still
    /// delivered: it arrived); one with an intact copy too, before or after, is not.
    #[test]
    fn issue_42_a_message_that_arrived_only_cut_is_damaged() {
        let d = Delivery::tracking(7);
        let keys = [d.correlator.key("a@x")];
        let copy = |seq, damaged| Confirmed {
            trace: Some(Trace {
                run: 7,
                seq,
                sent_us: 0,
            }),
            bounced: 0,
            delayed: 0,
            damaged,
            keys: &keys,
            null_sender: false,
        };
        d.confirm(&copy(1, false), 1, 1);
        d.confirm(&copy(2, true), 2, 2); // cut, and nothing else of it
        d.confirm(&copy(3, true), 3, 3); // cut, then an intact copy
        d.confirm(&copy(3, false), 4, 4);
        d.confirm(&copy(1, true), 5, 5); // intact first, then a cut copy
        d.confirm(&copy(4, true), 6, 6); // cut, but not accepted upstream
        d.confirm(&copy(5, true), 7, 7); // cut twice
        d.confirm(&copy(5, true), 8, 8);
        assert_eq!(d.damaged_only(|seq| seq != 4), vec![2, 5]);
        assert_eq!(d.damaged_copies.load(Ordering::Relaxed), 6);
        assert_eq!(d.messages.load(Ordering::Relaxed), 5, "all arrived");
    }
}
