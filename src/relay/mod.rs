//! `mailbench relay`: the end-to-end relay benchmark. The generator injects into the MTA
//! under test, which relays to the embedded sink; both run in this process on one clock.
//! After injection the run waits until every accepted recipient has arrived and the MTA
//! holds nothing more (or the drain timeout passes), then reports acceptance and delivery
//! rates, end-to-end latency, backlog, loss and duplicates, beside what the MTA's
//! processes cost. Only this run's traced messages count as deliveries: the MTA's own
//! bounces and untraced mail are counted apart.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::lab::postfix::Lab;
use crate::report::live::{Live, LiveExtra};
use crate::report::threshold::Vocabulary;
use crate::send::SendPlan;
use crate::send::plan::TimeLog;
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;
use crate::sink::plan::SinkPlan;
use crate::sink::{self, Listener};
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::hist::{HistJson, ms};
use crate::stats::recorder::{new_histogram, record_clamped};
use crate::stats::results::SelfReport;
use crate::stats::sut;

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
            "e2e_p50_ms",
            "e2e_p99_ms",
            "max_backlog",
            "max_queue",
            "maillog_sent",
            "queued_left",
            "max_sustainable_per_sec",
            "max_sustainable_mpm",
        ],
    ],
    metrics: |_| true,
};

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
    pub accepts: Arc<TimeLog>,
    /// What arrives at the sink, tracking this run's id (the generator's `run_id`).
    pub delivery: Arc<Delivery>,
    /// A shell command whose first number is sampled per interval (e.g. a queue count).
    pub queue_cmd: Option<String>,
    /// Interval of the series.
    pub interval: Duration,
    /// No progress lines.
    pub quiet: bool,
}

/// Why a relay run produced no results.
#[derive(Debug)]
pub enum RelayError {
    /// The MTA never accepted a connection (bad input: exit 1).
    Unreachable(String),
    /// The run broke down (exit 2).
    Failed(String),
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
            Some(cmd) => queue_value(cmd).await,
            None => None,
        };
        out.push(Reading { sut, queue, t_s });
    }
}

/// The first number a queue command prints.
async fn queue_value(cmd: &str) -> Option<f64> {
    tokio::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .await
        .ok()
        .and_then(|o| first_number(&String::from_utf8_lossy(&o.stdout)))
}

/// The first number in a command's output (`mailq`'s "-- 1234 Kbytes in 56 Requests."
/// gives 1234; use e.g. `find DIR -type f | wc -l` for a plain count).
fn first_number(text: &str) -> Option<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|t| !t.is_empty() && t.chars().any(|c| c.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
}

/// Runs the benchmark; `lab` (if any) is only read, for its log and queue.
pub async fn run(
    mut r: RelayRun,
    lab: Option<&Lab>,
    shutdown: Shutdown,
) -> Result<Results, RelayError> {
    let start = Instant::now();
    let cpu0 = CpuTimes::of_self();
    // A lab may carry earlier runs (a sweep): count only this run's log lines.
    let logged_before = lab.map_or(0, |l| l.delivered_logged());
    let delivery = r.delivery.clone();
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
    let d = delivery.clone();
    r.send.live_extra = Some(LiveExtra(Arc::new(move |total| {
        let got = d.messages.load(Ordering::Relaxed);
        format!(
            "  delivered {got} backlog {}",
            total.accepted as i64 - got as i64
        )
    })));
    let origin_us = crate::stats::clock::unix_us();
    let send_start = Instant::now();
    let send = match crate::send::run(r.send, shutdown.clone()).await {
        Ok(s) => s,
        Err(e) => {
            sink_stop.stop.cancel();
            sampler_stop.cancel();
            let _ = sink_task.await;
            return Err(RelayError::Unreachable(e));
        }
    };
    let expected = send.counters.rcpts_delivered;
    let queue = QueueProbe {
        lab,
        cmd: r.queue_cmd.as_deref(),
    };
    let drained = drain(
        &delivery,
        expected,
        &queue,
        r.drain_timeout,
        r.interval,
        r.quiet,
        start,
        &shutdown,
    )
    .await;
    let sut1 = sut::sample(&(r.sut_pids)());
    sink_stop.stop.cancel();
    sampler_stop.cancel();
    let readings = sampler.await.unwrap_or_default();
    let mut peak_sut = sut0;
    for rd in &readings {
        peak_sut.rss_kib = peak_sut.rss_kib.max(rd.sut.rss_kib);
        peak_sut.procs = peak_sut.procs.max(rd.sut.procs);
    }
    let sink = sink_joined(sink_task.await)?;
    Ok(combine(
        send,
        sink,
        &delivery,
        &CombineInputs {
            accepts: r.accepts.entries().into_iter().collect(),
            origin_us,
            interval: r.interval,
            readings,
            sut0_t,
            expected,
            drained,
            sut0,
            sut1,
            peak_sut,
            maillog_sent: lab.map(|l| l.delivered_logged().saturating_sub(logged_before)),
            queued_left: lab.map(|l| l.queued()),
            thresholds: r.thresholds,
            tool_cpu: CpuTimes::of_self().since(&cpu0),
            tool_secs: start.elapsed().as_secs_f64(),
            send_offset_s: send_start.duration_since(start).as_secs_f64(),
        },
    ))
}

/// The embedded sink's results, or why there are none: without them no delivery figure
/// can be given, so the run fails instead of reporting injection alone.
fn sink_joined(joined: Result<Results, tokio::task::JoinError>) -> Result<Results, RelayError> {
    joined.map_err(|e| {
        RelayError::Failed(format!(
            "the embedded sink failed ({e}); no delivery figures can be given"
        ))
    })
}

/// Where the drain learns whether the MTA still holds mail: the lab's queue, or the
/// `--queue-cmd` value (0 means empty).
struct QueueProbe<'a> {
    lab: Option<&'a Lab>,
    cmd: Option<&'a str>,
}

impl QueueProbe<'_> {
    /// Messages the MTA still holds, when that can be known.
    async fn held(&self) -> Option<u64> {
        if let Some(l) = self.lab {
            return Some(l.queued() as u64);
        }
        match self.cmd {
            Some(c) => queue_value(c).await.map(|v| v as u64),
            None => None,
        }
    }
}

/// Waits until every expected recipient arrived and the MTA holds nothing more, the
/// MTA's queue is empty with nothing arriving (the rest was refused or bounced, it will
/// not come), the timeout passes, or a second signal. True when drained. Only atomics are
/// polled while mail flows; the queue is looked at when arrivals pause or are complete,
/// because reading it costs CPU the MTA needs.
#[allow(clippy::too_many_arguments)]
async fn drain(
    delivery: &Delivery,
    expected: u64,
    queue: &QueueProbe<'_>,
    timeout: Duration,
    interval: Duration,
    quiet: bool,
    start: Instant,
    shutdown: &Shutdown,
) -> bool {
    let deadline = Instant::now() + timeout;
    let live = Live::new(quiet);
    let mut next_line = Instant::now() + interval;
    let mut next_probe = Instant::now();
    let drained = loop {
        let got = delivery.recipients.load(Ordering::Relaxed);
        let now = Instant::now();
        let idle_ms = (start.elapsed().as_millis() as u64)
            .saturating_sub(delivery.last_any_ms.load(Ordering::Relaxed));
        if (got >= expected || idle_ms >= 1000) && now >= next_probe {
            next_probe = now + Duration::from_millis(250);
            match queue.held().await {
                Some(0) => break true,
                Some(_) => {}
                None if got >= expected => break true,
                None => {}
            }
        }
        if now >= deadline || shutdown.abort.is_cancelled() {
            break false;
        }
        if now >= next_line {
            next_line = now + interval;
            live.line(&format!(
                "{:>7.1}s draining: delivered {got} of {expected} recipients",
                start.elapsed().as_secs_f64()
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = shutdown.abort.cancelled() => {}
        }
    };
    live.finish();
    drained
}

struct CombineInputs {
    /// Accept time (wall µs) per sequence number the MTA accepted.
    accepts: HashMap<u64, u64>,
    /// Wall-clock µs when injection started: time zero of the series.
    origin_us: u64,
    interval: Duration,
    readings: Vec<Reading>,
    /// When `sut0` was read, in seconds from the start.
    sut0_t: f64,
    expected: u64,
    drained: bool,
    sut0: sut::Sample,
    sut1: sut::Sample,
    peak_sut: sut::Sample,
    maillog_sent: Option<usize>,
    queued_left: Option<usize>,
    thresholds: Vec<crate::report::threshold::Threshold>,
    /// The whole process over the whole run (injection and drain; generator and sink).
    tool_cpu: CpuTimes,
    tool_secs: f64,
    /// When injection started, seconds after the relay's start (the sampler's clock).
    send_offset_s: f64,
}

/// One run's delivery side, per message: what arrived of what the MTA accepted.
struct Arrived {
    /// Arrival time (wall µs) of each accepted message that arrived.
    at: Vec<(u64, u64)>,
    /// Accepted sequence numbers that never arrived (the first 1,000, in order).
    lost_seqs: Vec<u64>,
}

fn arrived(accepts: &HashMap<u64, u64>, arrivals: &TimeLog) -> Arrived {
    let times: HashMap<u64, u64> = arrivals.entries().into_iter().collect();
    let mut at = Vec::with_capacity(accepts.len());
    let mut lost = Vec::new();
    for (seq, acc) in accepts {
        match times.get(seq) {
            Some(t) => at.push((*acc, *t)),
            None => lost.push(*seq),
        }
    }
    lost.sort_unstable();
    lost.truncate(1000);
    Arrived {
        at,
        lost_seqs: lost,
    }
}

/// Puts the generator's and the sink's results together into the relay's: deliveries
/// are this run's traced messages that the MTA had accepted, counted per recipient
/// (loss) and per message (rate); end to end runs from the MTA's acceptance to the
/// sink's confirmed reply, per message; the series gets the delivery side and the MTA's
/// resources per interval.
fn combine(mut send: Results, sink: Results, delivery: &Delivery, x: &CombineInputs) -> Results {
    // The send part measured only the injection; the tool's cost is the whole run's.
    let avg = x.tool_cpu.total().as_secs_f64() / x.tool_secs.max(1e-9) * 100.0;
    send.self_report = SelfReport::new(
        x.tool_cpu,
        x.tool_secs,
        send.self_report
            .cpu_peak_pct
            .max(sink.self_report.cpu_peak_pct)
            .max(avg),
        std::mem::take(&mut send.self_report.warnings),
    );
    let run_id = delivery.run.unwrap_or_default();
    let acc = delivery
        .correlator
        .accounted(run_id, |seq| x.accepts.contains_key(&seq));
    let duplicates = delivery
        .correlator
        .report()
        .get(&send.run_id)
        .map_or(0, |r| r.duplicates);
    // Recipients of accepted messages that the MTA bounced (the sink refused them for
    // good): not delivered, but not lost either.
    let bounced: u64 = delivery
        .bounced
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(seq, _)| x.accepts.contains_key(seq))
        .map(|(_, n)| n)
        .sum();
    let lost = x.expected.saturating_sub(acc.recipients + bounced);
    let arrived = arrived(&x.accepts, &delivery.arrivals);
    let accepted = send.counters.accepted;
    let inject_s = send.duration_s.max(1e-9);
    // Delivery rate: accepted messages that arrived, over first injection → last arrival.
    let last_us = arrived
        .at
        .iter()
        .map(|(_, t)| *t)
        .max()
        .unwrap_or(x.origin_us);
    let drain_s = (last_us.saturating_sub(x.origin_us) as f64 / 1e6).max(1e-9);
    // End to end from acceptance by the MTA, per message, overall and per interval.
    let interval_us = (x.interval.as_micros() as u64).max(1);
    let bucket = |t: u64| (t.saturating_sub(x.origin_us) / interval_us) as usize;
    let mut e2e = new_histogram();
    let n = arrived
        .at
        .iter()
        .map(|(_, t)| bucket(*t) + 1)
        .max()
        .unwrap_or(0)
        .max(send.series.len())
        .max(x.readings.len());
    let mut per_iv: Vec<(u64, hdrhistogram::Histogram<u64>)> =
        (0..n).map(|_| (0, new_histogram())).collect();
    for (acc_us, arr_us) in &arrived.at {
        let us = arr_us.saturating_sub(*acc_us);
        record_clamped(&mut e2e, us, 1);
        let iv = &mut per_iv[bucket(*arr_us)];
        iv.0 += 1;
        record_clamped(&mut iv.1, us, 1);
    }
    // Backlog per interval: accepted so far minus delivered so far.
    let (mut acc_n, mut del_n, mut max_backlog) = (0i64, 0i64, 0i64);
    let mut series = Vec::with_capacity(n);
    for (i, (delivered, hist)) in per_iv.iter().enumerate() {
        let mut p = send.series.get(i).cloned().unwrap_or_else(|| {
            let t_s = (i + 1) as f64 * x.interval.as_secs_f64();
            crate::stats::IntervalPoint {
                t_s,
                dt_s: x.interval.as_secs_f64(),
                ..Default::default()
            }
        });
        acc_n += p.counters.accepted as i64;
        del_n += *delivered as i64;
        p.delivered = Some(*delivered);
        p.backlog = Some(acc_n - del_n);
        p.e2e_p99_ms = (!hist.is_empty()).then(|| ms(hist, 0.99));
        max_backlog = max_backlog.max(acc_n - del_n);
        // The sampler's readings count from the relay's start, a moment before injection.
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
    let e2e = (!e2e.is_empty()).then(|| HistJson::from_hist(&e2e));
    let cpu_s = (x.sut1.user_s + x.sut1.sys_s) - (x.sut0.user_s + x.sut0.sys_s);
    let wall = (drain_s + x.send_offset_s).max(inject_s);
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
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let s = &send.summary;
    send.summary = serde_json::json!({
        "intended": s["intended"],
        "sent": send.counters.sent,
        "unstarted": s["unstarted"],
        "accepted": accepted,
        "rejected": send.counters.rejected,
        "errors": send.counters.errors,
        "aborted": send.counters.aborted,
        "failed": s["failed"],
        "expected_recipients": x.expected,
        "delivered": acc.recipients,
        "delivered_messages": acc.messages,
        "lost": lost,
        "duplicates": duplicates,
        "aborted_delivered": acc.unexpected,
        "bounced": bounced,
        "bounces": load(&delivery.bounces),
        "untraced": load(&delivery.untraced),
        "drained": x.drained,
        "inject_mpm": accepted as f64 / inject_s * 60.0,
        "drain_mpm": acc.messages as f64 / drain_s * 60.0,
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
    if !x.drained {
        let held = x
            .queued_left
            .map_or(String::new(), |q| format!(" ({q} messages still queued)"));
        send.self_report.warnings.push(format!(
            "the drain ended before the MTA had delivered everything{held}: delivery figures are incomplete; raise --drain-timeout"
        ));
    }
    match e2e {
        Some(h) => {
            send.latency.insert("e2e".into(), h);
        }
        None => {
            send.latency.remove("e2e");
        }
    }
    send.command = "relay".into();
    send.series = series;
    send.extra.insert("sut".into(), sut_report);
    send.extra
        .insert("lost_seqs".into(), arrived.lost_seqs.into());
    send.extra.insert("sink".into(), sink.summary.clone());
    send.check(&x.thresholds);
    send
}

/// Whether delivery kept pace with an open-loop step of `step_s` seconds at `rate`: the
/// backlog (accepted minus delivered) must not grow over the step. Its trend is the mean
/// backlog of the second half of the step against the first half (the first interval,
/// while the MTA warms up, left out), projected over the whole step; growth within
/// noise is allowed: the larger of 5 messages, three standard deviations of a Poisson
/// backlog of that mean, and 2 % of the step's messages.
pub fn keeps_pace(
    series: &[crate::stats::IntervalPoint],
    step_s: f64,
    rate: f64,
) -> Result<(), String> {
    let during: Vec<(f64, f64)> = series
        .iter()
        .filter(|p| p.t_s <= step_s + 1e-3)
        .skip(1)
        .filter_map(|p| p.backlog.map(|b| (p.t_s, b as f64)))
        .collect();
    if during.len() < 2 {
        return Ok(()); // too short to see a trend; the other checks still apply
    }
    let (first, second) = during.split_at(during.len() / 2);
    let mean = |v: &[(f64, f64)]| {
        let n = v.len() as f64;
        (
            v.iter().map(|p| p.0).sum::<f64>() / n,
            v.iter().map(|p| p.1).sum::<f64>() / n,
        )
    };
    let ((t1, b1), (t2, b2)) = (mean(first), mean(second));
    let per_s = (b2 - b1) / (t2 - t1).max(1e-9);
    let grew = per_s * step_s;
    let level = (b1 + b2) / 2.0;
    let noise = 5f64
        .max(3.0 * level.max(0.0).sqrt())
        .max(0.02 * rate * step_s);
    if grew > noise {
        Err(format!(
            "backlog grew by {grew:.0} over the step ({per_s:.0}/s): delivery fell behind"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(backlogs: &[i64]) -> Vec<crate::stats::IntervalPoint> {
        backlogs
            .iter()
            .enumerate()
            .map(|(i, b)| crate::stats::IntervalPoint {
                t_s: (i + 1) as f64,
                dt_s: 1.0,
                backlog: Some(*b),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_growing_backlog_fails_the_step_and_a_flat_one_passes() {
        // The case: 1,250/s offered, 1,155/s delivered -> +95 per second.
        let growing: Vec<i64> = (1..=10).map(|i| 20 + 95 * i).collect();
        let err = keeps_pace(&step(&growing), 10.0, 1250.0).expect_err("must fail");
        assert!(err.contains("backlog grew by 950"), "{err}");
        // Steady delivery with noise around a level of 120 in flight.
        let flat = [100, 130, 110, 125, 118, 122, 109, 131, 115, 120];
        assert_eq!(keeps_pace(&step(&flat), 10.0, 1250.0), Ok(()));
        // After injection the backlog drains: points after the step do not count.
        let mut with_drain = flat.to_vec();
        with_drain.extend([60, 0, 0]);
        assert_eq!(keeps_pace(&step(&with_drain), 10.0, 1250.0), Ok(()));
        // 2 % over a 100/s capacity for 10 s is within tolerance, 10 % is not.
        let slightly: Vec<i64> = (1..=10).map(|i| 10 + 2 * i).collect();
        assert_eq!(keeps_pace(&step(&slightly), 10.0, 102.0), Ok(()));
        let behind: Vec<i64> = (1..=10).map(|i| 10 + 10 * i).collect();
        assert!(keeps_pace(&step(&behind), 10.0, 110.0).is_err());
    }

    #[tokio::test]
    async fn a_failed_sink_fails_the_run_instead_of_reporting_injection_alone() {
        let panicked = tokio::spawn(async { panic!("sink broke") }).await;
        let Err(RelayError::Failed(why)) = sink_joined(panicked.map(|()| unreachable!())) else {
            panic!("a failed sink must fail the relay run");
        };
        assert!(why.contains("embedded sink failed"), "{why}");
    }

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
