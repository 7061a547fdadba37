//! `mailbench send`: the SMTP/LMTP load generator: the load engine (`crate::load`) driving
//! SMTP's client (`driver`) with messages built per sequence number (`workload`), as a
//! validated [`SendPlan`] (`plan`) says. `run` returns the results document.

pub mod driver;
pub mod plan;
pub mod workload;

use std::sync::Arc;

use crate::load::{self, Loaded};
use crate::shutdown::Shutdown;
use crate::stats::results::Results;
use crate::stats::summary::Vocabulary;
use crate::stats::summary::{SendSummary, Summary};

use driver::SmtpDriver;
pub use plan::SendPlan;

/// What `send`'s `--threshold` may name (its kind of run holds it).
pub const THRESHOLDS: Vocabulary = crate::stats::kind::send::SEND.thresholds;

/// Runs the plan to completion (or until stopped) and returns its results. The error is
/// the one line that says the target never accepted a connection (nothing was measured).
pub async fn run(mut plan: SendPlan, shutdown: Shutdown) -> Result<Results, String> {
    let warmed = match plan.warmup.take() {
        Some(d) => {
            announce_warmup("send", d, plan.load.progress.quiet);
            let w = Box::pin(run(plan.warm_up_for(d), shutdown.clone())).await?;
            // Agents with a shared start warmed up from it; the measured load follows.
            plan.load.start_at = plan.load.start_at.map(|t| t + d);
            Some(w)
        }
        None => None,
    };
    let mut results = measure(plan, shutdown).await?;
    if let Some(w) = warmed {
        results.extra.insert("warmup".into(), warmup_record(&w));
    }
    Ok(results)
}

/// Says that a warm-up starts (unless quiet).
pub fn announce_warmup(who: &str, d: std::time::Duration, quiet: bool) {
    if !quiet {
        crate::run::live::say(&format!(
            "mailbench {who}: warming up for {:.1} s (kept out of the statistics)",
            d.as_secs_f64()
        ));
    }
}

/// What a warm-up did, for the results file (`extra.warmup`): its length, counters and
/// summary, apart from the measured run's.
pub fn warmup_record(w: &Results) -> serde_json::Value {
    serde_json::json!({
        "duration_s": w.duration_s,
        "counters": w.counters,
        "summary": w.summary,
    })
}

/// The measured run.
async fn measure(mut plan: SendPlan, shutdown: Shutdown) -> Result<Results, String> {
    let run_id = plan.load.run_id.unwrap_or_else(crate::run::new_run_id);
    plan.load.run_id = Some(run_id);
    let config = plan.config();
    let plan = Arc::new(plan);
    let driver = SmtpDriver::new(plan.clone(), run_id);
    let signed_before = plan.message.dkim.as_ref().map(|d| d.cost());
    let loaded = load::run(plan.load.clone(), driver, shutdown).await?;
    let offset = loaded.start_offset_s;
    let mut r = results(loaded, config);
    if let Some(s) = load::shard::record(plan.load.shard, plan.load.start_at, offset) {
        r.extra.insert("shard".into(), s);
    }
    if let (Some(d), Some(before)) = (&plan.message.dkim, signed_before) {
        let c = d.cost().since(&before);
        r.extra.insert(
            "dkim".into(),
            serde_json::json!({
                "algorithm": d.algorithm(),
                "signed": c.signed,
                "failed": c.failed,
                "sign_cpu_us_mean": c.mean_us(),
                "sign_cpu_s": c.nanos as f64 / 1e9,
            }),
        );
    }
    Ok(r)
}

/// The results document of a finished send.
fn results(l: Loaded, config: serde_json::Value) -> Results {
    l.into_results(
        crate::stats::kind::send::SEND.name,
        config,
        |total, intended, duration_s, active_s| {
            Summary::Send(SendSummary::derive(total, intended, duration_s, active_s))
        },
    )
}
