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
//! resolves its destinations; `drain` the wait for deliveries; `combine` the results, on the
//! one time grid `grid` gives injection and delivery; `verdict` whether a search step was
//! sustained.

mod bench;
mod combine;
mod dns;
mod drain;
mod grid;
pub mod run;
pub mod verdict;

pub use bench::{FindMaxPlan, RelayPlan, bench};
pub use dns::RelayDns;

use crate::stats::Metric;
use crate::stats::summary::Vocabulary;

/// The numeric (and yes/no) keys of `relay`'s summary, and its metrics: what
/// `--threshold` may name.
pub const THRESHOLDS: Vocabulary = Vocabulary {
    keys: &[
        crate::send::INJECTION_KEYS,
        &[
            "expected_recipients",
            "delivered",
            "delivered_messages",
            "lost",
            "duplicates",
            "aborted_delivered",
            "bounced",
            "bounces",
            "untraced",
            "drained",
            "inject_mpm",
            "drain_mpm",
            "drain_s",
            "drain_per_recipient",
            "e2e_p50_ms",
            "e2e_p99_ms",
            "delivered_before_accept",
            "before_accept_max_ms",
            "max_backlog",
            "max_queue",
            "maillog_sent",
            "queued_left",
            "receiver_rejected",
            "max_sustainable_per_sec",
            "max_sustainable_mpm",
            "flush_held",
            "release_at_s",
            "e2e_recipient_p50_ms",
            "e2e_recipient_p99_ms",
            "dns_queries",
            "dns_queries_per_message",
            "dns_p50_ms",
            "dns_p99_ms",
            "dns_deferred",
        ],
    ],
    steps: crate::smtp::steps::STEPS,
    metrics: |_: Metric| true,
};

/// Why a relay benchmark produced no results.
#[derive(Debug)]
pub enum RelayError {
    /// The user's input: the MTA never accepted a connection, or refused a setting (exit 1).
    Usage(String),
    /// The run broke down (exit 2).
    Failed(String),
}
