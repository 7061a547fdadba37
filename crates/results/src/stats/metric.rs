//! The measured quantities: one latency histogram per `Metric`. A protocol names its own
//! steps (SMTP: connect, banner, EHLO, ..., QUIT) in a [`Steps`] table and records them as
//! [`Metric::Step`]; the rest are the same for every protocol.

/// Most steps a protocol may have.
pub const MAX_STEPS: usize = 24;

/// A latency-like quantity recorded in microseconds into its own HDR histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// One step of a protocol session (for SMTP a `Phase`), by its index in the
    /// protocol's [`Steps`].
    Step(u8),
    /// One unit of work (an SMTP transaction), from its intended start (open loop) or from
    /// when its connection was free (closed loop) to its end; connection set-up is
    /// included when the unit opened one.
    Total,
    /// How late a unit started against the schedule (open loop only).
    Lag,
    /// End to end: injection to arrival at a sink (relay and sink runs).
    E2e,
}

/// A protocol's step names, in order: the names of [`Metric::Step`] in results files,
/// reports and threshold expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps(pub &'static [&'static str]);

impl Steps {
    /// No steps (a sink records end to end only).
    pub const NONE: Steps = Steps(&[]);

    /// Every metric with these steps, in report order: the steps, then total, lag, e2e.
    pub fn metrics(self) -> impl Iterator<Item = Metric> {
        (0..self.0.len().min(MAX_STEPS))
            .map(|i| Metric::Step(i as u8))
            .chain([Metric::Total, Metric::Lag, Metric::E2e])
    }

    /// The stable name of a metric.
    pub fn name(self, m: Metric) -> &'static str {
        match m {
            Metric::Step(i) => self.0.get(usize::from(i)).copied().unwrap_or("step"),
            Metric::Total => "total",
            Metric::Lag => "lag",
            Metric::E2e => "e2e",
        }
    }

    /// Looks a metric up by its name.
    pub fn find(self, name: &str) -> Option<Metric> {
        self.metrics().find(|m| self.name(*m) == name)
    }
}

impl Metric {
    /// Number of metrics; the size of a recorder's histogram array.
    pub const COUNT: usize = MAX_STEPS + 3;

    /// Position in a recorder's array.
    pub fn index(self) -> usize {
        match self {
            Metric::Step(i) => usize::from(i).min(MAX_STEPS - 1),
            Metric::Total => MAX_STEPS,
            Metric::Lag => MAX_STEPS + 1,
            Metric::E2e => MAX_STEPS + 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indexes_are_distinct() {
        let steps = Steps(&["connect", "banner"]);
        let all: Vec<Metric> = steps.metrics().collect();
        assert_eq!(all.len(), 5);
        let mut seen = std::collections::HashSet::new();
        for m in &all {
            assert!(seen.insert(m.index()), "{m:?}");
            assert!(m.index() < Metric::COUNT);
            assert_eq!(steps.find(steps.name(*m)), Some(*m));
        }
        assert_eq!(steps.name(Metric::Step(1)), "banner");
        assert_eq!(steps.find("e2e"), Some(Metric::E2e));
        assert_eq!(Steps::NONE.find("connect"), None);
    }
}
