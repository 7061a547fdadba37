//! Putting a relay run together: the generator's results (what the MTA accepted) and the
//! sink's (what arrived) become the relay's. Deliveries are this run's traced messages that
//! the MTA had accepted, counted per recipient (loss) and per message (rate); what the
//! MTA bounced is matched to the message it returns; end to end runs from the MTA's
//! acceptance to the sink's confirmed reply, per message; the series gets the delivery
//! side and the MTA's resources per interval.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::run::sampler::Observed;
use crate::sink::delivery::Delivery;
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::hist::{HistJson, ms};
use crate::stats::recorder::{new_histogram, record_clamped};
use crate::stats::results::SelfReport;
use crate::stats::summary::{Injection, RelaySummary, Summary};
use crate::stats::timelog::TimeLog;

/// What a relay run measured besides the generator's and the sink's results.
pub(super) struct CombineInputs {
    /// Accept time (wall µs) per sequence number the MTA accepted.
    pub(super) accepts: HashMap<u64, u64>,
    /// Wall-clock µs when injection started: time zero of the series.
    pub(super) origin_us: u64,
    pub(super) interval: Duration,
    /// The MTA, as the sampler saw it.
    pub(super) observed: Observed,
    pub(super) expected: u64,
    pub(super) drained: bool,
    pub(super) maillog_sent: Option<u64>,
    pub(super) queued_left: Option<u64>,
    /// The whole process over the whole run (injection and drain; generator and sink).
    pub(super) tool_cpu: CpuTimes,
    pub(super) tool_secs: f64,
    /// When injection started, seconds after the relay's start (the sampler's clock).
    pub(super) send_offset_s: f64,
    /// A flush's release: then the drain counts from it, not from the first injection.
    pub(super) released: Option<super::run::Released>,
}

/// One run's delivery side, per message: what arrived of what the MTA accepted.
struct Arrived {
    /// Arrival time (wall µs) of each accepted message that arrived.
    at: Vec<(u64, u64)>,
    /// Accepted sequence numbers that never arrived (the first 1,000, in order).
    lost_seqs: Vec<u64>,
}

/// End to end per recipient, when some message arrived in several copies (a fan-out):
/// each copy's time since its acceptance, once per new recipient it brought. `None` when
/// every message arrived whole (then it equals the per-message figure).
fn per_recipient(accepts: &HashMap<u64, u64>, delivery: &Delivery) -> Option<HistJson> {
    let copies = delivery
        .recipient_arrivals
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut seen = std::collections::HashSet::new();
    if copies.iter().all(|(seq, _, _)| seen.insert(*seq)) {
        return None;
    }
    let mut h = new_histogram();
    for (seq, at, n) in copies.iter() {
        if let Some(acc) = accepts.get(seq) {
            record_clamped(&mut h, at.saturating_sub(*acc), *n);
        }
    }
    (!h.is_empty()).then(|| HistJson::from_hist(&h))
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
pub(super) fn combine(
    mut send: Results,
    sink: Results,
    delivery: &Delivery,
    x: &CombineInputs,
) -> Results {
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
    // A flush's drain starts at the release: nothing could be delivered before.
    let drain_from_us = x.released.as_ref().map_or(x.origin_us, |r| r.at_us);
    let drain_s = (last_us.saturating_sub(drain_from_us) as f64 / 1e6).max(1e-9);
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
        .max(x.observed.len());
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
        // Intervals after injection (the drain) have no generator point: an empty one.
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
        p.relay.delivered = Some(*delivered);
        p.relay.backlog = Some(acc_n - del_n);
        p.e2e_p99_ms = (!hist.is_empty()).then(|| ms(hist, 0.99));
        max_backlog = max_backlog.max(acc_n - del_n);
        series.push(p);
    }
    // The sampler's readings count from the relay's start, a moment before injection.
    x.observed.fill(&mut series);
    let e2e = (!e2e.is_empty()).then(|| HistJson::from_hist(&e2e));
    let e2e_rcpt = per_recipient(&x.accepts, delivery);
    // The MTA's averages cover what was measured of it: from the first reading (the
    // relay's start, a moment before injection) to the last arrival, or to the end of
    // injection when nothing arrived after it.
    let wall = (drain_s + x.send_offset_s).max(inject_s);
    let sut_report = x.observed.report(&series, wall);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    // The injection's rate is taken over its whole duration here (the generator's own
    // summary takes it over its active span): the relay compares it with the drain.
    let intended = match &send.summary {
        Summary::Send(s) => s.injection.intended,
        _ => send.counters.sent,
    };
    send.summary = Summary::Relay(RelaySummary {
        injection: Injection::new(&send.counters, intended, inject_s),
        expected_recipients: x.expected,
        delivered: acc.recipients,
        delivered_messages: acc.messages,
        bounced,
        lost,
        duplicates,
        aborted_delivered: acc.unexpected,
        bounces: load(&delivery.bounces),
        untraced: load(&delivery.untraced),
        drained: x.drained,
        inject_mpm: accepted as f64 / inject_s * 60.0,
        drain_mpm: acc.messages as f64 / drain_s * 60.0,
        drain_s,
        e2e_p50_ms: e2e.as_ref().map_or(0.0, |h| h.p50_us as f64 / 1000.0),
        e2e_p99_ms: e2e.as_ref().map_or(0.0, |h| h.p99_us as f64 / 1000.0),
        max_backlog,
        max_queue: series
            .iter()
            .filter_map(|p| p.relay.queue)
            .fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.max(q)))),
        maillog_sent: x.maillog_sent,
        queued_left: x.queued_left,
        max_sustainable_per_sec: None,
        max_sustainable_mpm: None,
        flush_held: x.released.as_ref().map(|r| r.held),
        release_at_s: x
            .released
            .as_ref()
            .map(|r| r.at_us.saturating_sub(x.origin_us) as f64 / 1e6),
        ..RelaySummary::default()
    });
    if let Some(r) = &x.released {
        let first_us = arrived.at.iter().map(|(_, t)| *t).min();
        send.extra.insert(
            "flush".into(),
            serde_json::json!({
                "held": r.held,
                "released": r.released,
                "release_at_s": r.at_us.saturating_sub(x.origin_us) as f64 / 1e6,
                "release_took_ms": r.took_ms,
                "first_arrival_s": first_us.map(|t| t.saturating_sub(x.origin_us) as f64 / 1e6),
                "arrived_before_release": arrived.at.iter().filter(|(_, t)| *t < r.at_us).count(),
            }),
        );
    }
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
    if let Some(h) = e2e_rcpt {
        if let Summary::Relay(s) = &mut send.summary {
            s.e2e_recipient_p50_ms = Some(h.p50_us as f64 / 1000.0);
            s.e2e_recipient_p99_ms = Some(h.p99_us as f64 / 1000.0);
        }
        send.latency.insert("e2e_recipient".into(), h);
    }
    send.command = "relay".into();
    send.series = series;
    send.extra.insert("sut".into(), sut_report);
    send.extra
        .insert("lost_seqs".into(), arrived.lost_seqs.into());
    send.extra.insert(
        "sink".into(),
        serde_json::to_value(&sink.summary).unwrap_or_default(),
    );
    if let Some(v) = sink.extra.get("dkim_verify") {
        send.extra.insert("dkim_verify".into(), v.clone());
    }
    send
}
