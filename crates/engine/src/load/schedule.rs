//! When each message starts: the budget (how many, until when) and the pacing (closed loop,
//! or an open-loop schedule of intended start times), composed in one value that every
//! worker claims slots from.
//!
//! Open loop: message `n` has an intended start time fixed by the schedule alone (constant
//! spacing or Poisson arrivals, optionally on a linear rate ramp). Workers that are busy make
//! messages start late; the lateness is measured and charged to latency, never hidden as a
//! lower rate (coordinated omission).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::shard::Shard;

/// How arrivals are spaced in open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (a Poisson process).
    Poisson,
}

/// The pacing of a run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Pacing {
    /// As fast as each connection can go.
    Closed,
    /// Intended start times at `rate` per second.
    Open {
        /// Messages per second (at the end of the ramp, if any).
        rate: f64,
        /// How starts are spaced at that rate (even, or Poisson as independent users send).
        arrivals: Arrivals,
        /// Linear ramp: start at `ramp_from` per second and reach `rate` after `ramp_over`.
        ramp_from: Option<f64>,
        /// Length of the ramp.
        #[serde(with = "humantime_serde_opt")]
        ramp_over: Option<Duration>,
    },
}

mod humantime_serde_opt {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

/// One claimed message: its sequence number and, in open loop, its intended start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Sequence number within the run, from 0.
    pub seq: u64,
    /// When the schedule wants it to start (open loop).
    pub intended: Option<Instant>,
}

struct OpenState {
    /// The next global slot's place in message-count space.
    next_u: f64,
    /// The next global sequence number (every agent walks all of them).
    next_seq: u64,
    rng: fastrand::Rng,
}

/// Hands out slots until the budget is used up or the schedule passes the deadline.
pub struct Schedule {
    start: Instant,
    pacing: Pacing,
    max_messages: u64,
    deadline: Option<Duration>,
    /// Slots this agent has claimed (closed loop).
    claimed: AtomicU64,
    /// Slots added to the count (closed loop): units an outage made up ([`Self::extend`]).
    extra: AtomicU64,
    stopped: AtomicBool,
    open: Mutex<OpenState>,
    seed: u64,
    shard: Shard,
}

impl Schedule {
    /// A schedule starting at `start`. `max_messages` of `u64::MAX` means "until the
    /// deadline". `shard` keeps this agent's stripe of the run's sequence numbers: every
    /// agent computes the whole schedule from the shared `seed` (the run id) and takes
    /// every N-th slot, so that the agents' slots together are exactly the whole run's,
    /// at the same intended times.
    pub fn new(
        start: Instant,
        pacing: Pacing,
        max_messages: u64,
        deadline: Option<Duration>,
        seed: u64,
        shard: Shard,
    ) -> Self {
        Schedule {
            start,
            pacing,
            max_messages,
            deadline,
            claimed: AtomicU64::new(0),
            extra: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            open: Mutex::new(OpenState {
                next_u: 0.0,
                next_seq: 0,
                rng: fastrand::Rng::with_seed(seed),
            }),
            seed,
            shard,
        }
    }

    /// Time zero of the run, which intended start times count from.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Stops handing out slots (shutdown, error limit).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// One more slot for this agent in closed loop (a unit that failed while the server
    /// was down on purpose, made up on a new connection), with a sequence number of its
    /// own: the count grows by one of this agent's stripes. Nothing in open loop, whose
    /// schedule is of times.
    pub fn extend(&self) {
        if matches!(self.pacing, Pacing::Closed) {
            self.extra.fetch_add(self.shard.count, Ordering::Relaxed);
        }
    }

    /// The next slot, or `None` when the run is over.
    pub fn claim(&self) -> Option<Slot> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        match self.pacing {
            Pacing::Closed => {
                if let Some(d) = self.deadline
                    && self.start.elapsed() >= d
                {
                    return None;
                }
                let k = self.claimed.fetch_add(1, Ordering::Relaxed);
                let seq = k
                    .checked_mul(self.shard.count)
                    .and_then(|s| s.checked_add(self.shard.index))
                    .filter(|s| {
                        *s < self
                            .max_messages
                            .saturating_add(self.extra.load(Ordering::Relaxed))
                    });
                let Some(seq) = seq else {
                    self.claimed.fetch_sub(1, Ordering::Relaxed);
                    return None;
                };
                Some(Slot {
                    seq,
                    intended: None,
                })
            }
            Pacing::Open { arrivals, .. } => {
                let mut st = self.open.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    let seq = st.next_seq;
                    if seq >= self.max_messages {
                        return None;
                    }
                    // Arrivals are placed in "message count" space (`u`: constant spacing
                    // 0, 1, 2, ... or unit-rate Poisson), then mapped to time through the
                    // inverse of the cumulative rate, so ramps are exact and nothing
                    // drifts. Other agents' slots are drawn too, so that the Poisson
                    // draws stay those of the whole run.
                    let u = match arrivals {
                        Arrivals::Constant => seq as f64,
                        Arrivals::Poisson => {
                            let u = st.next_u;
                            st.next_u += -(1.0 - st.rng.f64()).ln();
                            u
                        }
                    };
                    let at = self.time_of(u);
                    if let Some(d) = self.deadline
                        && at >= d.as_secs_f64()
                    {
                        return None;
                    }
                    st.next_seq = seq + 1;
                    if self.shard.owns(seq) {
                        return Some(Slot {
                            seq,
                            intended: Some(self.start + Duration::from_secs_f64(at)),
                        });
                    }
                }
            }
        }
    }

    /// How many of this agent's slots the schedule wanted started before `end` (from the
    /// run's start), and within the budget: what an open-loop run intended to send by
    /// then, whether or not it could. `None` in closed loop, where nothing is scheduled.
    pub fn due_before(&self, end: Duration) -> Option<u64> {
        let Pacing::Open { arrivals, .. } = self.pacing else {
            return None;
        };
        let end = self.deadline.map_or(end, |d| d.min(end)).as_secs_f64();
        let due = match arrivals {
            // Slot n is due at time_of(n): count the n with time_of(n) < end.
            Arrivals::Constant => {
                let (mut lo, mut hi) = (0u64, 1u64);
                while hi < self.max_messages && self.time_of(hi as f64) < end {
                    lo = hi;
                    hi = hi.saturating_mul(2);
                }
                // Invariant: time_of(lo) < end (or lo == 0), time_of(hi) >= end or hi is
                // past the budget.
                if self.time_of(0.0) >= end {
                    return Some(0);
                }
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if self.time_of(mid as f64) < end {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                lo + 1
            }
            // The same draws as the run made (the same seed), replayed.
            Arrivals::Poisson => {
                let mut rng = fastrand::Rng::with_seed(self.seed);
                let mut u = 0.0;
                let mut n = 0u64;
                while n < self.max_messages && self.time_of(u) < end {
                    n += 1;
                    u += -(1.0 - rng.f64()).ln();
                }
                n
            }
        };
        Some(self.shard.share(due.min(self.max_messages)))
    }

    /// Seconds after the start at which the cumulative count of scheduled messages reaches
    /// `u`: the inverse of ∫rate. With a ramp from r0 to r1 over T the count is
    /// r0·t + (r1−r0)·t²/(2T) until T, then grows at r1.
    fn time_of(&self, u: f64) -> f64 {
        let Pacing::Open {
            rate,
            ramp_from,
            ramp_over,
            ..
        } = self.pacing
        else {
            return 0.0;
        };
        let (Some(r0), Some(t_ramp)) = (ramp_from, ramp_over) else {
            return u / rate;
        };
        let t_ramp = t_ramp.as_secs_f64();
        let in_ramp = (r0 + rate) / 2.0 * t_ramp;
        if u >= in_ramp {
            return t_ramp + (u - in_ramp) / rate;
        }
        let a = (rate - r0) / (2.0 * t_ramp);
        if a.abs() < 1e-12 {
            return u / r0;
        }
        // a·t² + r0·t − u = 0, the positive root.
        (-r0 + (r0 * r0 + 4.0 * a * u).sqrt()) / (2.0 * a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(rate: f64, arrivals: Arrivals) -> Pacing {
        Pacing::Open {
            rate,
            arrivals,
            ramp_from: None,
            ramp_over: None,
        }
    }

    fn offsets(s: &Schedule) -> Vec<f64> {
        std::iter::from_fn(|| s.claim())
            .map(|slot| {
                slot.intended
                    .expect("open loop")
                    .duration_since(s.start)
                    .as_secs_f64()
            })
            .collect()
    }

    #[test]
    fn constant_rate_spaces_evenly_and_stops_at_the_deadline() {
        let s = Schedule::new(
            Instant::now(),
            open(100.0, Arrivals::Constant),
            u64::MAX,
            Some(Duration::from_secs(10)),
            1,
            Shard::WHOLE,
        );
        let t = offsets(&s);
        assert_eq!(t.len(), 1000, "100/s for 10 s");
        assert!((t[1] - t[0] - 0.01).abs() < 1e-9);
    }

    #[test]
    fn message_count_stops_first_when_smaller() {
        let s = Schedule::new(
            Instant::now(),
            open(100.0, Arrivals::Constant),
            50,
            Some(Duration::from_secs(10)),
            1,
            Shard::WHOLE,
        );
        assert_eq!(offsets(&s).len(), 50);
    }

    #[test]
    fn poisson_has_the_right_mean_and_varies() {
        let s = Schedule::new(
            Instant::now(),
            open(1000.0, Arrivals::Poisson),
            u64::MAX,
            Some(Duration::from_secs(100)),
            42,
            Shard::WHOLE,
        );
        let n = offsets(&s).len() as f64;
        assert!(
            (n - 100_000.0).abs() < 2_000.0,
            "got {n} arrivals, expected ~100000"
        );
    }

    #[test]
    fn a_ramp_sends_the_area_under_the_rate() {
        // 0 -> 100/s over 10 s, then 100/s for 10 s: 500 + 1000 messages.
        let s = Schedule::new(
            Instant::now(),
            Pacing::Open {
                rate: 100.0,
                arrivals: Arrivals::Constant,
                ramp_from: Some(0.0),
                ramp_over: Some(Duration::from_secs(10)),
            },
            u64::MAX,
            Some(Duration::from_secs(20)),
            1,
            Shard::WHOLE,
        );
        let n = offsets(&s).len() as f64;
        assert!((n - 1500.0).abs() < 30.0, "got {n}");
    }

    #[test]
    fn slots_due_before_a_time_match_the_slots_handed_out() {
        for arrivals in [Arrivals::Constant, Arrivals::Poisson] {
            for (rate, secs) in [(200.0, 20), (7.0, 3), (1000.0, 1)] {
                let run = Duration::from_secs(secs);
                let s = Schedule::new(
                    Instant::now(),
                    open(rate, arrivals),
                    u64::MAX,
                    Some(run),
                    9,
                    Shard::WHOLE,
                );
                let handed = offsets(&s).len() as u64;
                let again = Schedule::new(
                    Instant::now(),
                    open(rate, arrivals),
                    u64::MAX,
                    Some(run),
                    9,
                    Shard::WHOLE,
                );
                assert_eq!(
                    again.due_before(run),
                    Some(handed),
                    "{arrivals:?} {rate}/s {secs}s"
                );
                assert_eq!(again.due_before(Duration::ZERO), Some(0));
                let half = again.due_before(run / 2).expect("open loop");
                assert!(
                    half.abs_diff(handed / 2) <= handed / 10 + 2,
                    "{half} of {handed}"
                );
            }
        }
        let capped = Schedule::new(
            Instant::now(),
            open(200.0, Arrivals::Constant),
            50,
            None,
            1,
            Shard::WHOLE,
        );
        assert_eq!(capped.due_before(Duration::from_secs(20)), Some(50));
        let closed = Schedule::new(Instant::now(), Pacing::Closed, 50, None, 1, Shard::WHOLE);
        assert_eq!(closed.due_before(Duration::from_secs(20)), None);
    }

    #[test]
    fn closed_loop_hands_out_exactly_n_even_when_raced() {
        let s = std::sync::Arc::new(Schedule::new(
            Instant::now(),
            Pacing::Closed,
            10_000,
            None,
            1,
            Shard::WHOLE,
        ));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || std::iter::from_fn(|| s.claim()).count())
            })
            .collect();
        let total: usize = handles.into_iter().map(|h| h.join().expect("thread")).sum();
        assert_eq!(total, 10_000);
        s.stop();
        assert_eq!(s.claim(), None);
    }

    /// A unit made up after an outage is one more slot, with a sequence number no other
    /// slot had: agent 1 of 3 with a count of 9 has 1, 4, 7, then 10 for the one made up.
    #[test]
    fn an_extended_closed_loop_hands_out_one_new_number_per_unit_made_up() {
        let s = Schedule::new(
            Instant::now(),
            Pacing::Closed,
            9,
            None,
            1,
            Shard { index: 1, count: 3 },
        );
        let seqs = |s: &Schedule| {
            std::iter::from_fn(|| s.claim())
                .map(|x| x.seq)
                .collect::<Vec<_>>()
        };
        assert_eq!(seqs(&s), vec![1, 4, 7]);
        s.extend();
        assert_eq!(seqs(&s), vec![10]);
        s.extend();
        s.extend();
        assert_eq!(seqs(&s), vec![13, 16]);
    }

    #[test]
    fn agents_together_hand_out_exactly_the_whole_schedule() {
        let start = Instant::now();
        let slots = |pacing: Pacing, n: u64, shard: Shard| -> Vec<(u64, Option<Duration>)> {
            let s = Schedule::new(start, pacing, n, Some(Duration::from_secs(30)), 77, shard);
            std::iter::from_fn(|| s.claim())
                .map(|slot| (slot.seq, slot.intended.map(|t| t - start)))
                .collect()
        };
        let ramp = Pacing::Open {
            rate: 300.0,
            arrivals: Arrivals::Poisson,
            ramp_from: Some(10.0),
            ramp_over: Some(Duration::from_secs(5)),
        };
        for pacing in [
            Pacing::Closed,
            open(250.0, Arrivals::Constant),
            open(250.0, Arrivals::Poisson),
            ramp,
        ] {
            let whole = slots(pacing, 2_001, Shard::WHOLE);
            assert_eq!(whole.len(), 2_001);
            for count in 2..=4 {
                let mut union: Vec<_> = (0..count)
                    .flat_map(|index| {
                        let part = slots(pacing, 2_001, Shard { index, count });
                        assert!(part.iter().all(|(seq, _)| seq % count == index));
                        part
                    })
                    .collect();
                union.sort_by_key(|(seq, _)| *seq);
                assert_eq!(union, whole, "{pacing:?} over {count} agents");
                let due: u64 = (0..count)
                    .map(|index| {
                        Schedule::new(start, pacing, 2_001, None, 77, Shard { index, count })
                            .due_before(Duration::from_secs(3))
                            .unwrap_or(0)
                    })
                    .sum();
                let whole_due = Schedule::new(start, pacing, 2_001, None, 77, Shard::WHOLE)
                    .due_before(Duration::from_secs(3))
                    .unwrap_or(0);
                assert_eq!(due, whole_due, "{pacing:?}: due over {count} agents");
            }
        }
    }
}
