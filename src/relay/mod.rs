//! `mailbench relay`: the end-to-end relay benchmark. The generator injects into the MTA
//! under test, which relays to the embedded sink; both run in this process on one clock.
//! After injection the run waits until every accepted recipient has arrived (or the drain
//! timeout passes), then reports acceptance and delivery rates, end-to-end latency, backlog,
//! loss and duplicates, beside what the MTA's processes cost.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::lab::postfix::Lab;
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::sink::conn::Delivery;
use crate::sink::plan::SinkPlan;
use crate::sink::{self, Listener};
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::SelfReport;
use crate::stats::sut;

/// Everything a relay run needs, already started where it must be (listeners bound, lab up).
pub struct RelayRun {
    /// The generator's plan (targets the MTA).
    pub send: SendPlan,
    /// The sink's plan.
    pub sink: SinkPlan,
    /// The sink's bound listeners.
    pub listeners: Vec<Listener>,
    /// Longest wait for deliveries after injection.
    pub drain_timeout: Duration,
    /// Processes of the system under test (lab, or `--sut-pid` trees).
    pub sut_pids: Arc<dyn Fn() -> Vec<u32> + Send + Sync>,
    /// Thresholds on the relay summary.
    pub thresholds: Vec<crate::report::threshold::Threshold>,
    /// Accept times per sequence number (filled by the generator).
    pub accepts: Arc<crate::send::plan::TimeLog>,
    /// First arrival times per sequence number (filled by the sink).
    pub arrivals: Arc<crate::send::plan::TimeLog>,
    /// A shell command whose first number is sampled per interval (e.g. a queue count).
    pub queue_cmd: Option<String>,
    /// Interval of the series.
    pub interval: Duration,
}

/// One sampler reading: the SUT's totals and the queue command's value.
struct Reading {
    sut: sut::Sample,
    queue: Option<f64>,
    /// Seconds from the start when the totals were read: rates divide by the time between
    /// readings, which drifts from the series' intervals when a reading is late.
    t_s: f64,
}

/// Samples the system under test (and the queue command) once per interval from `start`,
/// until `stop` is cancelled.
async fn sample_loop(
    pids: Arc<dyn Fn() -> Vec<u32> + Send + Sync>,
    queue_cmd: Option<String>,
    interval: Duration,
    start: Instant,
    stop: tokio_util::sync::CancellationToken,
) -> Vec<Reading> {
    let mut out = Vec::new();
    let mut ticker = tokio::time::interval_at((start + interval).into(), interval);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return out,
        }
        let p = pids.clone();
        let sut = tokio::task::spawn_blocking(move || sut::sample(&p()))
            .await
            .unwrap_or_default();
        let t_s = start.elapsed().as_secs_f64();
        let queue = match &queue_cmd {
            Some(cmd) => tokio::process::Command::new("sh")
                .args(["-c", cmd])
                .output()
                .await
                .ok()
                .and_then(|o| first_number(&String::from_utf8_lossy(&o.stdout))),
            None => None,
        };
        out.push(Reading { sut, queue, t_s });
    }
}

/// The first number in a command's output (`mailq`'s "-- 1234 Kbytes in 56 Requests."
/// gives 1234; use e.g. `find DIR -type f | wc -l` for a plain count).
fn first_number(text: &str) -> Option<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|t| !t.is_empty() && t.chars().any(|c| c.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
}

/// Runs the benchmark; `lab` (if any) is only read, for its log and queue.
pub async fn run(r: RelayRun, lab: Option<&Lab>, shutdown: Shutdown) -> Results {
    let start = Instant::now();
    let cpu0 = CpuTimes::of_self();
    // A lab may carry earlier runs (a sweep): count only this run's log lines.
    let logged_before = lab.map_or(0, |l| l.delivered_logged());
    let delivery = Arc::new(Delivery::default());
    let sink_stop = Shutdown::default();
    let sink_task = tokio::spawn(sink::run(
        r.sink,
        r.listeners,
        sink_stop.clone(),
        delivery.clone(),
        start,
    ));
    let sut0 = sut::sample(&(r.sut_pids)());
    let sut0_t = start.elapsed().as_secs_f64();
    let sampler_stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn(sample_loop(
        r.sut_pids.clone(),
        r.queue_cmd.clone(),
        r.interval,
        start,
        sampler_stop.clone(),
    ));
    let send_start = Instant::now();
    let send = crate::send::run(r.send, shutdown.clone()).await;
    let expected = send.counters.rcpts_delivered;
    // Drain: wait for every accepted recipient (or the timeout, or a second stop).
    // Only an atomic is polled here: reading /proc for the MTA's processes costs CPU the
    // MTA needs, so that happens once per interval, in the sampler.
    let drain_deadline = Instant::now() + r.drain_timeout;
    while delivery.recipients.load(Ordering::Relaxed) < expected && Instant::now() < drain_deadline
    {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = shutdown.abort.cancelled() => break,
        }
    }
    let sut1 = sut::sample(&(r.sut_pids)());
    let last_ms = delivery.last_ms.load(Ordering::Relaxed);
    sink_stop.stop.cancel();
    sampler_stop.cancel();
    let readings = sampler.await.unwrap_or_default();
    let mut peak_sut = sut0;
    for rd in &readings {
        peak_sut.rss_kib = peak_sut.rss_kib.max(rd.sut.rss_kib);
        peak_sut.procs = peak_sut.procs.max(rd.sut.procs);
    }
    let sink = match sink_task.await {
        Ok(s) => s,
        Err(_) => return send,
    };
    // End to end from acceptance: arrival minus accept time, per message.
    let mut accept_to_arrival = crate::stats::recorder::new_histogram();
    for (seq, accepted) in r.accepts.entries() {
        if let Some(arrived) = r.arrivals.get(seq) {
            crate::stats::recorder::record_clamped(
                &mut accept_to_arrival,
                arrived.saturating_sub(accepted),
                1,
            );
        }
    }
    combine(
        send,
        sink,
        &CombineInputs {
            accept_to_arrival,
            readings,
            sut0_t,
            expected,
            send_offset_ms: send_start.duration_since(start).as_millis() as u64,
            last_delivery_ms: last_ms,
            sut0,
            sut1,
            peak_sut,
            maillog_sent: lab.map(|l| l.delivered_logged().saturating_sub(logged_before)),
            queued_left: lab.map(|l| l.queued()),
            thresholds: r.thresholds,
            tool_cpu: CpuTimes::of_self().since(&cpu0),
            tool_secs: start.elapsed().as_secs_f64(),
        },
    )
}

struct CombineInputs {
    accept_to_arrival: hdrhistogram::Histogram<u64>,
    readings: Vec<Reading>,
    /// When `sut0` was read, in seconds from the start.
    sut0_t: f64,
    expected: u64,
    send_offset_ms: u64,
    last_delivery_ms: u64,
    sut0: sut::Sample,
    sut1: sut::Sample,
    peak_sut: sut::Sample,
    maillog_sent: Option<usize>,
    queued_left: Option<usize>,
    thresholds: Vec<crate::report::threshold::Threshold>,
    /// The whole process over the whole run (injection and drain; generator and sink).
    tool_cpu: CpuTimes,
    tool_secs: f64,
}

fn combine(mut send: Results, sink: Results, x: &CombineInputs) -> Results {
    // The send part measured only the injection; the tool's cost is the whole run's.
    send.self_report = SelfReport::new(
        x.tool_cpu,
        x.tool_secs,
        send.self_report
            .cpu_peak_pct
            .max(sink.self_report.cpu_peak_pct),
        std::mem::take(&mut send.self_report.warnings),
    );
    let run = send.run_id.clone();
    let runs = sink.extra.get("runs").cloned().unwrap_or_default();
    let mine = &runs[&run];
    let distinct =
        mine["arrivals"].as_u64().unwrap_or(0) - mine["duplicates"].as_u64().unwrap_or(0);
    let duplicates = mine["duplicates"].as_u64().unwrap_or(0);
    let lost = x.expected.saturating_sub(distinct);
    let messages = sink.summary["messages"].as_u64().unwrap_or(0);
    let accepted = send.counters.accepted;
    let inject_s = send.duration_s.max(1e-9);
    let drain_s = (x.last_delivery_ms.saturating_sub(x.send_offset_ms) as f64 / 1000.0).max(1e-9);
    // Backlog per interval: accepted so far minus delivered so far (series share a start).
    let mut acc = 0i64;
    let mut del = 0i64;
    let mut max_backlog = 0i64;
    let n = send.series.len().max(sink.series.len());
    let mut series = Vec::with_capacity(n);
    for i in 0..n {
        let mut p = send.series.get(i).cloned().unwrap_or_else(|| {
            let mut p = sink.series[i].clone();
            p.counters = Default::default();
            p.msgs_per_sec = 0.0;
            p
        });
        acc += p.counters.accepted as i64;
        let delivered = sink.series.get(i).map_or(0, |s| s.counters.accepted);
        del += delivered as i64;
        p.delivered = Some(delivered);
        p.backlog = Some(acc - del);
        p.e2e_p99_ms = sink.series.get(i).map(|s| s.p99_ms);
        max_backlog = max_backlog.max(acc - del);
        if let Some(rd) = x.readings.get(i) {
            let (prev, prev_t) = if i == 0 {
                (&x.sut0, x.sut0_t)
            } else {
                (&x.readings[i - 1].sut, x.readings[i - 1].t_s)
            };
            p.sut = Some(rd.sut.rates_since(prev, rd.t_s - prev_t));
            p.queue = rd.queue;
        }
        series.push(p);
    }
    // Accept → arrival when measured per message; the sink's trace-based figure (injection
    // start → arrival) otherwise.
    let e2e = if x.accept_to_arrival.is_empty() {
        sink.latency.get("e2e").cloned()
    } else {
        Some(crate::stats::hist::HistJson::from_hist(
            &x.accept_to_arrival,
        ))
    };
    let cpu_s = (x.sut1.user_s + x.sut1.sys_s) - (x.sut0.user_s + x.sut0.sys_s);
    let wall = drain_s.max(inject_s);
    let peak = |f: fn(&crate::stats::SutPoint) -> f64| {
        series
            .iter()
            .filter_map(|p| p.sut.as_ref())
            .map(f)
            .fold(0.0, f64::max)
    };
    let sut_report = serde_json::json!({
        "cpu_peak_pct": peak(|s| s.cpu_user_pct + s.cpu_sys_pct),
        "disk_read_peak_kib_per_s": peak(|s| s.read_kib_s),
        "disk_write_peak_kib_per_s": peak(|s| s.write_kib_s),
        "cpu_user_s": x.sut1.user_s - x.sut0.user_s,
        "cpu_sys_s": x.sut1.sys_s - x.sut0.sys_s,
        "cpu_avg_pct": cpu_s / wall * 100.0,
        "disk_read_kib_per_s": (x.sut1.read_bytes.saturating_sub(x.sut0.read_bytes)) as f64 / 1024.0 / wall,
        "disk_write_kib_per_s": (x.sut1.write_bytes.saturating_sub(x.sut0.write_bytes)) as f64 / 1024.0 / wall,
        "peak_rss_kib": x.peak_sut.rss_kib.max(x.sut1.rss_kib),
        "peak_procs": x.peak_sut.procs.max(x.sut1.procs),
    });
    send.summary = serde_json::json!({
        "sent": send.counters.sent,
        "accepted": accepted,
        "rejected": send.counters.rejected,
        "errors": send.counters.errors,
        "expected_recipients": x.expected,
        "delivered": distinct,
        "delivered_messages": messages,
        "lost": lost,
        "duplicates": duplicates,
        "inject_mpm": accepted as f64 / inject_s * 60.0,
        "drain_mpm": messages as f64 / drain_s * 60.0,
        "drain_s": drain_s,
        "e2e_p50_ms": e2e.as_ref().map_or(0.0, |h| h.p50_us as f64 / 1000.0),
        "e2e_p99_ms": e2e.as_ref().map_or(0.0, |h| h.p99_us as f64 / 1000.0),
        "max_backlog": max_backlog,
        "max_queue": series.iter().filter_map(|p| p.queue).fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.max(q)))),
        "maillog_sent": x.maillog_sent,
        "queued_left": x.queued_left,
        "msgs_per_sec": accepted as f64 / inject_s,
        "mpm": accepted as f64 / inject_s * 60.0,
        "bytes": send.counters.bytes,
    });
    if let Some(h) = e2e {
        send.latency.insert("e2e".into(), h);
    }
    send.command = "relay".into();
    send.series = series;
    send.extra.insert("sut".into(), sut_report);
    send.extra
        .insert("lost_seqs".into(), mine["missing"].clone());
    send.extra.insert("sink".into(), sink.summary.clone());
    send.check(&x.thresholds);
    send
}

#[cfg(test)]
mod tests {
    use super::first_number;

    #[test]
    fn the_first_number_of_a_command_output_is_taken() {
        assert_eq!(
            first_number("-- 1234 Kbytes in 56 Requests.\n"),
            Some(1234.0)
        );
        assert_eq!(first_number("42\n"), Some(42.0));
        assert_eq!(first_number("Mail queue is empty"), None);
    }
}
