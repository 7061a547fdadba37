//! The skeleton every engine's run shares (the generator, the sink, and the mailbox and
//! DNS parts after them): time zero on both clocks, a tick per interval that drains the
//! statistics shards into the series and shows the live line (`live`), the final tick, and
//! the tool's own CPU over the run. Around it: the system under test watched while the run
//! goes (`sampler`) and what its processes ask of the kernel (`iotrace`), the figures
//! served at `/metrics` (`exporter`), and a run repeated in rounds or variants of it run in
//! rotating turns (`rounds`). Engines keep only what is theirs: the work, and their
//! summary.

pub mod exporter;
pub mod iotrace;
pub mod live;
pub mod rounds;
pub mod sampler;

use std::time::{Duration, Instant};

use crate::alarm::Ticker;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::SelfReport;
use crate::stats::{Collector, IntervalPoint, Recorder, Shards};
use live::Live;

/// A fresh random run id: the id in every trace header and results file of a run.
pub fn new_run_id() -> u64 {
    fastrand::u64(1..)
}

/// How a run shows itself while it goes, and how it slices its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Length of an interval line and of a series point.
    pub interval: Duration,
    /// No live or interval lines.
    pub quiet: bool,
}

/// A run in progress.
pub struct Runner {
    /// Time zero of the series.
    pub start: Instant,
    /// The wall clock at time zero, µs since the Unix epoch.
    pub started_us: u64,
    /// The length of an interval.
    pub interval: Duration,
    cpu0: CpuTimes,
    collector: Collector,
    live: Live,
    /// The ends of intervals, on the alarm thread: a tokio timer would make the runtime
    /// sleep with a kernel timer armed at every wait for the network.
    ticker: Ticker,
    /// When the last interval closed (time zero before the first).
    last_close: Instant,
}

/// What a finished run measured, for its results.
pub struct Finished {
    /// Everything recorded.
    pub total: Recorder,
    /// One point per interval.
    pub series: Vec<IntervalPoint>,
    /// Time zero on the wall clock, µs since the Unix epoch.
    pub started_us: u64,
    /// The run's length, seconds.
    pub duration_s: f64,
    /// The tool's own CPU over the run.
    pub cpu: CpuTimes,
    interval: Duration,
}

impl Runner {
    /// A run whose time zero is `start` (the caller may have taken it a moment before, so
    /// that parts of one run share it).
    pub fn new(start: Instant, progress: Progress) -> Runner {
        let interval = progress.interval;
        Runner {
            start,
            started_us: crate::stats::clock::unix_us()
                .saturating_sub(start.elapsed().as_micros() as u64),
            interval,
            cpu0: CpuTimes::of_self(),
            collector: Collector::new(start),
            live: Live::new(progress.quiet),
            ticker: Ticker::new(start + interval, interval),
            last_close: start,
        }
    }

    /// Waits for the end of the current interval. A tick that comes less than
    /// [`crate::stats::series::MIN_SHARE`] of an interval after the last one closed (the
    /// ticks missed while the process was busy, or every tick of a `--start-at` in the
    /// past, come at once) is let go: that interval goes on to the next tick.
    pub async fn tick(&mut self) {
        loop {
            self.ticker.tick().await;
            let since = self.last_close.elapsed().as_secs_f64();
            if !crate::stats::series::is_sliver(since, self.interval) {
                return;
            }
        }
    }

    /// Closes an interval: drains the shards into the series; returns the new point and
    /// the totals so far, for the live line.
    pub fn close_interval(&mut self, shards: &Shards) -> (IntervalPoint, &Recorder) {
        self.last_close = Instant::now();
        let p = self.collector.tick(shards).clone();
        (p, &self.collector.total)
    }

    /// The live view.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The last tick: drains what is left (into the last point, when it is too short to
    /// be one) and clears the live line.
    pub fn finish(mut self, shards: &Shards) -> Finished {
        self.collector.finish(shards, self.interval);
        self.live.finish();
        Finished {
            total: std::mem::take(&mut self.collector.total),
            series: std::mem::take(&mut self.collector.series),
            started_us: self.started_us,
            duration_s: self.start.elapsed().as_secs_f64().max(1e-9),
            cpu: CpuTimes::of_self().since(&self.cpu0),
            interval: self.interval,
        }
    }
}

impl Finished {
    /// The tool's average CPU over the run, in percent of one core.
    pub fn cpu_avg_pct(&self) -> f64 {
        self.cpu.total().as_secs_f64() / self.duration_s * 100.0
    }

    /// The tool's busiest interval, in percent of one core (see
    /// [`crate::stats::collector::busiest_cpu`]).
    pub fn cpu_peak_pct(&self) -> f64 {
        crate::stats::collector::busiest_cpu(&self.series, self.interval, self.cpu_avg_pct())
    }

    /// The tool's view of itself, with `warnings` about its own limits.
    pub fn self_report(&self, warnings: Vec<String>) -> SelfReport {
        SelfReport::new(self.cpu, self.duration_s, self.cpu_peak_pct(), warnings)
    }
}
