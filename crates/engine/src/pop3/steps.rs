//! POP3's phases as the statistics layer's steps: the names of its latency histograms and
//! error rows, in session order.

use super::proto::Phase;
use crate::stats::{Metric, Steps};

/// POP3's step names, in `Phase::ALL` order: kept with the kind of run that times them.
pub const STEPS: Steps = crate::stats::kind::pop3::STEPS;

/// The step that records a phase.
pub fn metric(p: Phase) -> Metric {
    Metric::Step(p as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_is_named_as_its_step() {
        assert_eq!(STEPS.0.len(), Phase::ALL.len());
        for p in Phase::ALL {
            assert_eq!(STEPS.name(metric(p)), p.name(), "{p:?}");
        }
    }
}
