//! The time series' one rule for short intervals. A rate over a sliver of time is noise:
//! one scheduler tick of CPU in 3 ms reads as a busy core, one message in 2 ms as 500
//! msg/s. Runs end between two ticks, ticks missed while the process was busy come at
//! once, and a `--start-at` in the past starts with every tick already due; none of that
//! may make a point of its own. A span shorter than [`MIN_SHARE`] of an interval is
//! therefore never a point: it joins the point before it (the run's end) or the one after
//! (a tick that came too soon), so that every rate is over at least that share of an
//! interval and the points' counts still add up to the totals.

use std::time::Duration;

/// The shortest span a series point may have, as a share of the interval.
pub const MIN_SHARE: f64 = 0.25;

/// True when a span of `dt_s` seconds is too short to be a point of its own in a series
/// of `interval`s.
pub fn is_sliver(dt_s: f64, interval: Duration) -> bool {
    dt_s < interval.as_secs_f64() * MIN_SHARE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_an_interval_is_the_shortest_point() {
        let one_s = Duration::from_secs(1);
        assert!(is_sliver(0.002, one_s), "a run's last 2 ms");
        assert!(
            is_sliver(0.000_146, one_s),
            "a tick that came 146 µs after the last"
        );
        assert!(!is_sliver(0.25, one_s));
        assert!(!is_sliver(0.498, one_s), "an injection's last half second");
        assert!(is_sliver(2.0, Duration::from_secs(10)));
    }
}
