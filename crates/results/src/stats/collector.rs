//! Sharded recording and the per-interval aggregator.
//!
//! Workers record into one of a few `Mutex<Recorder>` shards (one lock per transaction,
//! practically uncontended); the collector drains the shards once per interval into a time
//! series point and a cumulative recorder. No channel message per event, no raw samples.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cpu::CpuTimes;
use super::hist::ms;
use super::metric::Metric;
use super::recorder::{Counters, Recorder};

/// How many shards workers on the current runtime record into, at most one per worker
/// task (`tasks`). One thread never contends with itself: one shard keeps the
/// histograms a command touches in its cache (eight shards' 50 KB each were missed
/// often enough to show). Threads get four each, so that two rarely share a lock.
pub fn shards_for(tasks: usize) -> usize {
    let threads = tokio::runtime::Handle::try_current().map_or_else(
        |_| crate::stats::cpu::cpu_count(),
        |h| h.metrics().num_workers(),
    );
    match threads {
        1 => 1,
        n => (n * 4).min(tasks.max(1)),
    }
}

/// A small fixed set of recorders shared by all workers.
pub struct Shards {
    shards: Vec<Mutex<Recorder>>,
}

impl Shards {
    /// `n` shards (at least one).
    pub fn new(n: usize) -> Self {
        Shards {
            shards: (0..n.max(1)).map(|_| Mutex::new(Recorder::new())).collect(),
        }
    }

    /// The shard for worker `i`.
    pub fn get(&self, i: usize) -> MutexGuard<'_, Recorder> {
        let m = &self.shards[i % self.shards.len()];
        // A worker that panicked while recording leaves plain counters behind: still usable.
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves everything recorded so far into `into`.
    pub fn drain_into(&self, into: &mut Recorder) {
        for i in 0..self.shards.len() {
            let mut s = self.get(i);
            into.merge(&s);
            s.reset();
        }
    }
}

/// One point of the time series: what happened during one interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IntervalPoint {
    /// Seconds since the start of the run at the end of this interval.
    pub t_s: f64,
    /// Length of this interval in seconds.
    pub dt_s: f64,
    /// Counters for this interval only.
    #[serde(flatten)]
    pub counters: Counters,
    /// Accepted messages per second in this interval.
    pub msgs_per_sec: f64,
    /// Median whole-transaction latency in this interval (ms).
    pub p50_ms: f64,
    /// 99th percentile whole-transaction latency in this interval (ms).
    pub p99_ms: f64,
    /// 99th percentile of schedule lag in this interval (ms; open loop).
    pub lag_p99_ms: f64,
    /// 99th percentile end-to-end latency of the arrivals in this interval (sink and
    /// relay runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_p99_ms: Option<f64>,
    /// CPU used by this process during the interval, in percent of one core.
    pub cpu_pct: f64,
    /// The interval's whole-unit, lag and end-to-end histograms (those with samples), by
    /// metric name, compactly encoded ([`super::hist::encode`]): what `mailbench merge`
    /// adds across agents to recompute each interval's percentiles exactly.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hists: BTreeMap<String, String>,
    /// The delivery side and the system under test (relay runs), written beside the rest.
    #[serde(flatten)]
    pub relay: RelayPoint,
}

/// What a relay run adds to an interval: the delivery side and the system under test (a
/// mailbox run: the store; a profile: its users). Each part is absent where the interval
/// has no reading.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RelayPoint {
    /// Messages delivered to the sink in this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<u64>,
    /// Accepted minus delivered at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<i64>,
    /// The system under test during the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sut: Option<SutPoint>,
    /// The value printed by `--queue-cmd` at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<f64>,
    /// A lab MTA's queues at the end of the interval, as its own queue tools count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_states: Option<Vec<super::queues::QueueState>>,
    /// A `mailbox profile` interval: its users and actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfilePoint>,
}

/// What a `mailbox profile` interval adds: the virtual users and their actions (those
/// that finished in it, and those due and not done at its end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfilePoint {
    /// Virtual users running.
    pub users: u64,
    /// Actions that finished in the interval, per minute.
    pub actions_per_min: f64,
    /// Their mean response time from when they were due, ms; absent when none finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_ms: Option<f64>,
    /// Their 95th percentile, ms; absent when none finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// Of them, those that failed (an error or a refusal).
    pub errors: u64,
    /// Actions due and not done at the interval's end.
    pub overdue: u64,
}

/// What the system under test used in one interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SutPoint {
    /// User CPU, percent of one core.
    pub cpu_user_pct: f64,
    /// System CPU, percent of one core.
    pub cpu_sys_pct: f64,
    /// Disk reads, KiB/s.
    pub read_kib_s: f64,
    /// Disk writes, KiB/s.
    pub write_kib_s: f64,
    /// Resident memory summed over its processes, KiB (pages they share counted in each).
    pub rss_kib: u64,
    /// Proportional set size summed over its processes, KiB: each page shared by N
    /// processes counted 1/N in each, so shared pages count once (absent when not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_kib: Option<u64>,
    /// Processes in the tree: a server that forks per connection shows its load here.
    pub procs: u64,
    /// The queue device's reads completed per second (when a device is watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_read_iops: Option<f64>,
    /// The queue device's writes completed per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_write_iops: Option<f64>,
    /// Share of the interval the queue device had I/O in flight, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_util_pct: Option<f64>,
    /// The machine's one-minute load average at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    /// Read calls per second (seed 001's disk read requests; absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_calls_s: Option<f64>,
    /// Write calls per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_calls_s: Option<f64>,
    /// Major page faults per second (seed 001's paging).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults_s: Option<f64>,
    /// Resident memory shared with files or other processes at the interval's end, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_kib: Option<u64>,
    /// Bytes per second the run's clients wrote to the store (counted at the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_in_bytes_s: Option<f64>,
    /// Bytes per second the run's clients read from the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_out_bytes_s: Option<f64>,
    /// CPU (user + system) by process name (`/proc/PID/stat`'s comm), percent of one
    /// core: which of the server's processes was busy (absent in older files).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_process: BTreeMap<String, f64>,
}

/// The tool's busiest interval, in percent of one core: the highest CPU share of an
/// interval at least half as long as `interval` (a run's last interval can be a sliver of
/// a millisecond, where one scheduler tick of CPU reads as a busy core), and never below
/// the run's `average`.
pub fn busiest_cpu(series: &[IntervalPoint], interval: std::time::Duration, average: f64) -> f64 {
    let min_dt = interval.as_secs_f64() / 2.0;
    series
        .iter()
        .filter(|p| p.dt_s >= min_dt)
        .map(|p| p.cpu_pct)
        .fold(average, f64::max)
}

/// The histograms each series point keeps, by the name they have in the results.
pub const SERIES_HISTS: [(&str, Metric); 3] = [
    ("total", Metric::Total),
    ("lag", Metric::Lag),
    ("e2e", Metric::E2e),
];

/// Drains shards on every tick into the series and the cumulative recorder.
pub struct Collector {
    start: Instant,
    last_tick: Instant,
    last_cpu: CpuTimes,
    interval: Recorder,
    /// The last closed interval's recordings, and the CPU used in it: what the run's last
    /// stretch joins when it is too short to be a point of its own.
    closed: (Recorder, f64),
    /// Everything recorded so far.
    pub total: Recorder,
    /// One point per tick.
    pub series: Vec<IntervalPoint>,
}

impl Collector {
    /// A collector whose clock starts at `start`.
    pub fn new(start: Instant) -> Self {
        Collector {
            start,
            last_tick: start,
            last_cpu: CpuTimes::of_self(),
            interval: Recorder::new(),
            closed: (Recorder::new(), 0.0),
            total: Recorder::new(),
            series: Vec::new(),
        }
    }

    /// Closes an interval: drains the shards, appends and returns the point.
    pub fn tick(&mut self, shards: &Shards) -> &IntervalPoint {
        let now = Instant::now();
        shards.drain_into(&mut self.interval);
        let cpu = CpuTimes::of_self();
        let dt = now.duration_since(self.last_tick).as_secs_f64().max(1e-9);
        let used = cpu.since(&self.last_cpu).total().as_secs_f64();
        let point = point_of(&self.interval, now.duration_since(self.start), dt, used);
        self.total.merge(&self.interval);
        // The closed interval's recordings are kept until the next one closes.
        std::mem::swap(&mut self.closed.0, &mut self.interval);
        self.closed.1 = used;
        self.interval.reset();
        self.last_tick = now;
        self.last_cpu = cpu;
        self.series.push(point);
        self.series.last().expect("just pushed")
    }

    /// Closes the run's last interval. When it is a sliver of `interval` (see
    /// [`super::series`]) and a point came before it, it joins that point instead of
    /// being one: the point then ends with the run and holds both spans' counts.
    pub fn finish(&mut self, shards: &Shards, interval: std::time::Duration) {
        let now = Instant::now();
        let since = now.duration_since(self.last_tick).as_secs_f64();
        if self.series.is_empty() || !super::series::is_sliver(since, interval) {
            self.tick(shards);
            return;
        }
        shards.drain_into(&mut self.interval);
        let cpu = CpuTimes::of_self();
        let used = cpu.since(&self.last_cpu).total().as_secs_f64();
        let prev = self.series.pop().expect("a point came before");
        self.total.merge(&self.interval);
        self.closed.0.merge(&self.interval);
        self.closed.1 += used;
        self.interval.reset();
        let dt = prev.dt_s + since;
        let point = point_of(
            &self.closed.0,
            now.duration_since(self.start),
            dt,
            self.closed.1,
        );
        self.last_tick = now;
        self.last_cpu = cpu;
        self.series.push(point);
    }
}

/// The point of an interval that recorded `iv`, ending `end` after the run's start, `dt`
/// seconds long, in which the process used `used` seconds of CPU.
fn point_of(iv: &Recorder, end: std::time::Duration, dt: f64, used: f64) -> IntervalPoint {
    let dt = dt.max(1e-9);
    IntervalPoint {
        t_s: end.as_secs_f64(),
        dt_s: dt,
        counters: iv.counters.clone(),
        msgs_per_sec: iv.counters.accepted as f64 / dt,
        p50_ms: ms(iv.hist(Metric::Total), 0.5),
        p99_ms: ms(iv.hist(Metric::Total), 0.99),
        lag_p99_ms: ms(iv.hist(Metric::Lag), 0.99),
        e2e_p99_ms: (!iv.hist(Metric::E2e).is_empty()).then(|| ms(iv.hist(Metric::E2e), 0.99)),
        cpu_pct: used / dt * 100.0,
        hists: SERIES_HISTS
            .iter()
            .filter(|(_, m)| !iv.hist(*m).is_empty())
            .map(|(name, m)| (name.to_string(), super::hist::encode(iv.hist(*m))))
            .collect(),
        relay: RelayPoint::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_sliver_of_an_interval_is_not_the_busiest() {
        let p = |dt_s: f64, cpu_pct: f64| IntervalPoint {
            dt_s,
            cpu_pct,
            ..IntervalPoint::default()
        };
        let series = [p(1.0, 0.2), p(1.0, 0.3), p(0.001, 93.0)];
        let one_s = Duration::from_secs(1);
        assert_eq!(busiest_cpu(&series, one_s, 0.25), 0.3);
        // A run shorter than an interval: the average is all there is.
        assert_eq!(busiest_cpu(&[p(0.2, 40.0)], one_s, 12.0), 12.0);
        // Never below the average.
        assert_eq!(busiest_cpu(&series, one_s, 5.0), 5.0);
    }

    #[test]
    fn one_thread_records_into_one_shard_and_threads_into_four_each() {
        let on = |threads: usize| {
            let rt = match threads {
                1 => tokio::runtime::Builder::new_current_thread().build(),
                n => tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(n)
                    .build(),
            };
            let rt = rt.expect("a runtime");
            rt.block_on(async { (shards_for(50), shards_for(3)) })
        };
        assert_eq!(on(1), (1, 1));
        assert_eq!(on(2), (8, 3), "four per thread, at most one per task");
    }

    #[test]
    fn ticks_split_the_run_and_the_total_keeps_everything() {
        let shards = Shards::new(4);
        let mut c = Collector::new(Instant::now());
        for i in 0..10 {
            let mut s = shards.get(i);
            s.counters.accepted += 1;
            s.record(Metric::Total, Duration::from_millis(5));
        }
        assert_eq!(c.tick(&shards).counters.accepted, 10);
        shards.get(1).counters.accepted += 3;
        let p = c.tick(&shards);
        assert_eq!(p.counters.accepted, 3);
        assert_eq!(c.total.counters.accepted, 13);
        assert_eq!(c.total.hist(Metric::Total).len(), 10);
        assert_eq!(c.series.len(), 2);
    }
}
