//! A pace (`COMMAND:pace=RATE`): a receiver of a known capacity. Each reply of the
//! command takes the next free turn, turns `1/RATE` apart for all connections together,
//! and waits for it; none is refused. Past saturation the waits grow and the sender's
//! queue fills, but no more than RATE replies a second ever go out — the known limit a
//! capacity search must find.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The turns of one pace, shared by every connection.
#[derive(Debug)]
pub struct Pace {
    /// Where the turns are counted from.
    base: Instant,
    /// The next free turn, ns after `base`.
    next_ns: AtomicU64,
    /// Between two turns, ns.
    step_ns: u64,
}

impl Pace {
    /// A pace of `per_s` replies a second (above zero: the rule's parser sees to it).
    pub fn new(per_s: f64) -> Pace {
        Pace {
            base: Instant::now(),
            next_ns: AtomicU64::new(0),
            step_ns: (1e9 / per_s).round().max(1.0) as u64,
        }
    }

    /// Takes the next free turn: how long this reply must wait for it (zero when the
    /// pace is idle). An idle pace saves no turns up, so no burst goes beyond the rate.
    pub fn turn(&self) -> Duration {
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut at = now;
        let _ = self
            .next_ns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |next| {
                at = next.max(now);
                Some(at.saturating_add(self.step_ns))
            });
        Duration::from_nanos(at - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_one_step_apart_whoever_asks_and_an_idle_pace_saves_none() {
        let p = Pace::new(100.0); // 10 ms a turn
        let waits: Vec<Duration> = (0..5).map(|_| p.turn()).collect();
        // Asked at once: 0, 10, 20, 30, 40 ms (less the few µs this loop took).
        for (i, w) in waits.iter().enumerate() {
            let want = Duration::from_millis(10 * i as u64);
            assert!(
                *w <= want && want - *w < Duration::from_millis(2),
                "turn {i}: expected a wait of about {want:?}, got {w:?}"
            );
        }
        // From many threads at once: every turn distinct, so 200 turns span 2 s.
        let p = std::sync::Arc::new(Pace::new(100.0));
        let mut all: Vec<Duration> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let p = p.clone();
                    s.spawn(move || (0..50).map(|_| p.turn()).collect::<Vec<_>>())
                })
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().expect("thread"))
                .collect()
        });
        all.sort();
        let last = all.last().copied().unwrap_or_default();
        assert!(
            last >= Duration::from_millis(1_980),
            "200 turns at 100/s: the last waits about 1.99 s, got {last:?}"
        );
        // Once the turns taken are past, an idle pace answers at once, one turn only.
        let p = Pace::new(1000.0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(p.turn(), Duration::ZERO);
        assert!(p.turn() > Duration::from_micros(900), "no saved-up burst");
    }
}
