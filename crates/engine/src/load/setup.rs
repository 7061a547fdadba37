//! A session that failed with what its set-up had measured before: the mailbox drivers'
//! failure, so that a session failing at login keeps its finished steps' latencies.

use super::Failure;
use crate::error::ErrorClass;
use crate::stats::{Metric, Recorder};

/// What a protocol's set-up measured (its timed steps, a login, octets written), recorded
/// once when the session it opened for failed.
pub trait SetUpMeasures {
    /// Adds the measures to `rec`.
    fn record(&self, rec: &mut Recorder);
}

/// A protocol's connection error, with the set-up's measures when the session failed to
/// open; everything else the engine asks is the error's.
#[derive(Debug)]
pub struct SetUpFailed<E, S> {
    /// What went wrong.
    pub error: E,
    /// The set-up's measures, when the session failed to open.
    pub set_up: Option<S>,
}

impl<E, S> From<E> for SetUpFailed<E, S> {
    fn from(error: E) -> Self {
        SetUpFailed {
            error,
            set_up: None,
        }
    }
}

impl<E: std::fmt::Display, S> std::fmt::Display for SetUpFailed<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<E: Failure, S: SetUpMeasures> Failure for SetUpFailed<E, S> {
    fn class(&self) -> ErrorClass {
        self.error.class()
    }

    fn step(&self) -> Metric {
        self.error.step()
    }

    fn code(&self) -> u16 {
        self.error.code()
    }

    fn reached(&self) -> bool {
        self.error.reached()
    }

    fn unreachable(&self) -> Option<String> {
        self.error.unreachable()
    }

    fn login_refused(&self) -> bool {
        self.error.login_refused()
    }

    fn record_setup(&self, rec: &mut Recorder) {
        let Some(s) = &self.set_up else { return };
        s.record(rec);
        rec.counters.mailbox.setup_failures += 1;
    }
}
