//! SMTP's phases as the statistics layer's steps: the names of its latency histograms and
//! error rows, in session order.

use super::proto::Phase;
use crate::stats::{Metric, Steps};

/// SMTP's step names, in `Phase::ALL` order: kept with the kinds of run that time them.
pub const STEPS: Steps = crate::stats::kind::send::SMTP_STEPS;

/// A phase as a statistics step.
pub trait PhaseMetric {
    /// The step that records this phase.
    fn metric(self) -> Metric;
}

impl PhaseMetric for Phase {
    fn metric(self) -> Metric {
        Metric::Step(self as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_is_named_as_its_step() {
        assert_eq!(STEPS.0.len(), Phase::ALL.len());
        for p in Phase::ALL {
            assert_eq!(STEPS.name(p.metric()), p.name(), "{p:?}");
        }
    }
}
