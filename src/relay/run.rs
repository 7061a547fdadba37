//! One relay run: the embedded sink and a sampler of the MTA start, the generator injects,
//! the drain waits for deliveries, and the results are put together.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::RelayError;
use super::combine::{CombineInputs, combine};
use super::drain::{QueueProbe, drain};
use crate::lab::LabServer;
use crate::run::live::LiveExtra;
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::sink;
use crate::sink::delivery::Delivery;
use crate::sink::plan::SinkPlan;
use crate::stats::Results;
use crate::stats::cpu::CpuTimes;
use crate::stats::sut;
use crate::stats::timelog::TimeLog;
use crate::transport::listen::Listener;

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
    /// Accept times per sequence number (filled by the generator).
    pub accepts: Arc<TimeLog>,
    /// What arrives at the sink, tracking this run's id (the generator's `run_id`).
    pub delivery: Arc<Delivery>,
    /// A shell command whose first number is sampled per interval (e.g. a queue count).
    pub queue_cmd: Option<String>,
}

/// One sampler reading: the SUT's totals and the queue command's value.
pub(super) struct Reading {
    pub(super) sut: sut::Sample,
    pub(super) queue: Option<f64>,
    /// Seconds from the start when the totals were read: rates divide by the time between
    /// readings, which drifts from the series' intervals when a reading is late.
    pub(super) t_s: f64,
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
            Some(cmd) => super::drain::queue_value(cmd).await,
            None => None,
        };
        out.push(Reading { sut, queue, t_s });
    }
}

/// Runs one relay run; `lab` (if any) is only read, for its log and queue.
pub async fn run(
    mut r: RelayRun,
    lab: Option<&dyn LabServer>,
    shutdown: Shutdown,
) -> Result<Results, RelayError> {
    let progress = r.send.load.progress;
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
        progress.interval,
        start,
        sampler_stop.clone(),
    ));
    let d = delivery.clone();
    r.send.load.live_extra = Some(LiveExtra(Arc::new(move |total| {
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
            return Err(RelayError::Usage(e));
        }
    };
    let expected = send.counters.rcpts.delivered;
    let queue = QueueProbe {
        lab,
        cmd: r.queue_cmd.as_deref(),
    };
    let drained = drain(
        &delivery,
        expected,
        &queue,
        r.drain_timeout,
        progress,
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
            interval: progress.interval,
            readings,
            sut0_t,
            expected,
            drained,
            sut0,
            sut1,
            peak_sut,
            maillog_sent: lab.map(|l| l.delivered_logged().saturating_sub(logged_before) as u64),
            queued_left: lab.map(|l| l.queued() as u64),
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
