//! The process's alarm clock: one thread that keeps the deadlines of waits on the engine's
//! runtime, so that the runtime itself holds no timer while it waits for the network.
//!
//! With any timer pending, tokio parks in `epoll_wait` with a timeout, and the kernel arms
//! and cancels a timer of its own at every sleep: on this VM that alone cost the one-thread
//! IMAP floor client 4.8 % more CPU per command one command at a time (812 -> 851 ms of
//! task-clock for 60,000 commands, five alternating runs with and without one pending
//! 1 s timer). Waits whose deadline only matters when it passes (a connection's
//! [`crate::transport::patience::Patience`], the interval ticks, the drain's end) keep it here
//! instead: a deadline is an atomic store, and the thread wakes the waiting task when it
//! passes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// No deadline.
const NONE: u64 = u64::MAX;

/// One deadline and the task to wake when it passes; re-armed as often as needed.
pub struct Alarm {
    /// µs since the clock's epoch; [`NONE`] when disarmed.
    deadline: AtomicU64,
    /// The deadline passed (the clock disarmed it and woke the waker).
    rung: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Alarm {
    /// A disarmed alarm, known to the clock.
    pub fn new() -> Arc<Alarm> {
        let a = Arc::new(Alarm {
            deadline: AtomicU64::new(NONE),
            rung: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        let c = clock();
        lock(&c.state).alarms.push(Arc::downgrade(&a));
        a
    }

    /// Arms (or moves) the deadline to `at`; a ring not yet seen is forgotten.
    pub fn set(&self, at: Instant) {
        let c = clock();
        let us = c.us(at);
        self.rung.store(false, Ordering::SeqCst);
        self.deadline.store(us, Ordering::SeqCst);
        if us < c.next_wake.load(Ordering::SeqCst) {
            // Earlier than the clock means to wake (or it is scanning): tell it.
            lock(&c.state).dirty = true;
            c.wake.notify_one();
        }
    }

    /// True once the deadline passed since it was last set; `cx`'s task is woken when it
    /// does (registered before the check, so no ring is missed).
    pub fn poll_rung(&self, cx: &mut Context<'_>) -> bool {
        {
            let mut w = lock(&self.waker);
            match &*w {
                Some(old) if old.will_wake(cx.waker()) => {}
                _ => *w = Some(cx.waker().clone()),
            }
        }
        self.rung.load(Ordering::SeqCst)
    }

    /// Waits until `at` (at once when it has passed).
    pub fn until(&self, at: Instant) -> Until<'_> {
        self.set(at);
        Until { alarm: self, at }
    }
}

/// Ticks every `every` from a start, like tokio's `interval_at` (a tick that is late
/// comes at once, and those missed follow), on the alarm thread.
pub struct Ticker {
    alarm: Arc<Alarm>,
    next: Instant,
    every: Duration,
}

impl Ticker {
    /// The first tick at `first`, then one every `every`.
    pub fn new(first: Instant, every: Duration) -> Ticker {
        Ticker {
            alarm: Alarm::new(),
            next: first,
            every,
        }
    }

    /// Waits for the next tick. Advanced only once it came: a tick given up in a
    /// `select!` is not lost.
    pub async fn tick(&mut self) {
        self.alarm.until(self.next).await;
        self.next += self.every;
    }
}

/// The future of [`Alarm::until`].
pub struct Until<'a> {
    alarm: &'a Alarm,
    at: Instant,
}

impl Future for Until<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        if self.alarm.poll_rung(cx) {
            // A ring of an earlier deadline, seen late: arm this one again.
            self.alarm.set(self.at);
        }
        Poll::Pending
    }
}

/// The thread's shared state.
struct Clock {
    epoch: Instant,
    /// When the thread will next look (µs since the epoch); [`NONE`] while it looks or
    /// sleeps with nothing armed, so that every new deadline tells it.
    next_wake: AtomicU64,
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    alarms: Vec<Weak<Alarm>>,
    /// A deadline earlier than the thread's plan was set since it last looked.
    dirty: bool,
}

impl Clock {
    fn us(&self, at: Instant) -> u64 {
        let us = at.saturating_duration_since(self.epoch).as_micros();
        u64::try_from(us).unwrap_or(NONE - 1)
    }

    /// Rings what is due and returns the earliest deadline still ahead.
    fn ring_due(&self, alarms: &mut Vec<Weak<Alarm>>, now: u64) -> u64 {
        let mut next = NONE;
        alarms.retain(|w| {
            let Some(a) = w.upgrade() else { return false };
            let d = a.deadline.load(Ordering::SeqCst);
            if d == NONE {
                return true;
            }
            if d > now {
                next = next.min(d);
            } else if a
                .deadline
                .compare_exchange(d, NONE, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                a.rung.store(true, Ordering::SeqCst);
                if let Some(w) = lock(&a.waker).take() {
                    w.wake();
                }
            }
            true
        });
        next
    }

    fn run(&self) {
        let mut s = lock(&self.state);
        loop {
            self.next_wake.store(NONE, Ordering::SeqCst);
            s.dirty = false;
            let now = self.us(Instant::now());
            let next = self.ring_due(&mut s.alarms, now);
            self.next_wake.store(next, Ordering::SeqCst);
            // A deadline set while this looked said so through `dirty` (it waited for the
            // lock); the condition variable's wait gives the lock up atomically, so no
            // later one is missed either.
            if s.dirty {
                continue;
            }
            s = if next == NONE {
                self.wake.wait(s).unwrap_or_else(|e| e.into_inner())
            } else {
                let nap = Duration::from_micros(next - now);
                self.wake
                    .wait_timeout(s, nap)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            };
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The clock, its thread started on first use.
fn clock() -> &'static Clock {
    static CLOCK: OnceLock<&'static Clock> = OnceLock::new();
    CLOCK.get_or_init(|| {
        let c: &'static Clock = Box::leak(Box::new(Clock {
            epoch: Instant::now(),
            next_wake: AtomicU64::new(NONE),
            state: Mutex::new(State {
                alarms: Vec::new(),
                dirty: false,
            }),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("mailbench-alarm".into())
            .spawn(move || c.run());
        if let Err(e) = spawned {
            // Without the thread no deadline would ever pass: a wait could hang forever.
            panic!("cannot start the alarm clock thread: {e}");
        }
        c
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_at_its_deadline_and_not_before() {
        let a = Alarm::new();
        for ms in [30u64, 120, 5] {
            let started = Instant::now();
            a.until(started + Duration::from_millis(ms)).await;
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(ms) && took < Duration::from_millis(ms + 60),
                "a wait of {ms} ms took {took:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_deadline_moved_earlier_while_the_clock_sleeps_still_rings_on_time() {
        let far = Alarm::new();
        far.set(Instant::now() + Duration::from_secs(30));
        // The clock now plans to sleep 30 s; a new, nearer deadline must wake it.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let near = Alarm::new();
        let started = Instant::now();
        near.until(started + Duration::from_millis(50)).await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(110),
            "a 50 ms wait behind a 30 s one took {took:?}"
        );
    }

    #[tokio::test]
    async fn a_deadline_moved_later_does_not_ring_at_the_old_one() {
        let a = Alarm::new();
        let started = Instant::now();
        a.set(started + Duration::from_millis(30));
        a.set(started + Duration::from_millis(150));
        std::future::poll_fn(|cx| match a.poll_rung(cx) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        })
        .await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(150),
            "rang after {took:?}, before the deadline moved to 150 ms"
        );
    }
}
