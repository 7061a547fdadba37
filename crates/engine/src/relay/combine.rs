//! Putting a relay run together: the generator's results (what the MTA accepted) and the
//! sink's (what arrived) become the relay's. Deliveries are this run's traced messages that
//! the MTA had accepted, counted per recipient (loss) and per message (rate); what the
//! MTA bounced is matched to the message it returns; end to end runs from the end of each
//! message's data (the MTA cannot pass a message on before it has all of it, while its 250
//! may reach the client after the next hop has the message: those are counted, never
//! clamped) to the sink's confirmed reply; the series gets the delivery side on the
//! generator's grid (`grid`) and the MTA's resources per interval. When messages arrive in
//! several copies (a fan-out), the drain and the backlog count recipients.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::drain::DrainEnd;
use super::grid::Grid;
use super::maillog::LogSays;
use crate::run::sampler::Observed;
use crate::sink::delivery::Delivery;
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::hist::{HistJson, ms};
use crate::stats::recorder::{new_histogram, record_clamped};
use crate::stats::results::SelfReport;
use crate::stats::summary::{Injection, RelaySummary, Summary};
use crate::stats::timelog::TimeLog;

/// What a flush held and when it let go.
pub(super) struct Released {
    /// Messages on hold when released.
    pub(super) held: u64,
    /// Messages the MTA said it released.
    pub(super) released: u64,
    /// Wall-clock µs of the release.
    pub(super) at_us: u64,
    /// How long the release itself took, ms.
    pub(super) took_ms: f64,
}

/// Octets the MTA's connections carried, as the generator and the sink counted them.
pub(super) struct NetTotals {
    /// Written by the generator to the MTA.
    pub(super) to_mta: u64,
    /// Read by the sink from the MTA; none when the receiver is not the embedded sink.
    pub(super) from_mta: Option<u64>,
}

/// What a relay run measured besides the generator's and the sink's results.
pub(super) struct CombineInputs {
    /// Accept time (wall µs) per sequence number the MTA accepted.
    pub(super) accepts: HashMap<u64, u64>,
    /// When each accepted message's data had been written to its end (wall µs), where the
    /// generator logged it: end to end counts from it (from the acceptance otherwise).
    pub(super) data_ends: HashMap<u64, u64>,
    /// Wall-clock µs when injection started: the drain counts from it.
    pub(super) origin_us: u64,
    /// Wall-clock µs when injection ended (the generator's last reply): the figures after
    /// injection count from it.
    pub(super) inject_end_us: u64,
    pub(super) interval: Duration,
    /// Wall-clock µs when the watch for deliveries ended: the end of the series.
    pub(super) end_us: u64,
    /// The MTA, as the sampler saw it.
    pub(super) observed: Observed,
    pub(super) expected: u64,
    /// How the drain ended.
    pub(super) drain_end: DrainEnd,
    /// `status=sent` lines the lab's log gained during the run (any message's), where
    /// `log` does not read it message by message.
    pub(super) maillog_sent: Option<u64>,
    /// What the lab MTA's log says of this run's messages, where it is read so.
    pub(super) log: Option<LogSays>,
    pub(super) queued_left: Option<u64>,
    /// The whole process over the whole run (injection and drain; generator and sink).
    pub(super) tool_cpu: CpuTimes,
    pub(super) tool_secs: f64,
    /// A flush's release: then the drain counts from it, not from the first injection.
    pub(super) released: Option<Released>,
    /// The MTA's network in from the generator and out to the sink.
    pub(super) net: NetTotals,
}

/// One accepted message that arrived, on the wall clock (µs).
struct Msg {
    /// The client read the MTA's 250.
    accept_us: u64,
    /// End to end counts from here: the end of its data write (or the acceptance).
    from_us: u64,
    /// Its first confirmed arrival.
    arrival_us: u64,
}

/// One run's delivery side, per message: what arrived of what the MTA accepted.
struct Arrived {
    /// Each accepted message that arrived.
    msgs: Vec<Msg>,
    /// Accepted sequence numbers that never arrived (the first 1,000, in order).
    lost_seqs: Vec<u64>,
}

/// Where end to end counts from for message `seq`: the end of its data, else its acceptance.
fn from_us(x: &CombineInputs, seq: u64, accept_us: u64) -> u64 {
    x.data_ends.get(&seq).copied().unwrap_or(accept_us)
}

/// The copies of accepted messages that brought new recipients: (sequence number, arrival
/// µs, how many); and whether some message arrived in several (a fan-out).
fn copies(accepts: &HashMap<u64, u64>, delivery: &Delivery) -> (Vec<(u64, u64, u64)>, bool) {
    let all = delivery
        .recipient_arrivals
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mine: Vec<(u64, u64, u64)> = all
        .iter()
        .filter(|(seq, _, _)| accepts.contains_key(seq))
        .copied()
        .collect();
    let mut seen = std::collections::HashSet::new();
    let several = !mine.iter().all(|(seq, _, _)| seen.insert(*seq));
    (mine, several)
}

/// End to end per recipient, when some message arrived in several copies: each copy's
/// time since its message's data ended, once per new recipient it brought.
fn per_recipient(x: &CombineInputs, copies: &[(u64, u64, u64)]) -> Option<HistJson> {
    let mut h = new_histogram();
    for (seq, at, n) in copies {
        if let Some(acc) = x.accepts.get(seq) {
            let from = from_us(x, *seq, *acc);
            if *at >= from {
                record_clamped(&mut h, at - from, *n);
            }
        }
    }
    (!h.is_empty()).then(|| HistJson::from_hist(&h))
}

/// What arrived of the accepted messages; the rest, less those known bounced, in
/// `lost_seqs`.
fn arrived(x: &CombineInputs, arrivals: &TimeLog, bounced: &HashMap<u64, u64>) -> Arrived {
    let times: HashMap<u64, u64> = arrivals.entries().into_iter().collect();
    let mut msgs = Vec::with_capacity(x.accepts.len());
    let mut lost = Vec::new();
    for (seq, acc) in &x.accepts {
        match times.get(seq) {
            Some(t) => msgs.push(Msg {
                accept_us: *acc,
                from_us: from_us(x, *seq, *acc),
                arrival_us: *t,
            }),
            None if bounced.contains_key(seq) => {}
            None => lost.push(*seq),
        }
    }
    lost.sort_unstable();
    lost.truncate(1000);
    Arrived {
        msgs,
        lost_seqs: lost,
    }
}

/// Messages that reached the receiver before the client read the MTA's 250: how many, and
/// the largest lead, ms.
fn before_accept(msgs: &[Msg]) -> (u64, Option<f64>) {
    let leads: Vec<u64> = msgs
        .iter()
        .filter(|m| m.arrival_us < m.accept_us)
        .map(|m| m.accept_us - m.arrival_us)
        .collect();
    let max = leads.iter().max().map(|us| *us as f64 / 1000.0);
    (leads.len() as u64, max)
}

/// Puts the generator's and the sink's results together into the relay's: deliveries
/// are this run's traced messages that the MTA had accepted, counted per recipient
/// (loss) and per message (rate, unless messages arrived in several copies); end to end
/// runs from the end of each message's data to the sink's confirmed reply; the series
/// gets the delivery side on the generator's grid and the MTA's resources per interval.
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
    let bounced = Bounced::of(x, delivery);
    let left = x
        .expected
        .saturating_sub(acc.recipients + bounced.recipients);
    let aborted = x.drain_end == DrainEnd::Aborted;
    let (lost, undelivered) = if aborted { (0, left) } else { (left, 0) };
    // Arrived, but only cut or altered: not lost, not delivered intact.
    let damaged_seqs = delivery.damaged_only(|seq| x.accepts.contains_key(&seq));
    let mut arrived = arrived(x, &delivery.arrivals, &bounced.by_seq);
    if left == 0 {
        // Every one that did not arrive was bounced, some by a count the log gives
        // without naming their messages.
        arrived.lost_seqs.clear();
    }
    // A fan-out: the drain and the backlog follow the recipients, each copy in its turn.
    let (copies, by_recipient) = copies(&x.accepts, delivery);
    let accepted = send.counters.accepted;
    let inject_s = send.duration_s.max(1e-9);
    // The drain: first injection → last arrival (of any copy in a fan-out); none when
    // nothing arrived.
    let arrival_times: Vec<(u64, u64)> = if by_recipient {
        copies.iter().map(|(_, t, k)| (*t, *k)).collect()
    } else {
        arrived.msgs.iter().map(|m| (m.arrival_us, 1)).collect()
    };
    let last_arrival_us = arrival_times.iter().map(|(t, _)| *t).max();
    let last_us = last_arrival_us.unwrap_or(x.origin_us);
    // A flush's drain starts at the release: nothing could be delivered before.
    let drain_from_us = x.released.as_ref().map_or(x.origin_us, |r| r.at_us);
    let drain_s = last_arrival_us.map(|t| (t.saturating_sub(drain_from_us) as f64 / 1e6).max(1e-6));
    let drained_units = if by_recipient {
        acc.recipients
    } else {
        acc.messages
    };
    // One grid for injection and delivery, from the generator's time zero to the end of
    // the watch (or the last arrival, were it later).
    let zero_us = if send.started_at_us > 0 {
        send.started_at_us
    } else {
        x.origin_us
    };
    let grid = Grid::new(
        &send.series,
        x.interval,
        zero_us,
        x.end_us.max(last_us.saturating_add(1)),
    );
    let n = grid.len();
    // Per point: handed to the MTA, delivered, and the end to end of what arrived in it.
    let mut per_iv: Vec<(u64, u64, hdrhistogram::Histogram<u64>)> =
        (0..n).map(|_| (0, 0, new_histogram())).collect();
    let mut e2e = new_histogram();
    let mut before_data_end = 0u64;
    for m in &arrived.msgs {
        let iv = &mut per_iv[grid.index(m.arrival_us)];
        if !by_recipient {
            iv.1 += 1;
        }
        // Never negative on one clock: an MTA cannot deliver what it has not all received.
        // Were the wall clock stepped between the two stamps (or only the 250 is known),
        // the message is counted apart, never put at zero.
        match m.arrival_us.checked_sub(m.from_us) {
            Some(us) => {
                record_clamped(&mut e2e, us, 1);
                record_clamped(&mut iv.2, us, 1);
            }
            None => before_data_end += 1,
        }
    }
    if by_recipient {
        for (_, at, k) in &copies {
            per_iv[grid.index(*at)].1 += k;
        }
        // What the MTA took on, per recipient: the generator's count at each 250.
        for (i, p) in send.series.iter().enumerate() {
            per_iv[i].0 += p.counters.rcpts.delivered;
        }
    } else {
        // What the MTA took on, per message: each accepted one at the end of its data.
        for (seq, acc) in &x.accepts {
            per_iv[grid.index(from_us(x, *seq, *acc))].0 += 1;
        }
    }
    // Backlog per point: handed over so far minus delivered so far.
    let (mut in_n, mut del_n, mut max_backlog) = (0i64, 0i64, 0i64);
    let mut series = Vec::with_capacity(n);
    for (i, (handed, delivered, hist)) in per_iv.iter().enumerate() {
        // Points after injection (the drain) have no generator point: an empty one.
        let mut p = send.series.get(i).cloned().unwrap_or_default();
        if i < grid.len() {
            (p.t_s, p.dt_s) = grid.span_s(i);
            p.msgs_per_sec = p.counters.accepted as f64 / p.dt_s.max(1e-9);
        }
        in_n += *handed as i64;
        del_n += *delivered as i64;
        p.relay.delivered = Some(*delivered);
        p.relay.backlog = Some(in_n - del_n);
        p.e2e_p99_ms = (!hist.is_empty()).then(|| ms(hist, 0.99));
        max_backlog = max_backlog.max(in_n - del_n);
        series.push(p);
    }
    // The sampler's readings count from the relay's start, a moment before injection.
    x.observed.fill(&mut series, zero_us);
    let e2e = (!e2e.is_empty()).then(|| HistJson::from_hist(&e2e));
    let e2e_rcpt = by_recipient.then(|| per_recipient(x, &copies)).flatten();
    let (delivered_before_accept, before_accept_max_ms) = before_accept(&arrived.msgs);
    // The MTA's averages are over the time it was watched (`watched_s`).
    let sut_report = x.observed.report(&series);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    // The injection's rate is taken over its whole duration here (the generator's own
    // summary takes it over its active span): the relay compares it with the drain.
    let intended = match &send.summary {
        Summary::Send(s) => s.injection.intended,
        _ => send.counters.sent,
    };
    // The receiver's negative replies: each one a delivery the MTA had to try again (or
    // bounce), the way its log counts `status=deferred`; a connection refused at the
    // greeting defers the message the MTA meant to send on it.
    let receiver_rejected = match &sink.summary {
        Summary::Sink(s) => Some(s.rejected + s.sessions_refused),
        _ => None,
    };
    send.summary = Summary::Relay(RelaySummary {
        injection: Injection::new(&send.counters, intended, inject_s),
        expected_recipients: x.expected,
        delivered: acc.recipients,
        delivered_messages: acc.messages,
        bounced: bounced.recipients,
        lost,
        damaged: damaged_seqs.len() as u64,
        undelivered,
        drain_aborted: aborted,
        duplicates,
        aborted_delivered: acc.unexpected,
        bounces: load(&delivery.bounces),
        delay_notices: load(&delivery.delay_notices),
        untraced: load(&delivery.untraced),
        drained: x.drain_end == DrainEnd::Drained,
        inject_mpm: accepted as f64 / inject_s * 60.0,
        drain_mpm: drain_s.map(|d| drained_units as f64 / d * 60.0),
        drain_s,
        delivery_per_sec: super::pace::delivery_rate(arrival_times),
        drain_per_recipient: by_recipient,
        e2e_p50_ms: e2e.as_ref().map(|h| h.p50_us as f64 / 1000.0),
        e2e_p99_ms: e2e.as_ref().map(|h| h.p99_us as f64 / 1000.0),
        delivered_before_accept,
        before_accept_max_ms,
        max_backlog,
        max_queue: series
            .iter()
            .filter_map(|p| p.relay.queue)
            .fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.max(q)))),
        maillog_sent: x.log.as_ref().map(|l| l.sent).or(x.maillog_sent),
        maillog_bounced: x.log.as_ref().map(LogSays::bounced_total),
        queued_left: x.queued_left,
        receiver_rejected,
        max_sustainable_per_sec: None,
        max_sustainable_mpm: None,
        flush_held: x.released.as_ref().map(|r| r.held),
        release_at_s: x
            .released
            .as_ref()
            .map(|r| r.at_us.saturating_sub(x.origin_us) as f64 / 1e6),
        // Seed 003's "+s to flush" and the MTA's network bytes.
        last_arrival_after_injection_s: last_arrival_us
            .map(|t| t.saturating_sub(x.inject_end_us) as f64 / 1e6),
        last_arrival_before_injection_end_s: last_arrival_us
            .filter(|t| *t < x.inject_end_us)
            .map(|t| (x.inject_end_us - t) as f64 / 1e6),
        drain_end_after_injection_s: Some(x.end_us.saturating_sub(x.inject_end_us) as f64 / 1e6),
        net_to_mta_bytes: Some(x.net.to_mta),
        net_from_mta_bytes: x.net.from_mta,
        ..RelaySummary::default()
    });
    if before_data_end > 0 {
        send.self_report.warnings.push(format!(
            "{before_data_end} messages arrived before the instant end to end counts from (the end of their data, or their 250 where that is not known; was the wall clock stepped?): they are left out of end to end"
        ));
    }
    if let Some(r) = &x.released {
        let first_us = arrived.msgs.iter().map(|m| m.arrival_us).min();
        send.extra.insert(
            "flush".into(),
            serde_json::json!({
                "held": r.held,
                "released": r.released,
                "release_at_s": r.at_us.saturating_sub(x.origin_us) as f64 / 1e6,
                "release_took_ms": r.took_ms,
                "first_arrival_s": first_us.map(|t| t.saturating_sub(x.origin_us) as f64 / 1e6),
                "arrived_before_release": arrived.msgs.iter().filter(|m| m.arrival_us < r.at_us).count(),
            }),
        );
    }
    let held = x
        .queued_left
        .map_or(String::new(), |q| format!(" ({q} messages still queued)"));
    match x.drain_end {
        // A timeout's warning depends on the fault, recorded after this
        // (`drain::timed_out_warning`).
        DrainEnd::Drained | DrainEnd::TimedOut => {}
        DrainEnd::Aborted => send.self_report.warnings.push(format!(
            "a signal cut the drain short{held}: {undelivered} recipients were not delivered yet, not lost; the delivery figures cover what arrived until then"
        )),
    }
    if bounced.unnamed > 0 && !arrived.lost_seqs.is_empty() {
        send.self_report.warnings.push(format!(
            "{} of the sequence numbers listed as never arrived were bounced: the MTA's log counts bounces without naming their messages",
            bounced.unnamed
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
    send.forget_unobserved_sut();
    let seqs_key = if aborted {
        "undelivered_seqs"
    } else {
        "lost_seqs"
    };
    send.extra.insert(seqs_key.into(), arrived.lost_seqs.into());
    send.extra.insert(
        "damaged_seqs".into(),
        damaged_seqs
            .into_iter()
            .take(1000)
            .collect::<Vec<_>>()
            .into(),
    );
    send.extra.insert(
        "sink".into(),
        serde_json::to_value(&sink.summary).unwrap_or_default(),
    );
    if let Some(v) = sink.extra.get("dkim_verify") {
        send.extra.insert("dkim_verify".into(), v.clone());
    }
    send
}

/// The recipients the MTA bounced: per sequence number as the sink's bounces and the
/// MTA's log name them (the larger count of the two for each message), and those the
/// log counts without naming them.
struct Bounced {
    by_seq: HashMap<u64, u64>,
    /// Bounced recipients no notice or log line names the message of.
    unnamed: u64,
    /// Every bounced recipient.
    recipients: u64,
}

impl Bounced {
    fn of(x: &CombineInputs, delivery: &Delivery) -> Bounced {
        let mut by_seq: HashMap<u64, u64> = delivery
            .bounced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(seq, _)| x.accepts.contains_key(seq))
            .map(|(seq, n)| (*seq, *n))
            .collect();
        if let Some(log) = &x.log {
            for (seq, n) in log
                .bounced
                .iter()
                .filter(|(s, _)| x.accepts.contains_key(s))
            {
                let e = by_seq.entry(*seq).or_insert(0);
                *e = (*e).max(*n);
            }
        }
        let named: u64 = by_seq.values().sum();
        let recipients = named.max(x.log.as_ref().map_or(0, LogSays::bounced_total));
        Bounced {
            by_seq,
            unnamed: recipients - named,
            recipients,
        }
    }
}
