//! The pace the MTA delivered at, whatever its latency: what a capacity search compares
//! with the rate it offered (the drain's own rate, first injection to last arrival, is
//! lowered by the latency before the first arrival and by any straggler).

/// The pace of delivery from arrival times (wall µs, each with how many it brought):
/// units per second between the arrivals of the first and the last 5 % of the units (all
/// of them under 20), so that neither the latency before the first arrival nor a late
/// straggler or a first batch sets it; `None` under 2 arrivals or a span under 1 ms.
pub(super) fn delivery_rate(mut times: Vec<(u64, u64)>) -> Option<f64> {
    times.sort_unstable();
    let total: u64 = times.iter().map(|(_, k)| k).sum();
    if times.len() < 2 {
        return None;
    }
    let (lo, hi) = if total < 20 {
        (1, total)
    } else {
        (total.div_ceil(20), total - total / 20)
    };
    // The arrival that brought unit number `u` (counting from 1).
    let at = |u: u64| {
        let mut seen = 0;
        times
            .iter()
            .find(|(_, k)| {
                seen += k;
                seen >= u
            })
            .map_or(0, |(t, _)| *t)
    };
    let span_us = at(hi).saturating_sub(at(lo));
    (span_us >= 1000).then(|| (hi - lo) as f64 / (span_us as f64 / 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_of_arrivals_leaves_out_the_first_and_last_five_percent() {
        // 300 arrivals 10 ms apart starting 2 s late, and one straggler 5 s later: 100/s.
        let mut t: Vec<(u64, u64)> = (0..300).map(|i| (2_000_000 + i * 10_000, 1)).collect();
        t.push((10_000_000, 1));
        let r = delivery_rate(t).expect("a pace");
        assert!((r - 100.0).abs() < 0.5, "expected 100/s, got {r}");
        // Copies bringing 2 recipients each, 20 ms apart: 100 recipients a second.
        let t: Vec<(u64, u64)> = (0..100).map(|i| (i * 20_000, 2)).collect();
        let r = delivery_rate(t).expect("a pace");
        assert!((r - 100.0).abs() < 2.0, "expected 100/s, got {r}");
        // Few arrivals: first to last. One arrival, or none: no pace.
        assert_eq!(delivery_rate(vec![(0, 1), (500_000, 1)]), Some(2.0));
        assert_eq!(delivery_rate(vec![(7, 1)]), None);
        assert_eq!(delivery_rate(Vec::new()), None);
    }
}
