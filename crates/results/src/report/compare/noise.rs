//! Telling a change from the noise: medians, spread, and a two-sided Mann-Whitney U test
//! on the per-round values of two sides (benchstat's method). A verdict needs at least
//! [`MIN_ROUNDS`] values per side: with three against three the smallest possible p is
//! 0.1, so no difference could ever show.

/// Values per side below which no verdict is given.
pub const MIN_ROUNDS: usize = 4;

/// Significance level of the test.
pub const ALPHA: f64 = 0.05;

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return 0.0;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Half the range around the median, in % of the median (0 for one value).
pub fn spread_pct(v: &[f64]) -> f64 {
    let m = median(v);
    if v.len() < 2 || m == 0.0 {
        return 0.0;
    }
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    (hi - lo) / 2.0 / m.abs() * 100.0
}

/// The two-sided p-value of the Mann-Whitney U test of `a` against `b`: exact when the
/// samples are small and untied, otherwise the normal approximation with tie and
/// continuity corrections.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Mid-ranks over the pooled sample.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|x| (*x, true))
        .chain(b.iter().map(|x| (*x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_a = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_a += pooled[i..=j].iter().filter(|p| p.1).count() as f64 * mid;
        i = j + 1;
    }
    let u = rank_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let (f1, f2) = (n1 as f64, n2 as f64);
    if ties == 0.0 && n1 * n2 <= 400 {
        return exact_p(u, n1, n2);
    }
    let mean = f1 * f2 / 2.0;
    let nf = n as f64;
    let var = f1 * f2 / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * (1.0 - normal_cdf(z))).min(1.0)
}

/// Exact two-sided p of U for untied samples: counts of U over all arrangements by the
/// recurrence f(n1, n2, u) = f(n1 − 1, n2, u − n2) + f(n1, n2 − 1, u).
fn exact_p(u: f64, n1: usize, n2: usize) -> f64 {
    let max_u = n1 * n2;
    // table[j][k]: arrangements of i firsts and j seconds with U = k, built up over i.
    let mut prev: Vec<Vec<f64>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0.0; max_u + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for _ in 1..=n1 {
        let mut cur = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for k in 0..=max_u {
                let take_first = if k >= j { prev[j][k - j] } else { 0.0 };
                cur[j][k] = take_first + cur[j - 1][k];
            }
        }
        prev = cur;
    }
    let counts = &prev[n2];
    let total: f64 = counts.iter().sum();
    let lo = u.min(max_u as f64 - u);
    let tail: f64 = counts
        .iter()
        .enumerate()
        .filter(|(k, _)| (*k as f64) <= lo + 1e-9)
        .map(|(_, c)| c)
        .sum();
    (2.0 * tail / total).min(1.0)
}

/// The standard normal distribution function (Abramowitz–Stegun 7.1.26 for erf).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Batch means of a steady-state series: the first and last values dropped (start-up and
/// a partial interval), the rest cut into `batches` consecutive groups and each averaged,
/// so that values no longer depend on their neighbours as per-interval values do.
pub fn batch_means(series: &[f64], batches: usize) -> Vec<f64> {
    if series.len() < 2 + batches * 2 {
        return Vec::new();
    }
    let steady = &series[1..series.len() - 1];
    let per = steady.len() / batches;
    steady
        .chunks(per)
        .take(batches)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(spread_pct(&[90.0, 100.0, 110.0]), 10.0);
        assert_eq!(spread_pct(&[100.0]), 0.0);
    }

    #[test]
    fn exact_p_values_match_the_published_tables() {
        // 4 against 4, fully separated: 2 × 1/70.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "expected 0.02857, got {p}");
        // 3 against 3 can never go below 0.1.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((p - 0.1).abs() < 1e-12, "expected 0.1, got {p}");
        // Interleaved samples are not different.
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]);
        assert!(
            (p - 0.685_714_285_7).abs() < 1e-9,
            "expected 0.6857 (scipy), got {p}"
        );
    }

    #[test]
    fn the_normal_approximation_agrees_with_scipy_on_tied_samples() {
        // scipy.stats.mannwhitneyu([1,2,2,3,4,5,6,7,8,9,10,11],[5,6,7,8,9,10,11,12,12,13,14,15],
        //   method="asymptotic") gives U = 24.5, p = 0.0065505 (scipy 1.x, checked here).
        let a = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0];
        let b = [
            5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 12.0, 13.0, 14.0, 15.0,
        ];
        let p = mann_whitney_p(&a, &b);
        assert!(
            (p - 0.006_550_5).abs() < 1e-6,
            "expected 0.0065505, got {p}"
        );
    }

    #[test]
    fn batch_means_drop_the_ends_and_average_groups() {
        let s: Vec<f64> = (0..22).map(f64::from).collect();
        // steady = 1..=20, 10 batches of 2: means 1.5, 3.5, …
        let b = batch_means(&s, 10);
        assert_eq!(b.len(), 10);
        assert_eq!(b[0], 1.5);
        assert_eq!(b[9], 19.5);
        assert!(batch_means(&s[..10], 10).is_empty());
    }
}
