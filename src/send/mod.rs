//! `mailbench send`: the SMTP/LMTP load generator: the load engine (`crate::load`) driving
//! SMTP's client (`driver`) with messages built per sequence number (`workload`), as a
//! validated [`SendPlan`] (`plan`) says. `run` returns the results document.

pub mod driver;
pub mod plan;
pub mod workload;

use std::sync::Arc;

use crate::load::{self, Loaded};
use crate::shutdown::Shutdown;
use crate::smtp::steps::STEPS;
use crate::stats::Metric;
use crate::stats::results::Results;
use crate::stats::summary::Vocabulary;
use crate::stats::summary::{SendSummary, Summary};

use driver::SmtpDriver;
pub use plan::SendPlan;

/// The summary keys of the injection, shared by `send` and `relay`.
pub const INJECTION_KEYS: &[&str] = &[
    "intended",
    "sent",
    "unstarted",
    "accepted",
    "rejected",
    "errors",
    "aborted",
    "failed",
    "msgs_per_sec",
    "mpm",
    "bytes",
];

/// The numeric keys of `send`'s summary, and its metrics: what `--threshold` may name.
pub const THRESHOLDS: Vocabulary = Vocabulary {
    keys: &[
        INJECTION_KEYS,
        &[
            "duration_s",
            "active_s",
            "connections",
            "rcpts_accepted",
            "p50_ms",
            "p99_ms",
            "lag_p99_ms",
        ],
    ],
    steps: STEPS,
    metrics: |m| m != Metric::E2e,
};

/// Runs the plan to completion (or until stopped) and returns its results. The error is
/// the one line that says the target never accepted a connection (nothing was measured).
pub async fn run(mut plan: SendPlan, shutdown: Shutdown) -> Result<Results, String> {
    let run_id = plan.load.run_id.unwrap_or_else(crate::run::new_run_id);
    plan.load.run_id = Some(run_id);
    let config = plan.config();
    let plan = Arc::new(plan);
    let driver = SmtpDriver::new(plan.clone(), run_id);
    let loaded = load::run(plan.load.clone(), driver, shutdown).await?;
    Ok(results(loaded, config))
}

/// The results document of a finished send.
fn results(l: Loaded, config: serde_json::Value) -> Results {
    l.into_results("send", config, |total, intended, duration_s, active_s| {
        Summary::Send(SendSummary::derive(total, intended, duration_s, active_s))
    })
}
