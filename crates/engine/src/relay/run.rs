//! One relay run: the embedded sink and a sampler of the MTA start, the generator injects,
//! the drain waits for deliveries, and the results are put together.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::RelayError;
use super::combine::{CombineInputs, NetTotals, Released, combine};
use super::drain::{Limits, QueueProbe, drain};
use super::maillog::{self, Mark};
use crate::lab::{Mta, MtaLab};
use crate::run::exporter::Gauge;
use crate::run::iotrace::{IoCounts, IoTrace};
use crate::run::live::LiveExtra;
use crate::run::sampler::{NetRead, Pids, Sampler};
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::sink;
use crate::sink::delivery::Delivery;
use crate::sink::plan::SinkPlan;
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::host::Device;
use crate::stats::summary::Summary;
use crate::stats::sut::NetBytes;
use crate::stats::timelog::TimeLog;
use crate::transport::count::NetTally;
use crate::transport::listen::Listener;

/// Everything a relay run needs, already started where it must be (listeners bound, lab up).
pub struct RelayRun {
    /// The generator's plan (targets the MTA).
    pub send: SendPlan,
    /// What receives the relayed mail.
    pub receiver: Receiver,
    /// Longest wait for deliveries after injection.
    pub drain_timeout: Duration,
    /// How long arrivals may pause, with the MTA's queue empty, before the rest is taken
    /// as not coming: a sink sees a message when the MTA hands it over (1 s), a store
    /// watched over IMAP some time later.
    pub settle: Duration,
    /// Processes of the system under test (lab, or `--sut-pid` trees).
    pub sut_pids: Pids,
    /// Accept times per sequence number (filled by the generator).
    pub accepts: Arc<TimeLog>,
    /// What arrives at the sink, tracking this run's id (the generator's `run_id`).
    pub delivery: Arc<Delivery>,
    /// A shell command whose first number is sampled per interval (e.g. a queue count).
    pub queue_cmd: Option<String>,
    /// The block device holding the MTA's queue, or why none is watched (a RAM disk);
    /// `None` when nothing says where the queue is.
    pub queue_device: Option<Result<Device, String>>,
    /// The flush benchmark: the lab held everything injected; release it all at once
    /// after injection, then drain.
    pub flush: bool,
    /// Count what the system under test's processes ask of the kernel per delivered
    /// message (`--trace-io`), from injection to the end of the drain.
    pub trace_io: bool,
    /// Which MTA the lab is, so that its log is read for this run's deliveries and
    /// bounces (where this module can read that MTA's log).
    pub mta: Option<Mta>,
    /// `--fault`: the lab MTA crashed (or its power cut) during injection, then restarted.
    pub fault: Option<super::fault::FaultPlan>,
}

/// A receiver's own run: given the run's delivery record (to confirm each arrival in),
/// the stop it waits for and the run's time zero, it returns its results once stopped.
pub type ReceiverRun = Box<
    dyn FnOnce(
            Arc<Delivery>,
            Shutdown,
            Instant,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Results> + Send>>
        + Send,
>;

/// What receives the relayed mail and confirms each arrival.
pub enum Receiver {
    /// mailbench's embedded sink, on its bound listeners.
    Sink {
        /// The sink's plan.
        plan: Box<SinkPlan>,
        /// Its bound listeners.
        listeners: Vec<Listener>,
    },
    /// Something else: a mail store the MTA delivers into, watched over IMAP.
    Other(ReceiverRun),
}

/// Runs one relay run; `lab` (if any) is read for its log and queue, and released after
/// injection in a flush.
pub async fn run(
    mut r: RelayRun,
    lab_arc: Option<Arc<dyn MtaLab>>,
    shutdown: Shutdown,
) -> Result<Results, RelayError> {
    let lab = lab_arc.as_deref();
    let progress = r.send.load.progress;
    // Started before anything else, so a refusal leaves nothing running.
    let io_trace = match r.trace_io {
        true => Some(IoTrace::start(&(r.sut_pids)()).map_err(RelayError::Usage)?),
        false => None,
    };
    let start = Instant::now();
    let cpu0 = CpuTimes::of_self();
    // A lab may carry earlier runs (a sweep): count only this run's log lines.
    let logged_before = lab.map_or(0, |l| l.delivered_logged());
    let log_mark = lab
        .filter(|l| l.logs_deliveries())
        .zip(r.mta)
        .map(|(l, mta)| (mta, Mark::now(l.logs())));
    let lookups_before = lab.and_then(|l| l.lookups());
    let delivery = r.delivery.clone();
    // The MTA's network in and out, counted where the generator and the sink meet it.
    let mut net = NetTallies::default();
    r.send.client.count = Some(net.generator.clone());
    let sink_stop = Shutdown::default();
    let sink_task = match r.receiver {
        Receiver::Sink {
            mut plan,
            listeners,
        } => {
            plan.count = Some(net.sink.clone());
            net.sink_counted = true;
            tokio::spawn(sink::run(
                *plan,
                listeners,
                sink_stop.clone(),
                delivery.clone(),
                start,
            ))
        }
        Receiver::Other(run) => tokio::spawn(run(delivery.clone(), sink_stop.clone(), start)),
    };
    let (device, device_note) = match r.queue_device.take() {
        Some(Ok(d)) => (Some(d), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let sampler = Sampler::start(
        r.sut_pids.clone(),
        Some(net.reader()),
        r.queue_cmd.clone(),
        device,
        progress.interval,
        start,
    );
    let queue_watch = lab_arc
        .clone()
        .map(|l| super::qstates::Watch::start(l, progress.interval, start));
    let (d, server_cpu) = (delivery.clone(), sampler.latest_cpu());
    r.send.load.live_extra = Some(LiveExtra(Arc::new(move |total| {
        let got = d.messages.load(Ordering::Relaxed);
        let backlog = total.accepted as i64 - got as i64;
        let mut gauges = vec![
            Gauge {
                name: "delivered_messages",
                help: "Messages the sink has received from the MTA so far.",
                value: got as f64,
            },
            Gauge {
                name: "backlog",
                help: "Messages the MTA accepted and has not delivered yet.",
                value: backlog as f64,
            },
        ];
        let mut text = format!("  delivered {got} backlog {backlog}");
        if let Some(cpu) = server_cpu.get() {
            text.push_str(&format!("  server cpu {cpu:.0}%"));
            gauges.push(Gauge {
                name: "server_cpu_percent",
                help: "The server under test's CPU in the last interval, % of one core.",
                value: cpu,
            });
        }
        (text, gauges)
    })));
    let data_ends = r.send.data_end_log.clone();
    let origin_us = crate::stats::clock::unix_us();
    // A crash or power cut takes the MTA down until its restart greets: closed-loop
    // connections that fail meanwhile wait for it and make their messages up (an
    // open-loop schedule goes on at its times across the restart as it is).
    let outage = r
        .fault
        .filter(|f| !matches!(f.kind, super::fault::FaultKind::DiskFull { .. }))
        .filter(|_| matches!(r.send.load.pacing, crate::load::schedule::Pacing::Closed))
        .map(|_| Arc::new(crate::load::outage::Outage::default()));
    r.send.load.outage = outage.clone();
    let armed = r.fault.zip(lab_arc.clone()).map(|(f, l)| {
        super::fault::arm(
            f,
            l,
            r.accepts.clone(),
            Instant::now(),
            shutdown.clone(),
            outage.clone(),
        )
    });
    let sent = crate::send::run(r.send, shutdown.clone()).await;
    // The fault fired (and the MTA is up again) before the drain starts.
    let fault = match armed.map(super::fault::Armed::finish) {
        Some(f) => Some(f.await.map_err(RelayError::Failed)),
        None => None,
    }
    .transpose();
    let outcome = sent
        .map_err(RelayError::Usage)
        .and_then(|s| fault.map(|f| (s, f)));
    let (send, fault) = match outcome {
        Ok(v) => v,
        Err(e) => {
            sink_stop.stop.cancel();
            let _ = sampler.finish().await;
            if let Some(w) = queue_watch {
                w.finish().await;
            }
            let _ = sink_task.await;
            return Err(e);
        }
    };
    let inject_end_us = crate::stats::clock::unix_us();
    let signalled_in_injection = shutdown.interrupted();
    // The pace changes here: the MTA's resources and queues read at the injection's end.
    sampler.read_now();
    queue_watch.iter().for_each(super::qstates::Watch::read_now);
    let expected = send.counters.rcpts.delivered;
    let released = match (r.flush, lab_arc.clone()) {
        (true, Some(l)) => Some(release(l, send.counters.accepted, progress.quiet).await?),
        (true, None) => return Err(RelayError::Usage("--flush needs --lab".into())),
        (false, _) => None,
    };
    let queue = QueueProbe {
        lab,
        cmd: r.queue_cmd.as_deref(),
    };
    let drain_end = drain(
        &delivery,
        expected,
        &queue,
        Limits {
            timeout: r.drain_timeout,
            settle: r.settle,
        },
        progress,
        start,
        &shutdown,
    )
    .await;
    let end_us = crate::stats::clock::unix_us();
    let io = io_trace.map(IoTrace::finish).transpose();
    sink_stop.stop.cancel();
    let observed = sampler.finish().await;
    let queue_states = match queue_watch {
        Some(w) => w.finish().await,
        None => Vec::new(),
    };
    let sink = sink_joined(sink_task.await)?;
    let mut results = combine(
        send,
        sink,
        &delivery,
        &CombineInputs {
            accepts: r.accepts.entries().into_iter().collect(),
            data_ends: data_ends.map_or_else(HashMap::new, |l| l.entries().into_iter().collect()),
            origin_us,
            inject_end_us,
            interval: progress.interval,
            end_us,
            observed,
            expected,
            drain_end,
            log: match log_mark {
                Some((mta, mark)) => read_log(mta, &mark, &delivery).await,
                None => None,
            },
            maillog_sent: lab
                .filter(|l| l.logs_deliveries())
                .map(|l| l.delivered_logged().saturating_sub(logged_before) as u64),
            queued_left: lab.map(|l| l.queued() as u64),
            tool_cpu: CpuTimes::of_self().since(&cpu0),
            tool_secs: start.elapsed().as_secs_f64(),
            released,
            net: net.totals(),
        },
    );
    // A signal during the drain cut the run short, even when the injection had ended
    // before it.
    results.interrupted |= drain_end == super::drain::DrainEnd::Aborted;
    if results.interrupted && !signalled_in_injection {
        results
            .extra
            .insert("interrupted_during".into(), "drain".into());
    }
    super::lookups::record(&mut results, lookups_before, lab.and_then(|l| l.lookups()));
    if let Some(l) = lab {
        super::lookups::delivered_source(&mut results, l.logs_deliveries());
    }
    if let (Some(note), Some(sut)) = (device_note, results.extra.get_mut("sut")) {
        sut["queue_device_note"] = note.into();
    }
    super::qstates::record(&mut results, queue_states, progress.interval);
    if let Some((plan, fired)) = fault {
        let made_up = outage.as_ref().map(|o| o.units_made_up());
        super::fault::record(
            &mut results,
            plan,
            fired,
            &delivery,
            &r.accepts,
            origin_us,
            made_up,
        );
    }
    if drain_end == super::drain::DrainEnd::TimedOut
        && let crate::stats::summary::Summary::Relay(s) = &results.summary
    {
        let w = super::drain::timed_out_warning(s);
        results.self_report.warnings.push(w);
    }
    if let Some(io) = io.map_err(RelayError::Failed)? {
        per_message(&mut results, &io);
    }
    Ok(results)
}

/// The bytes the MTA's connections carried, counted below TLS where mailbench holds their
/// other end: the generator's (the MTA's clients) and the embedded sink's (its next hop).
#[derive(Default)]
struct NetTallies {
    generator: NetTally,
    sink: NetTally,
    /// The receiver is the embedded sink, which counts (a store watched over IMAP does not).
    sink_counted: bool,
}

impl NetTallies {
    /// The MTA's network in and out so far, for the sampler's per-interval rates: what
    /// the generator and the sink wrote to it, and what they read from it.
    fn reader(&self) -> NetRead {
        let (g, s) = (self.generator.clone(), self.sink.clone());
        Arc::new(move || {
            let ((g_read, g_written), (s_read, s_written)) = (g.totals(), s.totals());
            NetBytes {
                into_store: g_written + s_written,
                out_of_store: g_read + s_read,
            }
        })
    }

    /// The whole run's octets into the MTA from the generator, and out of it to the sink.
    fn totals(&self) -> NetTotals {
        NetTotals {
            to_mta: self.generator.totals().1,
            from_mta: self.sink_counted.then(|| self.sink.totals().0),
        }
    }
}

/// What the lab's log says of this run's messages. The MTA writes a delivery to its log
/// a moment after the receiver confirmed it (Postfix through its log daemon), so a log
/// that shows fewer deliveries than the receiver counted is read again, for up to 2 s.
async fn read_log(mta: Mta, mark: &Mark, delivery: &Delivery) -> Option<maillog::LogSays> {
    let run = delivery.run?;
    let confirmed = delivery.recipients.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let says = maillog::read(mta, mark, run)?;
        if says.sent >= confirmed || Instant::now() >= deadline {
            return Some(says);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `--trace-io`'s counts, whole in `extra.iotrace` and per delivered message in the
/// summary (none when nothing was delivered: there is nothing to divide by).
fn per_message(results: &mut Results, io: &IoCounts) {
    results.extra.insert(
        "iotrace".into(),
        serde_json::to_value(io).unwrap_or_default(),
    );
    let Summary::Relay(s) = &mut results.summary else {
        return;
    };
    let n = s.delivered_messages;
    let per = |count: u64| (n > 0).then(|| count as f64 / n as f64);
    s.fsyncs_per_msg = per(io.fsyncs);
    s.files_created_per_msg = per(io.files_created);
    s.renames_per_msg = per(io.renames);
    s.unlinks_per_msg = per(io.unlinks);
    s.bytes_written_per_msg = per(io.bytes_written);
    s.ctx_switches_per_msg = per(io.context_switches);
}

/// The flush: waits until the lab holds every accepted message (its cleanup may still be
/// writing the last ones), then releases them all at once, off the runtime.
async fn release(lab: Arc<dyn MtaLab>, accepted: u64, quiet: bool) -> Result<Released, RelayError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while (lab.held() as u64) < accepted && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = lab.held() as u64;
    let at_us = crate::stats::clock::unix_us();
    let t0 = Instant::now();
    let released = tokio::task::spawn_blocking(move || lab.release())
        .await
        .map_err(|e| RelayError::Failed(format!("the release failed: {e}")))?
        .map_err(RelayError::Failed)? as u64;
    let took_ms = t0.elapsed().as_secs_f64() * 1000.0;
    if !quiet {
        crate::run::live::say(&format!(
            "mailbench relay: flush: released {released} held messages in {took_ms:.0} ms"
        ));
    }
    Ok(Released {
        held,
        released,
        at_us,
        took_ms,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_sink_fails_the_run_instead_of_reporting_injection_alone() {
        let panicked = tokio::spawn(async { panic!("sink broke") }).await;
        let Err(RelayError::Failed(why)) = sink_joined(panicked.map(|()| unreachable!())) else {
            panic!("a failed sink must fail the relay run");
        };
        assert!(why.contains("embedded sink failed"), "{why}");
    }
}
