//! What a shaped link between two hops does to the bytes crossing it (issue 43, seed 000's
//! "add network latency one factor at a time"): a delay, a jitter on it and a bandwidth
//! cap, the same each way, as `--link HOP:delay=50ms:jitter=5ms:rate=1M` spells them (the
//! command line parses it). This kernel has no netem; [`super::shaper`] applies the shape
//! in a relay of its own.

use std::time::Duration;

/// Which hop of a relay run a link shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hop {
    /// mailbench's generator to the MTA (and the MTA's replies back).
    Mta,
    /// The MTA's deliveries to the sink (and the sink's replies back).
    Sink,
    /// Each lab MTA's relaying to the next one of a `--hops` chain (seed 000's mail
    /// passing through several relays, each link a network apart).
    MtaMta,
}

/// The shape of a link, each way: a byte that crosses it arrives `delay` (± up to
/// `jitter`, never ahead of the bytes before it) later, and no faster than `rate`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LinkShape {
    /// The hop shaped.
    pub hop: Hop,
    /// One-way delay: a request and its reply (a round trip) take twice this longer.
    #[serde(serialize_with = "ms")]
    pub delay: Duration,
    /// The delay varies by up to this much either way, uniformly.
    #[serde(serialize_with = "ms")]
    pub jitter: Duration,
    /// Bytes per second each way, `None`: as fast as loopback.
    pub rate_bytes_s: Option<u64>,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl LinkShape {
    /// This byte run's delay: `delay` moved by a uniform draw within `jitter`.
    pub fn draw_delay(&self, rng: &mut fastrand::Rng) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let j = self.jitter.as_secs_f64() * (rng.f64() * 2.0 - 1.0);
        Duration::from_secs_f64((self.delay.as_secs_f64() + j).max(0.0))
    }

    /// How long `bytes` take to cross at the rate (zero without one).
    pub fn transmit(&self, bytes: usize) -> Duration {
        self.rate_bytes_s.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(bytes as f64 / r as f64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jittered_delay_stays_within_its_jitter_and_a_rate_sets_the_time_to_cross() {
        let l = LinkShape {
            hop: Hop::Mta,
            delay: Duration::from_millis(50),
            jitter: Duration::from_millis(10),
            rate_bytes_s: Some(1000),
        };
        let mut rng = fastrand::Rng::with_seed(1);
        let d: Vec<Duration> = (0..1000).map(|_| l.draw_delay(&mut rng)).collect();
        assert!(d.iter().all(|d| (40..=60).contains(&d.as_millis())));
        assert!(d.iter().any(|d| d.as_millis() < 45) && d.iter().any(|d| d.as_millis() > 55));
        assert_eq!(l.transmit(500), Duration::from_millis(500));
    }
}
