//! `mailbench sink`: an SMTP/LMTP receiver that discards (or stores) mail, with fault
//! injection, trace correlation and the shared statistics layer.
//!
//! `bind` opens the listeners (so a busy port fails before anything runs); `run` accepts
//! connections (one task each, see `conn`), collects the shards once per interval, stops on
//! a signal or an exit condition, and returns the results document.

pub mod bounce;
pub mod conn;
pub mod correlate;
pub mod delivery;
pub mod faults;
pub mod plan;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::report::live::Live;
use crate::report::threshold::Vocabulary;
use crate::shutdown::Shutdown;
use crate::smtp::stream::Stream;
use crate::stats::collector::busiest_cpu;
use crate::stats::cpu::CpuTimes;
use crate::stats::hist::ms;
use crate::stats::results::{Results, RunParts, SelfReport};
use crate::stats::{Collector, Metric, Shards};

use conn::Shared;
use delivery::Delivery;
use faults::FaultState;
use plan::{Listen, SinkPlan};

/// The numeric keys of `sink`'s summary, and its metric: what `--threshold` may name.
pub const THRESHOLDS: Vocabulary = Vocabulary {
    keys: &[&[
        "sessions",
        "tls_sessions",
        "transactions",
        "messages",
        "recipients",
        "bytes",
        "rejected",
        "refused",
        "abandoned",
        "unconfirmed",
        "protocol_errors",
        "duplicates",
        "missing",
        "lost",
        "null_sender",
        "untracked",
        "msgs_per_sec",
        "mpm",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "duration_s",
    ]],
    metrics: |m| m == Metric::E2e,
};

/// A bound listener.
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// Unix.
    Unix(UnixListener),
}

/// Binds every listener; the error names the address and the likely fix.
pub async fn bind(listen: &[Listen]) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for l in listen {
        match l {
            Listen::Tcp(addr) => {
                let sock = if addr.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()
                } else {
                    tokio::net::TcpSocket::new_v6()
                }
                .map_err(|e| format!("cannot create a socket for {addr}: {e}"))?;
                let _ = sock.set_reuseaddr(true);
                sock.bind(*addr).map_err(|e| {
                    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                        "; ports below 1024 need root, try --listen 127.0.0.1:2525"
                    } else {
                        "; is another server on that port?"
                    };
                    format!("cannot listen on {addr}: {e}{hint}")
                })?;
                out.push(Listener::Tcp(
                    sock.listen(4096)
                        .map_err(|e| format!("cannot listen on {addr}: {e}"))?,
                ));
            }
            Listen::Unix(p) => {
                let _ = std::fs::remove_file(p);
                out.push(Listener::Unix(UnixListener::bind(p).map_err(|e| {
                    format!("cannot listen on unix:{}: {e}", p.display())
                })?));
            }
        }
    }
    Ok(out)
}

/// The local address of a TCP listener (for tests that bind port 0).
pub fn local_addrs(listeners: &[Listener]) -> Vec<String> {
    listeners
        .iter()
        .map(|l| match l {
            Listener::Tcp(t) => t.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Listener::Unix(u) => u
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_default(),
        })
        .collect()
}

/// Serves until stopped; returns the results. `delivery` is updated as messages arrive and
/// its times count from `start`.
pub async fn run(
    plan: SinkPlan,
    listeners: Vec<Listener>,
    shutdown: Shutdown,
    delivery: Arc<Delivery>,
    start: Instant,
) -> Results {
    let cpu0 = CpuTimes::of_self();
    // `start` is the caller's time zero; the wall clock that corresponds to it.
    let started_us =
        crate::stats::clock::unix_us().saturating_sub(start.elapsed().as_micros() as u64);
    let outputs = plan.outputs.clone();
    let thresholds = plan.thresholds.clone();
    let config_json = plan.config_json.clone();
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
        refused: AtomicU64::new(0),
        abandoned: AtomicU64::new(0),
        unconfirmed: AtomicU64::new(0),
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
        let (sh, conns, cut) = (sh.clone(), conns.clone(), cut.clone());
        acceptors.spawn(async move {
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
                next_id += 1;
                let (sh, cut) = (sh.clone(), cut.clone());
                conns.spawn(async move {
                    tokio::select! {
                        _ = conn::serve(stream, ip, sh, next_id) => {}
                        _ = cut.cancelled() => {}
                    }
                });
            }
        });
    }

    let live = Live::new(outputs.quiet);
    let mut collector = Collector::new(start);
    let interval = outputs.interval;
    let mut ticker = tokio::time::interval_at((start + interval).into(), interval);
    let deadline = duration.map(|d| start + d);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let p = collector.tick(&sh.shards).clone();
                let extra = format!("  open {}", sh.open.load(Ordering::Relaxed));
                live.update_sink(&p, &collector.total.counters, &extra);
                if let Some(idle) = exit_idle {
                    let last = sh.last_activity_ms.load(Ordering::Relaxed);
                    if last > 0 && start.elapsed().as_millis() as u64 - last >= idle.as_millis() as u64 {
                        sh.stop.cancel();
                    }
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
    collector.tick(&sh.shards);
    live.finish();
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let cpu = CpuTimes::of_self().since(&cpu0);
    let total = std::mem::take(&mut collector.total);
    let c = &total.counters;
    let e2e = total.hist(Metric::E2e);
    let d = &sh.delivery;
    let runs = d.correlator.report();
    let missing: u64 = runs.values().map(|r| r.missing_count).sum();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (refused, abandoned, unconfirmed) = (
        load(&sh.refused),
        load(&sh.abandoned),
        load(&sh.unconfirmed),
    );
    // A sequence number that never arrived is lost only if the sink did not refuse it
    // and its client did not give it up: each of those ends one attempt without a
    // delivery. Exact when the clients do not retry (mailbench send); behind a retrying
    // MTA use `relay`, which knows what the MTA accepted.
    let lost = missing.saturating_sub(refused + abandoned + unconfirmed);
    let faults: serde_json::Map<String, serde_json::Value> = sh
        .faults
        .counts()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    let summary = serde_json::json!({
        "sessions": c.connections,
        "tls_sessions": c.tls_connections,
        "transactions": c.sent,
        "messages": c.accepted,
        "recipients": c.rcpts_delivered,
        "bytes": c.bytes,
        "rejected": c.rejected,
        "refused": refused,
        "abandoned": abandoned,
        "unconfirmed": unconfirmed,
        "protocol_errors": c.errors,
        "duplicates": d.correlator.duplicates(),
        "missing": missing,
        "lost": lost,
        "null_sender": load(&d.bounces),
        "untracked": d.correlator.untracked(),
        "msgs_per_sec": c.accepted as f64 / secs,
        "mpm": c.accepted as f64 / secs * 60.0,
        "e2e_p50_ms": ms(e2e, 0.5),
        "e2e_p99_ms": ms(e2e, 0.99),
        "faults": faults,
        "bounces": sh.bouncer.as_ref().map(|b| serde_json::json!({
            "sent": b.counts.sent.load(Ordering::Relaxed),
            "failed": b.counts.failed.load(Ordering::Relaxed),
            "dropped": b.counts.dropped.load(Ordering::Relaxed),
        })),
        "duration_s": secs,
    });
    let cpu_avg = cpu.total().as_secs_f64() / secs * 100.0;
    let cpu_peak = busiest_cpu(&collector.series, interval, cpu_avg);
    let mut warnings = Vec::new();
    if cpu_peak >= 90.0 * crate::stats::cpu::cpu_count() as f64 {
        warnings.push(format!(
            "the sink used {cpu_peak:.0} % CPU in its busiest interval: it may be the bottleneck"
        ));
    }
    let mut results = Results::assemble(RunParts {
        command: "sink",
        run_id: crate::send::new_run_id(),
        started_us,
        duration_s: secs,
        config: config_json,
        summary,
        total,
        series: std::mem::take(&mut collector.series),
        self_report: SelfReport::new(cpu, secs, cpu_peak, warnings),
    });
    results.extra.insert(
        "runs".into(),
        serde_json::to_value(&runs).unwrap_or_default(),
    );
    results.interrupted = shutdown.interrupted();
    results.check(&thresholds);
    results
}

async fn accept(l: &Listener) -> std::io::Result<(Stream, Option<std::net::IpAddr>)> {
    match l {
        Listener::Tcp(t) => {
            let (s, peer) = t.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Stream::Tcp(s), Some(peer.ip())))
        }
        Listener::Unix(u) => {
            let (s, _) = u.accept().await?;
            Ok((Stream::Unix(s), None))
        }
    }
}
