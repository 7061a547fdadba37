//! `mailbench sink`: an SMTP/LMTP receiver that discards (or stores) mail, with fault
//! injection, trace correlation and the shared statistics layer.
//!
//! The caller binds the listeners first (so a busy port fails before anything runs); `run`
//! accepts connections (one task each, see `conn`), collects the shards once per interval,
//! stops on a signal or an exit condition, and returns the results document. The parts:
//! `plan` (what the command line validated), `faults` (what a difficult receiver does),
//! `store` (discard, maildir, mbox or files), `bounce` (DSNs for recipients flagged so),
//! `dkim` (verifying signatures), `correlate` (end to end, duplicates and loss from the
//! trace headers, with the sequence numbers seen kept in blocks by `seqmap`), and `delivery` (what
//! has arrived, counted the way a relay benchmark needs it).

pub mod bounce;
pub mod conn;
pub mod correlate;
pub mod delivery;
pub mod dkim;
pub mod faults;
pub mod plan;
pub mod seqmap;
pub mod store;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::run::exporter::{self, Gauge};
use crate::run::{Finished, Runner};
use crate::shutdown::Shutdown;
use crate::stats::Shards;
use crate::stats::kind::sink::SINK;
use crate::stats::results::{Results, RunParts};
use crate::stats::seen::RunReport;
use crate::stats::summary::{BouncesSent, SinkSummary, SinkTallies, Summary, Vocabulary};
use crate::transport::listen::{Listener, accept};
use crate::transport::stream::Stream;

use conn::Shared;
use delivery::Delivery;
use faults::FaultState;
use plan::SinkPlan;

/// What `sink`'s `--threshold` may name (its kind of run holds it).
pub const THRESHOLDS: Vocabulary = crate::stats::kind::sink::SINK.thresholds;

/// Serves until stopped; returns the results. `delivery` is updated as messages arrive and
/// its times count from `start`.
pub async fn run(
    plan: SinkPlan,
    listeners: Vec<Listener>,
    shutdown: Shutdown,
    delivery: Arc<Delivery>,
    start: Instant,
) -> Results {
    let config_json = plan.config_json.clone();
    let progress = plan.progress;
    if let Some(v) = &plan.dkim {
        // A verifier shared by a relay's runs counts each run apart.
        v.reset();
    }
    let (duration, exit_idle) = (plan.duration, plan.exit_after_idle);
    let bouncer = plan
        .bounce_to
        .map(|t| bounce::Bouncer::start(t, plan.server.hostname.clone()));
    let sh = Arc::new(Shared {
        faults: FaultState::new(plan.faults.clone()),
        plan,
        shards: Shards::new(crate::stats::cpu::cpu_count() * 4),
        messages: AtomicU64::new(0),
        open: AtomicU64::new(0),
        last_activity_ms: AtomicU64::new(0),
        first_input_ms: std::sync::OnceLock::new(),
        refused: AtomicU64::new(0),
        sessions_refused: AtomicU64::new(0),
        abandoned: AtomicU64::new(0),
        unconfirmed: AtomicU64::new(0),
        stored: store::StoreCounts::default(),
        start,
        delivery,
        bouncer,
        stop: shutdown.stop.clone(),
    });
    let mut acceptors = JoinSet::new();
    // Connection tasks are tracked, not collected: a finished one is freed at once, so a
    // long run of short connections does not grow memory. `cut` ends stragglers.
    let conns = TaskTracker::new();
    let cut = CancellationToken::new();
    for l in listeners {
        acceptors.spawn(accept_loop(l, sh.clone(), conns.clone(), cut.clone()));
    }
    let mut runner = Runner::new(start, progress);
    let run_id = sh.plan.run_id.unwrap_or_else(crate::run::new_run_id);
    // A relay's sink: `/metrics` shows the relay's figures, with this sink's deliveries.
    let embedded = sh.delivery.run.is_some();
    if embedded {
        let d = sh.delivery.clone();
        exporter::follow_delivery(Arc::new(move || {
            (
                d.recipients.load(Ordering::Relaxed),
                d.messages.load(Ordering::Relaxed),
            )
        }));
    }
    let deadline = duration.map(|d| start + d);
    loop {
        // When the sink has been idle for --exit-after-idle, given the last activity so far
        // (none yet: not before the next tick looks again).
        let idle_end = exit_idle.and_then(|idle| {
            let last = sh.last_activity_ms.load(Ordering::Relaxed);
            (last > 0).then(|| start + Duration::from_millis(last) + idle)
        });
        tokio::select! {
            _ = runner.tick() => {
                let (p, total) = runner.close_interval(&sh.shards);
                let open = sh.open.load(Ordering::Relaxed);
                if embedded {
                    exporter::refresh_delivery();
                } else {
                    let gauge = Gauge { name: "open_connections", help: "Sessions open now.", value: open as f64 };
                    exporter::publish_interval(run_id, SINK.units.noun, total, SINK.steps, &p, vec![gauge]);
                }
                let counters = total.counters.clone();
                let extra = format!("  open {open}");
                runner.live().update_sink(&p, &counters, SINK.units, &extra);
            }
            // Checked at its own instant, not at the next interval's tick (up to 1 s late).
            _ = async { match idle_end { Some(t) => tokio::time::sleep_until(t.into()).await, None => std::future::pending().await } } => {
                let last = sh.last_activity_ms.load(Ordering::Relaxed);
                if exit_idle.is_some_and(|idle| start.elapsed().as_millis() as u64 - last >= idle.as_millis() as u64) {
                    sh.stop.cancel();
                }
            }
            _ = sh.stop.cancelled() => break,
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => break,
        }
    }
    sh.stop.cancel();
    acceptors.abort_all();
    while acceptors.join_next().await.is_some() {}
    // Open connections see the stop token, say 421 and end; give them a moment.
    conns.close();
    tokio::select! {
        _ = tokio::time::timeout(Duration::from_secs(5), conns.wait()) => {}
        _ = shutdown.abort.cancelled() => {}
    }
    cut.cancel();
    conns.wait().await;
    let finished = runner.finish(&sh.shards);
    // Once: the report sorts every sequence number seen into ranges.
    let runs = sh.delivery.correlator.report();
    let summary = summarize(&sh, &finished, &runs);
    let cpu_peak = finished.cpu_peak_pct();
    let mut warnings = Vec::new();
    if cpu_peak >= 90.0 * crate::stats::cpu::cpu_count() as f64 {
        warnings.push(format!(
            "the sink used {cpu_peak:.0} % CPU in its busiest interval: it may be the bottleneck"
        ));
    }
    let mut results = Results::assemble(RunParts {
        command: SINK.name,
        run_id,
        started_us: finished.started_us,
        duration_s: finished.duration_s,
        config: config_json,
        summary: Summary::Sink(summary),
        steps: SINK.steps,
        self_report: finished.self_report(warnings),
        total: finished.total,
        series: finished.series,
    });
    results.extra.insert(
        "runs".into(),
        serde_json::to_value(&runs).unwrap_or_default(),
    );
    if let Some(v) = &sh.plan.dkim {
        results.extra.insert("dkim_verify".into(), v.report());
    }
    if !matches!(sh.plan.store, store::Store::Discard) {
        results
            .extra
            .insert("store".into(), sh.stored.report(sh.plan.fsync));
    }
    results.interrupted = shutdown.interrupted();
    results
}

/// Accepts connections on one listener until the sink stops; each is served by its own
/// tracked task, which `cut` ends if it outlives the stop.
async fn accept_loop(l: Listener, sh: Arc<Shared>, conns: TaskTracker, cut: CancellationToken) {
    let mut next_id = 0usize;
    loop {
        let accepted = tokio::select! {
            _ = sh.stop.cancelled() => return,
            a = accept(&l) => a,
        };
        let Ok((stream, ip)) = accepted else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // A relay counts what the MTA sends its next hop (below TLS, as it crossed).
        let stream = match (stream, &sh.plan.count) {
            (Stream::Tcp(t), Some(tally)) => Stream::Counted(tally.count(t)),
            (s, _) => s,
        };
        next_id += 1;
        let (sh, cut) = (sh.clone(), cut.clone());
        conns.spawn(async move {
            tokio::select! {
                _ = conn::serve(stream, ip, sh, next_id) => {}
                _ = cut.cancelled() => {}
            }
        });
    }
}

/// The sink's summary, from what it recorded and counted, and its runs' report.
fn summarize(sh: &Shared, f: &Finished, runs: &BTreeMap<String, RunReport>) -> SinkSummary {
    let d = &sh.delivery;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let tallies = SinkTallies {
        refused: load(&sh.refused),
        sessions_refused: load(&sh.sessions_refused),
        abandoned: load(&sh.abandoned),
        unconfirmed: load(&sh.unconfirmed),
        null_sender: load(&d.bounces),
        untracked: d.correlator.untracked(),
        duplicates: d.correlator.duplicates(),
        missing: runs.values().map(|r| r.missing_count).sum(),
        damaged: load(&d.damaged_copies),
        faults: sh
            .faults
            .counts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        bounces: sh.bouncer.as_ref().map(|b| BouncesSent {
            sent: load(&b.counts.sent),
            failed: load(&b.counts.failed),
            dropped: load(&b.counts.dropped),
        }),
    };
    // From the first client's first byte to the last delivery: not the wait for clients
    // before, nor the idle tail after (--exit-after-idle, or a Ctrl-C minutes later).
    let active_s = sh.first_input_ms.get().map_or(f.duration_s, |&first| {
        d.last_any_ms.load(Ordering::Relaxed).saturating_sub(first) as f64 / 1000.0
    });
    SinkSummary::derive(&f.total, tallies, f.duration_s, active_s)
}
