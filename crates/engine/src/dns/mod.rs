//! `mailbench dns`: an authoritative DNS server for synthetic zones (`spec`) or zone files
//! (`zonefile`, reading the words of `token` and each type's `rdata`), answering as
//! RFC 1034 §4.3.2 says (`zone`), with fault rules (`faults`). A sans-IO responder
//! (`answer`) answers; `server` binds UDP and TCP on each address, serves TCP and starts
//! `udp`, which serves UDP in batches from OS threads with a cache of its replies
//! (`cache`); both share one server's state (`shared`: counts, latencies, the query log),
//! counting what it is asked (`tally`) into the shared statistics layer. It answers only
//! for its own zones (REFUSED otherwise) and never recurses or forwards. The relay
//! benchmark embeds it so that a lab MTA resolves MX and address records the way it would
//! in production.

pub mod server;
pub mod shared;
pub mod tally;
pub mod udp;

/// The sans-IO core: zones, the responder, fault rules, zone files (no sockets, no runtime).
pub use mailbench_wire::dns::{answer, cache, faults, rdata, spec, token, zone, zonefile};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::run::exporter::{self, Gauge};
use crate::run::{Progress, Runner};
use crate::shutdown::Shutdown;
use crate::stats::dns::DnsSummary;
use crate::stats::kind::dns::DNS;
use crate::stats::results::{Results, RunParts};
use crate::stats::summary::{Summary, Vocabulary};

use answer::Responder;
use server::{Running, Sockets};
use shared::Shared;

pub use crate::stats::dns::STEPS;

/// What `dns`'s `--threshold` may name (its kind of run holds it).
pub const THRESHOLDS: Vocabulary = crate::stats::kind::dns::DNS.thresholds;

/// A validated `dns` run.
pub struct DnsPlan {
    /// Addresses to serve on, UDP and TCP each.
    pub listen: Vec<SocketAddr>,
    /// Zones and fault rules.
    pub responder: Arc<Responder>,
    /// One line per query to this file.
    pub query_log: Option<PathBuf>,
    /// Threads serving each UDP socket (`--threads`).
    pub threads: usize,
    /// Stop after this long.
    pub duration: Option<std::time::Duration>,
    /// Intervals and the live line.
    pub progress: Progress,
    /// The configuration as recorded in the results.
    pub config_json: serde_json::Value,
}

/// Opens the query log, if one was asked for.
fn open_log(path: Option<&PathBuf>) -> Result<Option<std::fs::File>, String> {
    path.map(|p| {
        std::fs::File::create(p)
            .map_err(|e| format!("--query-log {}: cannot create it: {e}", p.display()))
    })
    .transpose()
}

/// Serves until stopped (a signal or `duration`); returns the results.
pub async fn run(plan: DnsPlan, sockets: Sockets, shutdown: Shutdown) -> Result<Results, String> {
    let start = Instant::now();
    let log = open_log(plan.query_log.as_ref())?;
    let shared = Arc::new(Shared::new(plan.responder.clone(), start, log));
    let running = Running::start(sockets, shared.clone(), plan.threads)?;
    let mut runner = Runner::new(start, plan.progress);
    let run_id = crate::run::new_run_id();
    let deadline = plan.duration.map(|d| start + d);
    loop {
        tokio::select! {
            _ = runner.tick() => {
                let (p, total) = runner.close_interval(&shared.shards);
                exporter::publish_interval(run_id, DNS.units.noun, total, DNS.steps, &p, Vec::<Gauge>::new());
                let c = total.counters.clone();
                runner.live().update_dns(&p, &c, DNS.units);
            }
            _ = shutdown.stop.cancelled() => break,
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => break,
        }
    }
    running.stop().await;
    let finished = runner.finish(&shared.shards);
    let rules: Vec<String> = plan
        .responder
        .faults
        .rules
        .iter()
        .map(|r| r.spec.clone())
        .collect();
    let tally = shared.tally().report(&rules);
    let zones = plan.responder.authority.zone_count() as u64;
    let summary = DnsSummary::new(&tally, &finished.total, zones, finished.duration_s);
    let mut results = Results::assemble(RunParts {
        command: DNS.name,
        run_id,
        started_us: finished.started_us,
        duration_s: finished.duration_s,
        config: plan.config_json,
        summary: Summary::Dns(summary),
        steps: DNS.steps,
        self_report: finished.self_report(Vec::new()),
        total: finished.total,
        series: finished.series,
    });
    results.extra.insert("dns".into(), tally);
    results.interrupted = shutdown.interrupted();
    Ok(results)
}

#[cfg(test)]
mod tests {
    /// The wire core names its query classes; the results file names the same steps.
    #[test]
    fn the_query_classes_are_the_results_steps() {
        assert_eq!(super::faults::QClass::NAMES, super::STEPS.0);
    }
}
