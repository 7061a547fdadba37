//! `mailbench send`: the SMTP/LMTP load generator.
//!
//! `run` takes a validated [`SendPlan`], starts one worker per connection slot, collects
//! the shards once per interval, and returns the results document. Workers compose the
//! budget and pacing of [`schedule::Schedule`]; they never print.

pub mod plan;
pub mod schedule;
pub mod worker;
pub mod workload;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::report::live::Live;
use crate::shutdown::Shutdown;
use crate::smtp::target::Target;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::{Results, RunParts, SelfReport, now_rfc3339};
use crate::stats::{Collector, Metric, Shards};

pub use plan::SendPlan;
use schedule::{Pacing, Schedule};
use worker::Engine;
use workload::Workload;

/// Checks that every target accepts connections, so that a typo fails in one line instead
/// of as a run full of errors.
pub async fn preflight(targets: &[Target], limit: Duration) -> Result<(), String> {
    for t in targets {
        let attempt = async {
            match t {
                Target::Tcp { addr, .. } => tokio::net::TcpStream::connect(addr).await.map(drop),
                Target::Unix(p) => tokio::net::UnixStream::connect(p).await.map(drop),
            }
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(format!(
                    "target {t} is not reachable: {e}; is the server running and listening there?"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "target {t} did not accept a connection within {limit:?}; check the address and firewall"
                ));
            }
        }
    }
    Ok(())
}

/// A fresh random run id.
pub fn new_run_id() -> u64 {
    fastrand::u64(1..)
}

/// Runs the plan to completion (or until stopped) and returns its results.
pub async fn run(plan: SendPlan, shutdown: Shutdown) -> Results {
    let started_at = now_rfc3339();
    let run_id = plan.run_id.unwrap_or_else(new_run_id);
    let start = Instant::now();
    let cpu0 = CpuTimes::of_self();
    let plan = Arc::new(plan);
    let shards_n = (crate::stats::cpu::cpu_count() * 4).min(plan.concurrency.max(1));
    let engine = Arc::new(Engine {
        schedule: Schedule::new(start, plan.pacing, plan.max_messages, plan.duration, run_id),
        shards: Shards::new(shards_n),
        workload: Workload::new(&plan, run_id),
        in_flight: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        conns_opened: AtomicU64::new(0),
        last_done_us: AtomicU64::new(0),
        stop: shutdown.stop.clone(),
        plan: plan.clone(),
    });
    let mut workers = JoinSet::new();
    for i in 0..plan.concurrency {
        workers.spawn(worker::run(i, engine.clone()));
    }

    let live = Live::new(plan.outputs.quiet);
    let mut collector = Collector::new(start);
    let interval = plan.outputs.interval;
    let mut ticker = tokio::time::interval_at((start + interval).into(), interval);
    let far = start + Duration::from_secs(86_400 * 365);
    let mut drain_until = plan.duration.map_or(far, |d| start + d + plan.grace);
    let mut aborted = 0;
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let p = collector.tick(&engine.shards).clone();
                live.update(&p, &collector.total.counters, "");
            }
            joined = workers.join_next() => if joined.is_none() { break },
            _ = engine.stop.cancelled(), if !stopping => {
                // Workers sleeping until their slot see the same token and leave.
                stopping = true;
                engine.schedule.stop();
                drain_until = drain_until.min(Instant::now() + plan.grace);
            }
            _ = tokio::time::sleep_until(drain_until.into()) => {
                aborted = engine.in_flight.load(Ordering::Relaxed);
                workers.abort_all();
                break;
            }
            _ = shutdown.abort.cancelled() => {
                aborted = engine.in_flight.load(Ordering::Relaxed);
                workers.abort_all();
                break;
            }
        }
    }
    while workers.join_next().await.is_some() {}
    collector.tick(&engine.shards);
    live.finish();
    let duration = start.elapsed();
    let cpu = CpuTimes::of_self().since(&cpu0);

    let mut total = std::mem::take(&mut collector.total);
    total.counters.sent += aborted;
    total.counters.aborted += aborted;
    let c = &total.counters;
    let secs = duration.as_secs_f64().max(1e-9);
    let active_s = match engine.last_done_us.load(Ordering::Relaxed) {
        0 => secs,
        us => us as f64 / 1e6,
    };
    let lag = total.hist(Metric::Lag);
    let tot = total.hist(Metric::Total);
    let summary = serde_json::json!({
        "sent": c.sent,
        "accepted": c.accepted,
        "rejected": c.rejected,
        "errors": c.errors,
        "aborted": c.aborted,
        "failed": c.sent - c.accepted,
        "msgs_per_sec": c.accepted as f64 / active_s,
        "mpm": c.accepted as f64 / active_s * 60.0,
        "bytes": c.bytes,
        "duration_s": secs,
        "active_s": active_s,
        "connections": c.connections,
        "rcpts_accepted": c.rcpts_accepted,
        "p50_ms": crate::stats::hist::ms(tot, 0.5),
        "p99_ms": crate::stats::hist::ms(tot, 0.99),
        "lag_p99_ms": crate::stats::hist::ms(lag, 0.99),
    });
    let cpu_peak = collector
        .series
        .iter()
        .map(|p| p.cpu_pct)
        .fold(0.0, f64::max);
    let warnings = bottleneck_warnings(&plan, cpu_peak, c.late_starts, c.sent, lag);
    let self_report = SelfReport::new(cpu, secs, cpu_peak, warnings);
    let mut results = Results::assemble(RunParts {
        command: "send",
        run_id,
        started_at,
        duration_s: secs,
        config: plan.config_json.clone(),
        summary,
        total,
        series: std::mem::take(&mut collector.series),
        self_report,
    });
    results.check(&plan.thresholds);
    results
}

/// Says when the generator, not the target, may have limited the result.
fn bottleneck_warnings(
    plan: &SendPlan,
    cpu_peak: f64,
    late: u64,
    sent: u64,
    lag: &hdrhistogram::Histogram<u64>,
) -> Vec<String> {
    let mut w = Vec::new();
    let cores = crate::stats::cpu::cpu_count();
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    let usable = threads.min(cores) as f64;
    if cpu_peak >= 90.0 * usable {
        let more = if threads < cores {
            "; --threads lets it use more cores"
        } else {
            ""
        };
        w.push(format!(
            "the generator used {cpu_peak:.0} % CPU in its busiest interval, all that its {threads} thread(s) can use: it may be the bottleneck{more}"
        ));
    } else if cpu_peak >= 90.0 {
        w.push(format!(
            "the generator used {cpu_peak:.0} % of a core in its busiest interval; on a shared machine that CPU was taken from the server"
        ));
    }
    if matches!(plan.pacing, Pacing::Open { .. }) && sent > 0 {
        let p99 = crate::stats::hist::ms(lag, 0.99);
        if late * 100 > sent || p99 > 10.0 {
            w.push(format!(
                "{late} of {sent} sends started late (lag p99 {p99:.1} ms): the target did not keep up with the schedule, or -c {} connections are too few",
                plan.concurrency
            ));
        }
    }
    w
}
