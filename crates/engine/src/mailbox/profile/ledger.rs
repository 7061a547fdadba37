//! The book of a profile's actions: each user's due times (drawn ahead, oldest first, the
//! front one flagged once the store has begun it), what finished per interval (the series,
//! by when it finished) and per step (the capacity, by when it fell due). An action counts
//! once, in the step whose users asked for it, at its response time as its user saw it —
//! its wait behind a login or the user's previous action included, however many steps
//! later it finished. Taking an action off its user's queue and recording it are one step
//! against a reading of the book, so a reading finds every action either finished or
//! still due, never both nor neither. An action due in the first `--settle` of its step
//! is its step's settle, booked apart and kept out of the step's figures (seed 001 judged
//! only the steady part of each step).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::stats::{Recorder, Shards};

/// A user's queue: the due times of its action in progress and those after it.
#[derive(Debug, Default)]
pub struct Queue {
    due: VecDeque<Instant>,
    /// The store has begun the front action: the user's client sent it, past the login
    /// or greeting of the connection it opened for it.
    started: bool,
}

impl Queue {
    /// How many due times are drawn.
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// True when none is drawn.
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// Draws one more due time.
    pub fn push(&mut self, due: Instant) {
        self.due.push_back(due);
    }

    /// The next action's due time.
    pub fn front(&self) -> Option<Instant> {
        self.due.front().copied()
    }
}

/// One user's queue, shared with the book.
pub type Schedule = Arc<Mutex<Queue>>;

/// An action due and not done when the book was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pending {
    /// Its user (the order users joined).
    pub user: usize,
    /// When it fell due.
    pub due: Instant,
    /// The store had begun it (it was running, not waiting).
    pub started: bool,
}

/// A reading of the book.
pub struct Reading {
    /// When it was read.
    pub at: Instant,
    /// Every action due and not done then, any step's.
    pub pending: Vec<Pending>,
    /// The steps asked for: their index and what had finished of their actions.
    pub steps: Vec<(usize, StepBook)>,
}

/// What finished of one step's actions, its settle's apart.
#[derive(Clone, Default)]
pub struct StepBook {
    /// The actions due after its settle: the step's figures.
    pub counted: Recorder,
    /// The actions due in its settle (its first `--settle`), kept out of its figures.
    pub settle: Recorder,
}

/// The book.
pub struct Ledger {
    /// What finished since the interval's start, by worker shard.
    shards: Shards,
    /// Per step, its start and what finished of the actions due in it.
    steps: Mutex<Vec<(Instant, StepBook)>>,
    /// How long the start of each step is its settle (zero: none).
    settle: Duration,
    /// Every user's queue, in the order users joined.
    users: Mutex<Vec<Schedule>>,
    /// Held (shared) while an action is recorded and taken off its queue, and (exclusive)
    /// while the book is read.
    gate: RwLock<()>,
}

impl Ledger {
    /// An empty book whose finished actions go to `shards` shards, and whose steps each
    /// begin with a `settle` of that length (zero: none).
    pub fn new(shards: usize, settle: Duration) -> Ledger {
        Ledger {
            shards: Shards::new(shards),
            steps: Mutex::new(Vec::new()),
            settle,
            users: Mutex::new(Vec::new()),
            gate: RwLock::new(()),
        }
    }

    /// A new user's queue.
    pub fn join(&self) -> Schedule {
        let q = Schedule::default();
        if let Ok(mut all) = self.users.lock() {
            all.push(q.clone());
        }
        q
    }

    /// Opens a step at `at`: actions due from then on (until the next opens) are its.
    pub fn open_step(&self, at: Instant) {
        if let Ok(mut s) = self.steps.lock() {
            s.push((at, StepBook::default()));
        }
    }

    /// The step an action due at `due` belongs to (the first one for one due before it).
    pub fn step_of(starts: &[Instant], due: Instant) -> usize {
        starts.partition_point(|s| *s <= due).saturating_sub(1)
    }

    /// Whether an action due at `due` fell in its step's settle: the first `settle` of
    /// the step it belongs to ([`Ledger::step_of`]; one due before the first step is the
    /// first step's settle when there is one).
    pub fn in_settle(starts: &[Instant], settle: Duration, due: Instant) -> bool {
        !settle.is_zero()
            && starts
                .get(Self::step_of(starts, due))
                .is_some_and(|s| due < *s + settle)
    }

    /// Notes that the store began the front action of `q`.
    pub fn started(&self, q: &Schedule) {
        if let Ok(mut q) = q.lock() {
            q.started = true;
        }
    }

    /// Records a finished action due at `due` (`record` writes it) into shard `shard` for
    /// the series and into the step it fell due in, and takes it off `q`.
    pub fn finish(&self, shard: usize, q: &Schedule, due: Instant, record: impl Fn(&mut Recorder)) {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        record(&mut self.shards.get(shard));
        if let Ok(mut steps) = self.steps.lock() {
            let i = steps.partition_point(|(s, _)| *s <= due).saturating_sub(1);
            if let Some((start, book)) = steps.get_mut(i) {
                match due < *start + self.settle {
                    true => record(&mut book.settle),
                    false => record(&mut book.counted),
                }
            }
        }
        if let Ok(mut q) = q.lock() {
            q.due.pop_front();
            q.started = false;
        }
    }

    /// Reads the book now: moves what finished since the last reading into `into`, lists
    /// what is due and not done (settles' included), and copies what finished of the steps
    /// `copy` names.
    pub fn read(&self, into: &mut Recorder, copy: &[usize]) -> Reading {
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        self.shards.drain_into(into);
        let at = Instant::now();
        let mut pending = Vec::new();
        if let Ok(all) = self.users.lock() {
            for (user, q) in all.iter().enumerate() {
                let Ok(q) = q.lock() else { continue };
                let front = q.started;
                for (i, due) in q.due.iter().take_while(|d| **d < at).enumerate() {
                    pending.push(Pending {
                        user,
                        due: *due,
                        started: i == 0 && front,
                    });
                }
            }
        }
        let steps = match self.steps.lock() {
            Ok(s) => copy
                .iter()
                .filter_map(|i| s.get(*i).map(|(_, r)| (*i, r.clone())))
                .collect(),
            Err(_) => Vec::new(),
        };
        Reading { at, pending, steps }
    }

    /// When each step opened, in order.
    pub fn starts(&self) -> Vec<Instant> {
        self.steps
            .lock()
            .map(|s| s.iter().map(|(at, _)| *at).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Metric;
    use std::time::Duration;

    fn one(rec: &mut Recorder) {
        rec.counters.sent += 1;
        rec.record(Metric::Total, Duration::from_millis(1));
    }

    /// An action counts in the step it fell due in, however late it finishes, and the
    /// book read between its due time and its end lists it as due and not done — never
    /// as both finished and due.
    #[test]
    fn an_action_counts_once_in_the_step_it_fell_due_in() {
        let t0 = Instant::now();
        let book = Ledger::new(1, Duration::ZERO);
        book.open_step(t0);
        let q = book.join();
        let due = t0 + Duration::from_millis(1);
        q.lock().unwrap().push(due);
        q.lock().unwrap().push(t0 + Duration::from_secs(3600));
        book.open_step(t0 + Duration::from_millis(2));
        std::thread::sleep(Duration::from_millis(3));
        let mut iv = Recorder::new();
        let r = book.read(&mut iv, &[0, 1]);
        assert_eq!(
            r.pending,
            [Pending {
                user: 0,
                due,
                started: false
            }]
        );
        assert_eq!(r.steps.len(), 2);
        assert!(r.steps.iter().all(|(_, b)| b.counted.counters.sent == 0));
        book.started(&q);
        let r = book.read(&mut iv, &[]);
        assert!(r.pending[0].started, "begun by the store");
        // It finishes in the second step's time: it is the first step's.
        book.finish(0, &q, due, one);
        let r = book.read(&mut iv, &[0, 1]);
        assert!(r.pending.is_empty(), "{:?}", r.pending);
        assert_eq!(
            r.steps[0].1.counted.counters.sent, 1,
            "its step: the one it fell due in"
        );
        assert_eq!(r.steps[1].1.counted.counters.sent, 0);
        assert_eq!(iv.counters.sent, 1, "and the interval it finished in");
        assert!(!q.lock().unwrap().started, "the next one has not begun");
    }

    /// Issue 43: with a 1 s settle, an action due in its step's first second is the
    /// settle's, however late it finishes; one due after it is the step's. Steps opened
    /// at 0 and 10 s; actions due at 0, 0.999, 1.0, 5, 10.5 and 11 s.
    #[test]
    fn actions_due_in_a_steps_settle_are_kept_out_of_its_counts() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let book = Ledger::new(1, Duration::from_secs(1));
        book.open_step(at(0));
        book.open_step(at(10_000));
        let q = book.join();
        let dues = [0, 999, 1000, 5000, 10_500, 11_000];
        for ms in dues {
            q.lock().unwrap().push(at(ms));
        }
        for ms in dues {
            book.finish(0, &q, at(ms), one);
        }
        let mut iv = Recorder::new();
        let r = book.read(&mut iv, &[0, 1]);
        let n = |rec: &Recorder| rec.counters.sent;
        let got: Vec<(u64, u64)> = r
            .steps
            .iter()
            .map(|(_, b)| (n(&b.counted), n(&b.settle)))
            .collect();
        assert_eq!(
            got,
            [(2, 2), (1, 1)],
            "(counted, settle) per step: 1.0 and 5 s counted in the first, 0 and 0.999 s its \
             settle; 11 s counted in the second, 10.5 s its settle"
        );
        assert_eq!(iv.counters.sent, 6, "the series has every action");
        let starts = book.starts();
        let settle = Duration::from_secs(1);
        let kept: Vec<bool> = dues
            .iter()
            .map(|ms| Ledger::in_settle(&starts, settle, at(*ms)))
            .collect();
        assert_eq!(kept, [true, true, false, false, true, false]);
        assert!(
            !Ledger::in_settle(&starts, Duration::ZERO, at(0)),
            "no settle: nothing kept out"
        );
    }

    #[test]
    fn a_due_time_belongs_to_the_last_step_opened_before_it() {
        let t = Instant::now();
        let s = |ms: u64| t + Duration::from_millis(ms);
        let starts = [s(10), s(20), s(30)];
        assert_eq!(
            Ledger::step_of(&starts, s(5)),
            0,
            "before the first: the first"
        );
        assert_eq!(Ledger::step_of(&starts, s(10)), 0);
        assert_eq!(Ledger::step_of(&starts, s(19)), 0);
        assert_eq!(Ledger::step_of(&starts, s(20)), 1);
        assert_eq!(Ledger::step_of(&starts, s(99)), 2);
    }
}
