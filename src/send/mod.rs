//! `mailbench send`: the SMTP/LMTP load generator.
//!
//! `run` takes a validated [`SendPlan`], starts one worker per connection slot, collects
//! the shards once per interval, and returns the results document. Workers compose the
//! budget and pacing of [`schedule::Schedule`]; they never print.

pub mod plan;
pub mod schedule;
pub mod worker;
pub mod workload;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::report::live::Live;
use crate::report::threshold::Vocabulary;
use crate::shutdown::Shutdown;
use crate::stats::collector::busiest_cpu;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::{Results, RunParts, SelfReport};
use crate::stats::{Collector, Metric, Shards};

pub use plan::SendPlan;
use schedule::{Pacing, Schedule};
use worker::Engine;
use workload::Workload;

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
    metrics: |m| m != Metric::E2e,
};

/// A fresh random run id.
pub fn new_run_id() -> u64 {
    fastrand::u64(1..)
}

/// Runs the plan to completion (or until stopped) and returns its results. The error is
/// the one line that says the target never accepted a connection (nothing was measured).
pub async fn run(plan: SendPlan, shutdown: Shutdown) -> Result<Results, String> {
    let run_id = plan.run_id.unwrap_or_else(new_run_id);
    let start = Instant::now();
    let started_us = crate::stats::clock::unix_us();
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
        late: worker::late_after(&plan.pacing),
        connected: AtomicBool::new(false),
        unreachable: OnceLock::new(),
        plan: plan.clone(),
    });
    let mut workers = JoinSet::new();
    for i in 0..plan.concurrency {
        workers.spawn(worker::run(i, engine.clone()));
    }

    let live = Live::new(plan.outputs.quiet);
    // When scheduling ended: the stop, or the end of --duration.
    let mut sched_end: Option<Instant> = None;
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
                let extra = plan.live_extra.as_ref().map(|f| f.line(&collector.total.counters));
                live.update(&p, &collector.total.counters, extra.as_deref().unwrap_or(""));
            }
            joined = workers.join_next() => if joined.is_none() { break },
            _ = engine.stop.cancelled(), if !stopping => {
                // Workers sleeping until their slot see the same token and leave.
                stopping = true;
                sched_end = Some(Instant::now());
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
    if let Some(why) = engine.unreachable.get() {
        live.finish();
        return Err(why.clone());
    }
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
    // What the schedule wanted started until scheduling ended, against what started.
    let sched_end = sched_end.map_or(duration, |t| t.duration_since(start));
    let intended = engine
        .schedule
        .due_before(sched_end)
        .unwrap_or(c.sent)
        .max(c.sent);
    let summary = serde_json::json!({
        "intended": intended,
        "sent": c.sent,
        "unstarted": intended - c.sent,
        "accepted": c.accepted,
        "rejected": c.rejected,
        "errors": c.errors,
        "aborted": c.aborted,
        "failed": c.rejected + c.errors,
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
    let cpu_avg = cpu.total().as_secs_f64() / secs * 100.0;
    let cpu_peak = busiest_cpu(&collector.series, interval, cpu_avg);
    let warnings = bottleneck_warnings(&plan, cpu_peak, c.late_starts, c.sent, lag, engine.late);
    let self_report = SelfReport::new(cpu, secs, cpu_peak, warnings);
    let mut results = Results::assemble(RunParts {
        command: "send",
        run_id,
        started_us,
        duration_s: secs,
        config: plan.config_json.clone(),
        summary,
        total,
        series: std::mem::take(&mut collector.series),
        self_report,
    });
    results.interrupted = shutdown.interrupted();
    results.check(&plan.thresholds);
    Ok(results)
}

/// Says when the generator, not the target, may have limited the result.
fn bottleneck_warnings(
    plan: &SendPlan,
    cpu_peak: f64,
    late: u64,
    sent: u64,
    lag: &hdrhistogram::Histogram<u64>,
    late_after: Duration,
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
        let late_ms = late_after.as_secs_f64() * 1000.0;
        if late * 100 > sent || p99 > 2.0 * late_ms {
            w.push(format!(
                "{late} of {sent} sends started more than {late_ms:.0} ms late (lag p99 {p99:.1} ms): the target did not keep up with the schedule, or -c {} connections are too few",
                plan.concurrency
            ));
        }
    }
    w
}
