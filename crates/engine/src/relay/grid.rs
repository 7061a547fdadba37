//! The relay's one time grid for injection and delivery. The generator's points keep their
//! own spans (its last one is partial: injection ended inside it); after them the drain goes
//! on along the same interval grid until the observation ended, its last point partial too.
//! Every arrival is counted in the point whose span holds it, so that a point's rate — its
//! count over its own `dt_s` — is never a whole interval's arrivals over a sliver.

use std::time::Duration;

use crate::stats::IntervalPoint;

/// Consecutive spans from a wall-clock zero: point `i` covers `(ends[i-1], ends[i]]` µs
/// after it (the first from 0).
pub(super) struct Grid {
    zero_us: u64,
    ends: Vec<u64>,
}

impl Grid {
    /// The generator's points `injected` (their `t_s` counted from `zero_us`, wall-clock µs),
    /// then steps of `interval` on the same grid until `end_us` (wall clock).
    pub(super) fn new(
        injected: &[IntervalPoint],
        interval: Duration,
        zero_us: u64,
        end_us: u64,
    ) -> Grid {
        let step = (interval.as_micros() as u64).max(1);
        let mut ends: Vec<u64> = Vec::with_capacity(injected.len() + 8);
        for p in injected {
            let end = (p.t_s * 1e6).round().max(0.0) as u64;
            let prev = ends.last().copied().unwrap_or(0);
            ends.push(end.max(prev));
        }
        let end = end_us.saturating_sub(zero_us);
        let mut last = ends.last().copied().unwrap_or(0);
        // No span a sliver of an interval (`stats::series`): a grid line just after the
        // injection's end is passed over, and the watch's last sliver joins the point
        // before it.
        let sliver =
            |a: u64, b: u64| crate::stats::series::is_sliver((b - a) as f64 / 1e6, interval);
        while last < end || ends.is_empty() {
            let mut next = ((last / step + 1) * step).min(end.max(1));
            if next < end && sliver(last, next) {
                next = ((next / step + 1) * step).min(end);
            }
            last = next;
            ends.push(last);
        }
        let n = ends.len();
        if n > 1 && sliver(ends[n - 2], ends[n - 1]) {
            ends.remove(n - 2);
        }
        Grid { zero_us, ends }
    }

    /// How many points.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The point holding wall-clock `at_us` (the first for anything before the zero, the
    /// last for anything after the end).
    pub(super) fn index(&self, at_us: u64) -> usize {
        let t = at_us.saturating_sub(self.zero_us);
        self.ends
            .partition_point(|e| *e < t)
            .min(self.ends.len() - 1)
    }

    /// Point `i`'s end and length, seconds.
    pub(super) fn span_s(&self, i: usize) -> (f64, f64) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let end = self.ends[i];
        (end as f64 / 1e6, (end - start) as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_s: f64, dt_s: f64) -> IntervalPoint {
        IntervalPoint {
            t_s,
            dt_s,
            ..IntervalPoint::default()
        }
    }

    #[test]
    fn issue_25_8_the_drain_continues_the_generators_grid_without_gap_or_overlap() {
        // Injection ended 3.024 s in; the drain was watched until 5.4 s.
        let injected = [
            point(1.003, 1.003),
            point(2.001, 0.998),
            point(3.024, 1.023),
        ];
        let zero = 1_000_000_000;
        let g = Grid::new(&injected, Duration::from_secs(1), zero, zero + 5_400_000);
        let spans: Vec<(f64, f64)> = (0..g.len()).map(|i| g.span_s(i)).collect();
        let want = [
            (1.003, 1.003),
            (2.001, 0.998),
            (3.024, 1.023),
            (4.0, 0.976),
            (5.0, 1.0),
            (5.4, 0.4),
        ];
        assert_eq!(spans.len(), want.len(), "{spans:?}");
        for ((t, dt), (wt, wdt)) in spans.iter().zip(want) {
            assert!(
                (t - wt).abs() < 1e-9 && (dt - wdt).abs() < 1e-9,
                "expected {want:?}, got {spans:?}"
            );
        }
        // An arrival 3.5 s in belongs to the drain's first point, not the generator's last.
        assert_eq!(g.index(zero + 3_500_000), 3);
        assert_eq!(g.index(zero + 3_024_000), 2, "a span holds its end");
        assert_eq!(g.index(zero + 3_024_001), 3);
        assert_eq!(g.index(zero), 0);
        assert_eq!(
            g.index(zero + 9_000_000),
            5,
            "late ones go to the last point"
        );
    }

    #[test]
    fn issue_40_no_span_of_the_grid_is_a_sliver_of_an_interval() {
        // Injection ended 2.751 s in, the watch 4.003 s in: the grid line at 3.0 s would
        // have made a point of 0.249 s, the watch's end one of 3 ms.
        let injected = [point(1.0, 1.0), point(2.0, 1.0), point(2.751, 0.751)];
        let zero = 1_000_000_000;
        let g = Grid::new(&injected, Duration::from_secs(1), zero, zero + 4_003_000);
        let spans: Vec<(f64, f64)> = (0..g.len()).map(|i| g.span_s(i)).collect();
        let want = [(1.0, 1.0), (2.0, 1.0), (2.751, 0.751), (4.003, 1.252)];
        assert_eq!(spans.len(), want.len(), "{spans:?}");
        for ((t, dt), (wt, wdt)) in spans.iter().zip(want) {
            assert!(
                (t - wt).abs() < 1e-9 && (dt - wdt).abs() < 1e-9,
                "expected {want:?}, got {spans:?}"
            );
        }
        // Injection's last point itself takes a sliver that ends the watch.
        let g = Grid::new(&injected, Duration::from_secs(1), zero, zero + 2_800_000);
        assert_eq!(g.len(), 3);
        assert_eq!(g.span_s(2), (2.8, 0.8));
    }

    #[test]
    fn a_run_with_no_generator_points_still_has_one() {
        let g = Grid::new(&[], Duration::from_secs(1), 10, 10);
        assert_eq!(g.len(), 1);
        assert_eq!(g.index(5), 0);
    }
}
