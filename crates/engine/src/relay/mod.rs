//! `mailbench relay`: the end-to-end relay benchmark. The generator injects into the MTA
//! under test, which relays to the embedded sink; both run in this process on one clock.
//! After injection the run waits until every accepted recipient has arrived and the MTA
//! holds nothing more (or the drain timeout passes), then reports acceptance and delivery
//! rates, end-to-end latency, backlog, loss and duplicates, beside what the MTA's
//! processes cost. Only this run's traced messages count as deliveries: the MTA's own
//! bounces and untraced mail are counted apart.
//!
//! `bench` is the whole benchmark (start-up order, sweeps and the capacity search, clean-up);
//! `run` one run of it; `dns` the embedded DNS server and the sink's addresses when the MTA
//! resolves its destinations; `drain` the wait for deliveries; `maillog` what the lab MTA's
//! log says of a run's deliveries and bounces; `pace` the pace of delivery a search judges; `qstates` a lab MTA's queues per
//! interval; `lookups` what the lab MTA's recipient lookups cost; `fault` a crash, power
//! cut or full disk during the run and what the MTA kept through it; `combine` the
//! results, on the one time grid `grid` gives injection and delivery; `verdict` whether a
//! search step was sustained.

mod bench;
mod combine;
mod dns;
mod drain;
pub mod fault;
mod grid;
mod lookups;
mod maillog;
mod pace;
mod qstates;
pub mod run;
pub mod verdict;

pub use bench::{FindMaxPlan, RelayPlan, bench};
pub use dns::RelayDns;
pub use drain::SIGNAL_NOTICE;

use crate::stats::summary::Vocabulary;

/// What `relay`'s `--threshold` may name (its kind of run holds it).
pub const THRESHOLDS: Vocabulary = crate::stats::kind::relay::RELAY.thresholds;

/// Why a relay benchmark produced no results.
#[derive(Debug)]
pub enum RelayError {
    /// The user's input: the MTA never accepted a connection, or refused a setting (exit 1).
    Usage(String),
    /// The run broke down (exit 2).
    Failed(String),
}
