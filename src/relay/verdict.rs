//! Whether a relay step at an offered rate was sustained, for the capacity search: nothing
//! lost, under 1 % failed injections, end to end under a limit, the offered load actually
//! injected, and delivery keeping pace — the backlog not growing over the step.

use std::time::Duration;

use crate::stats::Results;
use crate::stats::summary::Summary;

/// What a step must show to count as sustained.
#[derive(Debug, Clone, Copy)]
pub struct StepRules {
    /// Length of a step.
    pub step: Duration,
    /// End-to-end p99 above this fails the step, ms.
    pub max_e2e_p99_ms: f64,
}

/// Why the step at `rate` per second was not sustained, or `Ok` when it was.
pub fn judge(r: &Results, rate: f64, rules: &StepRules) -> Result<(), String> {
    let Summary::Relay(s) = &r.summary else {
        return Err("not a relay run".into());
    };
    let i = &s.injection;
    let step_s = rules.step.as_secs_f64();
    let failed = i.errors + i.rejected;
    if s.lost > 0 {
        Err(format!("{} lost", s.lost))
    } else if failed as f64 > i.sent as f64 * 0.01 {
        Err(format!("{failed} failed injections"))
    } else if s.e2e_p99_ms > rules.max_e2e_p99_ms {
        Err(format!("e2e p99 {:.0} ms", s.e2e_p99_ms))
    } else if let Err(why) = keeps_pace(&r.series, step_s, rate) {
        Err(why)
    } else if (i.accepted as f64) < rate * step_s * 0.95 {
        Err(format!("injected {} of {:.0}", i.accepted, rate * step_s))
    } else {
        Ok(())
    }
}

/// Whether delivery kept pace with an open-loop step of `step_s` seconds at `rate`: the
/// backlog (handed over minus delivered) must not grow over the step. Its trend is the mean
/// backlog of the second half of the step against the first half (the first interval,
/// while the MTA warms up, left out), projected over the whole step; growth within
/// noise is allowed: the larger of 5 messages, three standard deviations of a Poisson
/// backlog of that mean, and 2 % of the step's messages.
pub fn keeps_pace(
    series: &[crate::stats::IntervalPoint],
    step_s: f64,
    rate: f64,
) -> Result<(), String> {
    let during: Vec<(f64, f64)> = series
        .iter()
        .filter(|p| p.t_s <= step_s + 1e-3)
        .skip(1)
        .filter_map(|p| p.relay.backlog.map(|b| (p.t_s, b as f64)))
        .collect();
    if during.len() < 2 {
        return Ok(()); // too short to see a trend; the other checks still apply
    }
    let (first, second) = during.split_at(during.len() / 2);
    let mean = |v: &[(f64, f64)]| {
        let n = v.len() as f64;
        (
            v.iter().map(|p| p.0).sum::<f64>() / n,
            v.iter().map(|p| p.1).sum::<f64>() / n,
        )
    };
    let ((t1, b1), (t2, b2)) = (mean(first), mean(second));
    let per_s = (b2 - b1) / (t2 - t1).max(1e-9);
    let grew = per_s * step_s;
    let level = (b1 + b2) / 2.0;
    let noise = 5f64
        .max(3.0 * level.max(0.0).sqrt())
        .max(0.02 * rate * step_s);
    if grew > noise {
        Err(format!(
            "backlog grew by {grew:.0} over the step ({per_s:.0}/s): delivery fell behind"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(backlogs: &[i64]) -> Vec<crate::stats::IntervalPoint> {
        backlogs
            .iter()
            .enumerate()
            .map(|(i, b)| crate::stats::IntervalPoint {
                t_s: (i + 1) as f64,
                dt_s: 1.0,
                relay: crate::stats::RelayPoint {
                    backlog: Some(*b),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_growing_backlog_fails_the_step_and_a_flat_one_passes() {
        // The case: 1,250/s offered, 1,155/s delivered -> +95 per second.
        let growing: Vec<i64> = (1..=10).map(|i| 20 + 95 * i).collect();
        let err = keeps_pace(&step(&growing), 10.0, 1250.0).expect_err("must fail");
        assert!(err.contains("backlog grew by 950"), "{err}");
        // Steady delivery with noise around a level of 120 in flight.
        let flat = [100, 130, 110, 125, 118, 122, 109, 131, 115, 120];
        assert_eq!(keeps_pace(&step(&flat), 10.0, 1250.0), Ok(()));
        // After injection the backlog drains: points after the step do not count.
        let mut with_drain = flat.to_vec();
        with_drain.extend([60, 0, 0]);
        assert_eq!(keeps_pace(&step(&with_drain), 10.0, 1250.0), Ok(()));
        // 2 % over a 100/s capacity for 10 s is within tolerance, 10 % is not.
        let slightly: Vec<i64> = (1..=10).map(|i| 10 + 2 * i).collect();
        assert_eq!(keeps_pace(&step(&slightly), 10.0, 102.0), Ok(()));
        let behind: Vec<i64> = (1..=10).map(|i| 10 + 10 * i).collect();
        assert!(keeps_pace(&step(&behind), 10.0, 110.0).is_err());
    }
}
