//! The measured quantities: one latency histogram per `Metric`.

use crate::smtp::proto::Phase;

/// A latency-like quantity recorded in microseconds into its own HDR histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// One session phase (connect, banner, EHLO, ... QUIT).
    Phase(Phase),
    /// The whole transaction, from its intended start (open loop) or actual start (closed
    /// loop) to the final reply; connection set-up is included when the message opened one.
    Total,
    /// How late a send started against the schedule (open loop only).
    Lag,
    /// End to end: injection to arrival at a sink (relay runs).
    E2e,
}

impl Metric {
    /// Number of metrics; the size of a recorder's histogram array.
    pub const COUNT: usize = Phase::ALL.len() + 3;

    /// Every metric, in report order.
    pub fn all() -> impl Iterator<Item = Metric> {
        Phase::ALL
            .into_iter()
            .map(Metric::Phase)
            .chain([Metric::Total, Metric::Lag, Metric::E2e])
    }

    /// Position in a recorder's array.
    pub fn index(self) -> usize {
        match self {
            Metric::Phase(p) => p as usize,
            Metric::Total => Phase::ALL.len(),
            Metric::Lag => Phase::ALL.len() + 1,
            Metric::E2e => Phase::ALL.len() + 2,
        }
    }

    /// The stable name used in results files and threshold expressions.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Phase(p) => p.name(),
            Metric::Total => "total",
            Metric::Lag => "lag",
            Metric::E2e => "e2e",
        }
    }

    /// Looks a metric up by its name.
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::all().find(|m| m.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_dense_and_names_round_trip() {
        let all: Vec<Metric> = Metric::all().collect();
        assert_eq!(all.len(), Metric::COUNT);
        for (i, m) in all.iter().enumerate() {
            assert_eq!(m.index(), i);
            assert_eq!(Metric::from_name(m.name()), Some(*m));
        }
    }
}
