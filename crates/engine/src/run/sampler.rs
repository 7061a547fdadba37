//! Watching the system under test while a run goes: its process tree's CPU, disk, memory
//! and process count read from /proc once per interval (and the first number a queue
//! command prints, the queue device's operations and busy time, and the load average),
//! put on the run's series by time and summed into a whole-run report. The relay watches
//! its MTA with it, the mailbox workloads their store.
//!
//! The readings are cumulative counters at known instants (the first when the watch
//! starts, the last when it ends). A series point gets what the counters grew by over its
//! own span, read off the line between the readings around its ends, over that span: its
//! rates are never a reading's work over some other stretch of time, the points' shares
//! add up to the totals, and no point's rate is above the busiest stretch between two
//! readings. Averages are over the time the watch lasted, the same span the totals cover.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::alarm::Ticker;
use crate::stats::host::{self, Device, DiskCounters};
use crate::stats::series::MIN_SHARE;
use crate::stats::sut::{self, NetBytes, Sample};
use crate::stats::sut_cgroup::Cgroup;
use crate::stats::sut_names::{ByName, NameCount};
use crate::stats::{IntervalPoint, SutPoint};

/// The processes to watch, found anew at every reading (servers start and end workers).
pub type Pids = Arc<dyn Fn() -> Vec<u32> + Send + Sync>;

/// The bytes the run's clients moved to and from the store so far, read with the tree
/// (a counter the clients keep: loopback has no per-process byte count).
pub type NetRead = Arc<dyn Fn() -> NetBytes + Send + Sync>;

/// The share of the watch's time the proportional set size may cost: reading it walks
/// every process's page tables (some 100 µs each, 30 ms for a Postfix of 110 processes),
/// so with many processes it is read at fewer readings than the rest.
const PSS_BUDGET: f64 = 0.02;

/// The tree's totals now, with the clients' byte count when there is one.
pub fn read_store(pids: &Pids, net: Option<&NetRead>) -> Sample {
    with_net(sut::sample_at(&pids(), false, None).0, net)
}

/// Where a sampler keeps its counts by process name from one reading to the next.
type Names = Arc<Mutex<ByName>>;

/// The tree's totals now, with the proportional set size when `pss` and the CPU of what
/// is in `cg` from it, the instant they were read, and the counts by process name since
/// the first reading (taken into `names`).
fn read_tree(
    pids: &Pids,
    net: Option<&NetRead>,
    pss: bool,
    cg: Option<&Cgroup>,
    names: &Names,
) -> (Sample, Instant, BTreeMap<String, NameCount>) {
    let (sample, at, procs) = sut::sample_at(&pids(), pss, cg);
    let by_name = names
        .lock()
        .map(|mut n| n.update(procs))
        .unwrap_or_default();
    (with_net(sample, net), at, by_name)
}

/// The sample with the clients' byte count read now, when there is one.
fn with_net(sample: Sample, net: Option<&NetRead>) -> Sample {
    Sample {
        net: net.map(|f| f()),
        ..sample
    }
}

/// One reading: the tree's totals, the queue command's value, the device's counters and
/// the load average.
#[derive(Debug, Clone, Default)]
struct Reading {
    sut: Sample,
    queue: Option<f64>,
    disk: Option<DiskCounters>,
    load1: Option<f64>,
    /// Seconds from the sampler's clock zero when the totals were read.
    t_s: f64,
    /// The counts by process name: CPU since the first reading, memory and processes now.
    names: BTreeMap<String, NameCount>,
}

/// A sampler running beside a run.
pub struct Sampler {
    pids: Pids,
    net: Option<NetRead>,
    device: Option<Device>,
    interval: Duration,
    start: Instant,
    /// The wall clock at `start`, µs since the Unix epoch: where a series' time zero is.
    origin_us: u64,
    /// Where the CPU of what mailbench started is counted, when it can be.
    cg: Option<Arc<Cgroup>>,
    names: Names,
    first: Reading,
    stop: CancellationToken,
    /// Asks for a reading now, besides the interval's.
    now: Arc<tokio::sync::Notify>,
    task: JoinHandle<Vec<Reading>>,
    latest: LatestCpu,
}

/// The system's CPU over its last interval (user + system, % of one core), for the live
/// panel and `/metrics`; empty until the first interval's reading.
#[derive(Clone, Default)]
pub struct LatestCpu(Arc<AtomicU64>);

impl LatestCpu {
    /// The last interval's CPU, if one was read.
    pub fn get(&self) -> Option<f64> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    fn set(&self, pct: f64) {
        // 0.0's bits are 0, which means "not read yet": store the smallest positive instead.
        self.0
            .store(pct.max(f64::MIN_POSITIVE).to_bits(), Ordering::Relaxed);
    }
}

/// What a sampler saw: every reading from the first to the last, and the counters grown
/// since the first at each.
pub struct Observed {
    device: Option<Device>,
    /// Whether the CPU of what mailbench started was the kernel's count in a cgroup.
    in_cgroup: bool,
    origin_us: u64,
    interval_s: f64,
    readings: Vec<Reading>,
    grown: Vec<Grown>,
    /// The CPUs the watched processes can use at most: no point shows more.
    cores: f64,
}

/// The counters grown since the first reading, at one reading. A count that went down (a
/// process that left the tree took its count with it) is not taken back: what was seen
/// used stays used, and what the others use afterwards counts from there.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Grown {
    cpu_s: f64,
    sys_s: f64,
    read_bytes: f64,
    write_bytes: f64,
    read_calls: f64,
    write_calls: f64,
    faults: f64,
    net_in: f64,
    net_out: f64,
    dev_reads: f64,
    dev_writes: f64,
    dev_busy_ms: f64,
}

impl Grown {
    /// `self` plus what grew from reading `a` to reading `b`.
    fn after(&self, a: &Reading, b: &Reading) -> Grown {
        let up = |now: f64, then: f64| (now - then).max(0.0);
        let upc = |now: u64, then: u64| now.saturating_sub(then) as f64;
        let cpu = up(b.sut.cpu_s(), a.sut.cpu_s());
        let (net_in, net_out) = match (a.sut.net, b.sut.net) {
            (Some(x), Some(y)) => (
                upc(y.into_store, x.into_store),
                upc(y.out_of_store, x.out_of_store),
            ),
            _ => (0.0, 0.0),
        };
        let (r, w, busy) = match (a.disk, b.disk) {
            (Some(x), Some(y)) => (
                upc(y.reads, x.reads),
                upc(y.writes, x.writes),
                upc(y.busy_ms, x.busy_ms),
            ),
            _ => (0.0, 0.0, 0.0),
        };
        Grown {
            cpu_s: self.cpu_s + cpu,
            // The kernel's user/system split of a process moves by a tick as it rounds:
            // system is at most all the CPU that grew, user the rest.
            sys_s: self.sys_s + (b.sut.sys_s - a.sut.sys_s).clamp(0.0, cpu),
            read_bytes: self.read_bytes + upc(b.sut.read_bytes, a.sut.read_bytes),
            write_bytes: self.write_bytes + upc(b.sut.write_bytes, a.sut.write_bytes),
            read_calls: self.read_calls + upc(b.sut.read_calls, a.sut.read_calls),
            write_calls: self.write_calls + upc(b.sut.write_calls, a.sut.write_calls),
            faults: self.faults + upc(b.sut.major_faults, a.sut.major_faults),
            net_in: self.net_in + net_in,
            net_out: self.net_out + net_out,
            dev_reads: self.dev_reads + r,
            dev_writes: self.dev_writes + w,
            dev_busy_ms: self.dev_busy_ms + busy,
        }
    }

    /// The point `w` of the way from `self` to `b` (0 ≤ w ≤ 1).
    fn towards(&self, b: &Grown, w: f64) -> Grown {
        let m = |x: f64, y: f64| x + (y - x) * w;
        Grown {
            cpu_s: m(self.cpu_s, b.cpu_s),
            sys_s: m(self.sys_s, b.sys_s),
            read_bytes: m(self.read_bytes, b.read_bytes),
            write_bytes: m(self.write_bytes, b.write_bytes),
            read_calls: m(self.read_calls, b.read_calls),
            write_calls: m(self.write_calls, b.write_calls),
            faults: m(self.faults, b.faults),
            net_in: m(self.net_in, b.net_in),
            net_out: m(self.net_out, b.net_out),
            dev_reads: m(self.dev_reads, b.dev_reads),
            dev_writes: m(self.dev_writes, b.dev_writes),
            dev_busy_ms: m(self.dev_busy_ms, b.dev_busy_ms),
        }
    }
}

impl Sampler {
    /// Reads the tree (and `device` and the clients' byte count `net`, when given) now,
    /// then once per `interval` from `start`.
    pub fn start(
        pids: Pids,
        net: Option<NetRead>,
        queue_cmd: Option<String>,
        device: Option<Device>,
        interval: Duration,
        start: Instant,
    ) -> Sampler {
        // A cgroup only for a tree there is (nothing watched: nothing made).
        let cg = (!pids().is_empty())
            .then(Cgroup::new)
            .flatten()
            .map(Arc::new);
        let names = Names::default();
        let (sut, at, by_name) = read_tree(&pids, net.as_ref(), true, cg.as_deref(), &names);
        let first = Reading {
            sut,
            disk: device.as_ref().and_then(Device::read),
            load1: host::load1(),
            queue: None,
            t_s: since(start, at),
            names: by_name,
        };
        let origin_us =
            crate::stats::clock::unix_us().saturating_sub(start.elapsed().as_micros() as u64);
        let (stop, now) = (
            CancellationToken::new(),
            Arc::new(tokio::sync::Notify::new()),
        );
        let latest = LatestCpu::default();
        let task = tokio::spawn(sample_loop(
            (pids.clone(), net.clone(), cg.clone(), names.clone()),
            queue_cmd,
            device.clone(),
            interval,
            (start, first.clone()),
            (stop.clone(), now.clone()),
            latest.clone(),
        ));
        Sampler {
            pids,
            net,
            device,
            interval,
            start,
            origin_us,
            cg,
            names,
            first,
            stop,
            now,
            task,
            latest,
        }
    }

    /// Takes a reading now, besides the interval's: where the run changes pace between
    /// two ticks (the injection's end), so that the points on either side of it are
    /// each read over their own span rather than the line across the two.
    pub fn read_now(&self) {
        self.now.notify_one();
    }

    /// The system's CPU over its last interval, as it is read.
    pub fn latest_cpu(&self) -> LatestCpu {
        self.latest.clone()
    }

    /// Reads the tree a last time and stops.
    pub async fn finish(self) -> Observed {
        let (pids, net, device) = (self.pids.clone(), self.net.clone(), self.device.clone());
        let (start, cg, names) = (self.start, self.cg.clone(), self.names.clone());
        // The loop stops first: the last reading is the last the counts by name take in.
        self.stop.cancel();
        let ticks = self.task.await.unwrap_or_default();
        let last = tokio::task::spawn_blocking(move || {
            let (sut, at, by_name) = read_tree(&pids, net.as_ref(), true, cg.as_deref(), &names);
            Reading {
                sut,
                disk: device.as_ref().and_then(Device::read),
                load1: host::load1(),
                queue: None,
                t_s: since(start, at),
                names: by_name,
            }
        })
        .await
        .unwrap_or_else(|_| Reading {
            t_s: start.elapsed().as_secs_f64(),
            ..Reading::default()
        });
        // The processes go back to mailbench's cgroup, and the watch's is removed.
        let in_cgroup = self.cg.is_some();
        if let Some(cg) = self.cg {
            let _ = tokio::task::spawn_blocking(move || drop(cg)).await;
        }
        let interval_s = self.interval.as_secs_f64();
        let mut readings = vec![self.first];
        readings.extend(ticks);
        readings.push(last);
        let mut o = Observed::new(self.device, self.origin_us, interval_s, readings);
        o.in_cgroup = in_cgroup;
        o
    }
}

impl Observed {
    fn new(
        device: Option<Device>,
        origin_us: u64,
        interval_s: f64,
        readings: Vec<Reading>,
    ) -> Observed {
        let mut grown = Vec::with_capacity(readings.len());
        let mut g = Grown::default();
        for (i, r) in readings.iter().enumerate() {
            if i > 0 {
                g = g.after(&readings[i - 1], r);
            }
            grown.push(g);
        }
        Observed {
            device,
            in_cgroup: false,
            origin_us,
            interval_s,
            readings,
            grown,
            cores: crate::stats::cpu::online_cpus() as f64,
        }
    }

    /// Where the CPU figures come from: `cgroup` (the kernel's count of the processes
    /// mailbench started, in a cgroup of its own), `proc` (`/proc`'s, per process), or
    /// `cgroup+proc` (some processes each way).
    fn cpu_from(&self) -> &'static str {
        let r = || self.readings.iter().filter(|r| r.sut.procs > 0);
        let some = r().any(|r| r.sut.cgroup_procs > 0);
        let all = r().all(|r| r.sut.cgroup_procs >= r.sut.procs);
        match (self.in_cgroup && some, all) {
            (false, _) => "proc",
            (true, true) => "cgroup",
            (true, false) => "cgroup+proc",
        }
    }

    /// The first and last readings' times: the span watched.
    fn span(&self) -> (f64, f64) {
        let t = |r: Option<&Reading>| r.map_or(0.0, |r| r.t_s);
        (t(self.readings.first()), t(self.readings.last()))
    }

    /// The counters grown by time `t` (on the sampler's clock), on the line between the
    /// readings around it.
    fn grown_at(&self, t: f64) -> Grown {
        let i = self.readings.partition_point(|r| r.t_s < t);
        if i == 0 {
            return self.grown.first().copied().unwrap_or_default();
        }
        if i >= self.readings.len() {
            return self.grown.last().copied().unwrap_or_default();
        }
        let (a, b) = (&self.readings[i - 1], &self.readings[i]);
        let w = ((t - a.t_s) / (b.t_s - a.t_s).max(1e-9)).clamp(0.0, 1.0);
        self.grown[i - 1].towards(&self.grown[i], w)
    }

    /// The CPU seconds of each process name by time `t` (sampler's clock), on the line
    /// between the readings around it, as [`Observed::grown_at`] reads the tree's.
    fn names_at(&self, t: f64) -> BTreeMap<&str, f64> {
        fn cpu(r: &Reading) -> BTreeMap<&str, f64> {
            r.names.iter().map(|(n, c)| (n.as_str(), c.cpu_s)).collect()
        }
        let i = self.readings.partition_point(|r| r.t_s < t);
        let (a, b) = match (i.checked_sub(1), self.readings.get(i)) {
            (Some(h), Some(b)) => (&self.readings[h], b),
            (None, r) => return r.map(cpu).unwrap_or_default(),
            (Some(_), None) => return self.readings.last().map(cpu).unwrap_or_default(),
        };
        let w = ((t - a.t_s) / (b.t_s - a.t_s).max(1e-9)).clamp(0.0, 1.0);
        let (ca, cb) = (cpu(a), cpu(b));
        cb.iter()
            .map(|(n, y)| {
                let x = ca.get(n).copied().unwrap_or(0.0);
                (*n, x + (y - x) * w)
            })
            .collect()
    }

    /// The reading that ends the span `(from, to]` (sampler's clock): the last one taken
    /// in it, or a little after it (a reading's time is when its read ended), so that
    /// consecutive spans never share one.
    fn ending(&self, from: f64, to: f64) -> Option<&Reading> {
        let slack = self.interval_s * MIN_SHARE;
        self.readings
            .iter()
            .rev()
            .find(|r| r.t_s > from + slack && r.t_s <= to + slack)
    }

    /// Puts the system's rates into the series, whose time zero is `zero_us` (wall clock,
    /// µs since the Unix epoch): each point gets what the counters grew by over its span
    /// (the part of it that was watched) over that span, and the memory, processes, load
    /// and queue value of the reading that ended it. A point outside the watch gets none.
    pub fn fill(&self, series: &mut [IntervalPoint], zero_us: u64) {
        let (first, last) = self.span();
        let offset = (zero_us as f64 - self.origin_us as f64) / 1e6;
        let disk = self.readings.iter().all(|r| r.disk.is_some());
        let mut watched = vec![0.0; series.len()];
        for (p, watched) in series.iter_mut().zip(watched.iter_mut()) {
            let (from, to) = (p.t_s - p.dt_s + offset, p.t_s + offset);
            let (a, b) = (from.max(first), to.min(last));
            if b - a <= 1e-6 {
                p.relay.sut = None;
                p.relay.queue = None;
                continue;
            }
            *watched = b - a;
            let (ga, gb) = (self.grown_at(a), self.grown_at(b));
            let dt = b - a;
            let per_s = |x: f64, y: f64| (y - x) / dt;
            let end = self.ending(from, to);
            // Memory and processes are levels, not counts: the reading that ended the
            // point, or the one nearest its end when none did.
            let level = end.or_else(|| {
                self.readings
                    .iter()
                    .min_by(|x, y| (x.t_s - to).abs().total_cmp(&(y.t_s - to).abs()))
            });
            let cpu = per_s(ga.cpu_s, gb.cpu_s);
            let sys = per_s(ga.sys_s, gb.sys_s);
            let net = level.is_some_and(|r| r.sut.net.is_some());
            let mut point = SutPoint {
                cpu_user_pct: (cpu - sys) * 100.0,
                cpu_sys_pct: sys * 100.0,
                read_kib_s: per_s(ga.read_bytes, gb.read_bytes) / 1024.0,
                write_kib_s: per_s(ga.write_bytes, gb.write_bytes) / 1024.0,
                rss_kib: level.map_or(0, |r| r.sut.rss_kib),
                pss_kib: end.and_then(|r| r.sut.pss_kib),
                procs: level.map_or(0, |r| r.sut.procs),
                load1: level.and_then(|r| r.load1),
                read_calls_s: Some(per_s(ga.read_calls, gb.read_calls)),
                write_calls_s: Some(per_s(ga.write_calls, gb.write_calls)),
                major_faults_s: Some(per_s(ga.faults, gb.faults)),
                shared_kib: level.map(|r| r.sut.shared_kib),
                net_in_bytes_s: net.then(|| per_s(ga.net_in, gb.net_in)),
                net_out_bytes_s: net.then(|| per_s(ga.net_out, gb.net_out)),
                ..SutPoint::default()
            };
            let (na, nb) = (self.names_at(a), self.names_at(b));
            point.by_process = nb
                .iter()
                .map(|(n, y)| (n.to_string(), (y - na.get(n).unwrap_or(&0.0)) / dt * 100.0))
                .filter(|(_, pct)| *pct > 0.0)
                .collect();
            if disk {
                point.device_read_iops = Some(per_s(ga.dev_reads, gb.dev_reads));
                point.device_write_iops = Some(per_s(ga.dev_writes, gb.dev_writes));
                point.device_util_pct =
                    Some((per_s(ga.dev_busy_ms, gb.dev_busy_ms) / 10.0).min(100.0));
            }
            p.relay.sut = Some(point);
            p.relay.queue = end.and_then(|r| r.queue);
        }
        level_cpu(series, &watched, self.cores);
        for s in series.iter_mut().filter_map(|p| p.relay.sut.as_mut()) {
            let k = names_within(s.by_process.values().sum(), s.cpu_user_pct + s.cpu_sys_pct);
            s.by_process.values_mut().for_each(|pct| *pct *= k);
        }
    }

    /// The whole run's report (`extra.sut` in the results): totals from the first reading
    /// to the last, averages over that span (`watched_s`), and the peaks of the intervals
    /// in `series`.
    pub fn report(&self, series: &[IntervalPoint]) -> serde_json::Value {
        let (first, last) = self.span();
        let watched = (last - first).max(1e-9);
        let g = self.grown.last().copied().unwrap_or_default();
        let points = || series.iter().filter_map(|p| p.relay.sut.as_ref());
        let peak = |f: fn(&SutPoint) -> f64| points().map(f).fold(0.0, f64::max);
        let peak_of = |f: fn(&SutPoint) -> Option<f64>| points().filter_map(f).reduce(f64::max);
        let most = |f: fn(&Reading) -> u64| self.readings.iter().map(f).max().unwrap_or(0);
        // Memory per process: all readings' resident KiB over all their processes.
        let (kib, n) = self.readings.iter().fold((0u64, 0u64), |(k, n), r| {
            (k + r.sut.rss_kib, n + r.sut.procs)
        });
        let with_pss: Vec<&Reading> = self
            .readings
            .iter()
            .filter(|r| r.sut.pss_kib.is_some())
            .collect();
        let per_s = |v: f64| v / watched;
        let mut report = serde_json::json!({
            "watched_s": watched,
            "cpu_from": self.cpu_from(),
            "cpu_user_s": g.cpu_s - g.sys_s,
            "cpu_sys_s": g.sys_s,
            "cpu_avg_pct": per_s(g.cpu_s) * 100.0,
            "cpu_peak_pct": peak(|s| s.cpu_user_pct + s.cpu_sys_pct),
            "disk_read_kib": g.read_bytes / 1024.0,
            "disk_write_kib": g.write_bytes / 1024.0,
            "disk_read_kib_per_s": per_s(g.read_bytes) / 1024.0,
            "disk_write_kib_per_s": per_s(g.write_bytes) / 1024.0,
            "disk_read_peak_kib_per_s": peak(|s| s.read_kib_s),
            "disk_write_peak_kib_per_s": peak(|s| s.write_kib_s),
            "peak_rss_kib": most(|r| r.sut.rss_kib),
            "peak_procs": most(|r| r.sut.procs),
            "peak_shared_kib": most(|r| r.sut.shared_kib),
            "rss_per_proc_kib": if n > 0 { kib as f64 / n as f64 } else { 0.0 },
            "disk_read_calls_per_s": per_s(g.read_calls),
            "disk_write_calls_per_s": per_s(g.write_calls),
            "major_faults_per_s": per_s(g.faults),
        });
        if !with_pss.is_empty() {
            let pss = |r: &&Reading| r.sut.pss_kib.unwrap_or(0);
            let (kib, n) = with_pss
                .iter()
                .fold((0u64, 0u64), |(k, n), r| (k + pss(r), n + r.sut.procs));
            report["peak_pss_kib"] = with_pss.iter().map(pss).max().unwrap_or(0).into();
            report["pss_per_proc_kib"] = if n > 0 { kib as f64 / n as f64 } else { 0.0 }.into();
        }
        let ends = (self.readings.first(), self.readings.last());
        if let (Some(a), Some(b)) = ends
            && a.sut.net.is_some()
            && b.sut.net.is_some()
        {
            report["net_in_bytes"] = (g.net_in as u64).into();
            report["net_out_bytes"] = (g.net_out as u64).into();
            report["net_in_bytes_per_s"] = per_s(g.net_in).into();
            report["net_out_bytes_per_s"] = per_s(g.net_out).into();
        }
        let named: f64 = self
            .readings
            .last()
            .map_or(0.0, |r| r.names.values().map(|c| c.cpu_s).sum());
        let k = names_within(named, g.cpu_s);
        if let Some(by) = self.by_process(series, g.cpu_s, k) {
            report["by_process"] = by;
            report["cpu_unnamed_s"] = (g.cpu_s - named).max(0.0).into();
        }
        if let Some(load) = self
            .readings
            .iter()
            .filter_map(|r| r.load1)
            .reduce(f64::max)
        {
            report["load1_peak"] = load.into();
        }
        if let (Some(dev), true) = (&self.device, self.readings.iter().all(|r| r.disk.is_some())) {
            report["queue_device"] = dev.name.clone().into();
            report["device_read_iops"] = per_s(g.dev_reads).into();
            report["device_write_iops"] = per_s(g.dev_writes).into();
            report["device_util_pct"] = (per_s(g.dev_busy_ms) / 10.0).min(100.0).into();
            report["device_util_peak_pct"] = peak_of(|s| s.device_util_pct).unwrap_or(0.0).into();
        }
        report
    }
}

impl Observed {
    /// The CPU by process name over the watch (`extra.sut.by_process`), busiest first:
    /// each name's CPU seconds (user, system), its share of the tree's `total_s`, its
    /// busiest point in `series` (% of a core), its most memory and processes at a
    /// reading, and its context switches; `None` when no process was read. Each name's CPU is taken times `k`
    /// ([`names_within`]), so that the names never sum more than the tree.
    fn by_process(
        &self,
        series: &[IntervalPoint],
        total_s: f64,
        k: f64,
    ) -> Option<serde_json::Value> {
        let last = self.readings.last().filter(|r| !r.names.is_empty())?;
        let mut rows: Vec<(&String, NameCount)> = last
            .names
            .iter()
            .map(|(n, c)| {
                let c = NameCount {
                    cpu_s: c.cpu_s * k,
                    sys_s: c.sys_s * k,
                    ..*c
                };
                (n, c)
            })
            .collect();
        rows.sort_by(|x, y| y.1.cpu_s.total_cmp(&x.1.cpu_s).then(x.0.cmp(y.0)));
        let most = |name: &str, f: fn(&NameCount) -> u64| {
            self.readings
                .iter()
                .filter_map(|r| r.names.get(name).map(f))
                .max()
                .unwrap_or(0)
        };
        // A profile's series is its own, read without the names: no point holds them, and
        // a peak of 0 would read as an idle process (a newcomer's finding).
        let named_points = series.iter().any(|p| {
            p.relay
                .sut
                .as_ref()
                .is_some_and(|s| !s.by_process.is_empty())
        });
        let peak = |name: &str| {
            named_points.then(|| {
                series
                    .iter()
                    .filter_map(|p| p.relay.sut.as_ref()?.by_process.get(name).copied())
                    .fold(0.0, f64::max)
            })
        };
        let rows: Vec<serde_json::Value> = rows
            .into_iter()
            .map(|(name, c)| {
                serde_json::json!({
                    "name": name,
                    "cpu_s": c.cpu_s,
                    "cpu_user_s": c.cpu_s - c.sys_s,
                    "cpu_sys_s": c.sys_s,
                    "share_pct": if total_s > 0.0 { c.cpu_s / total_s * 100.0 } else { 0.0 },
                    "cpu_peak_pct": peak(name),
                    "peak_rss_kib": most(name, |c| c.rss_kib),
                    "peak_procs": most(name, |c| c.procs),
                    "vol_ctxt_switches": c.vol_cs,
                    "invol_ctxt_switches": c.invol_cs,
                })
            })
            .collect();
        Some(rows.into())
    }
}

/// Reads the tree (and the queue command) once per interval from `start` (where the tree
/// read `first`), and when asked (`now`), until `stop`, keeping the last interval's CPU in
/// `latest`. A tick that comes less than [`MIN_SHARE`] of an interval after the last
/// tick read (ticks missed while a reading was slow come at once) is let go; a reading
/// asked for never lets a tick go.
async fn sample_loop(
    (pids, net, cg, names): (Pids, Option<NetRead>, Option<Arc<Cgroup>>, Names),
    queue_cmd: Option<String>,
    device: Option<Device>,
    interval: Duration,
    (start, first): (Instant, Reading),
    (stop, now): (CancellationToken, Arc<tokio::sync::Notify>),
    latest: LatestCpu,
) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    // On the alarm thread: no tokio timer beside the load's waits (see `crate::alarm`).
    let mut ticker = Ticker::new(start + interval, interval);
    let min_gap = interval.as_secs_f64() * MIN_SHARE;
    // When the proportional set size was last read, and what reading it took.
    let (mut pss_at, mut pss_cost) = (first.t_s, 0.0);
    // When the last tick was read: a reading asked for between two ticks (the injection's
    // end) never stands in for the next tick's, which ends the next point.
    let mut last_tick = first.t_s;
    loop {
        let asked = tokio::select! {
            _ = ticker.tick() => false,
            _ = now.notified() => true,
            _ = stop.cancelled() => return out,
        };
        let at = start.elapsed().as_secs_f64();
        if !asked {
            if at - last_tick < min_gap {
                continue;
            }
            last_tick = at;
        }
        let pss = pss_cost <= PSS_BUDGET * (at - pss_at);
        let (p, n, dev, c) = (pids.clone(), net.clone(), device.clone(), cg.clone());
        let names = names.clone();
        let Ok(((sut, at, by_name), disk, load1)) = tokio::task::spawn_blocking(move || {
            (
                read_tree(&p, n.as_ref(), pss, c.as_deref(), &names),
                dev.as_ref().and_then(Device::read),
                host::load1(),
            )
        })
        .await
        else {
            continue;
        };
        let t_s = since(start, at);
        if pss {
            (pss_at, pss_cost) = (t_s, sut.pss_cost_s);
        }
        let queue = match &queue_cmd {
            Some(cmd) => queue_value(cmd).await,
            None => None,
        };
        let reading = Reading {
            sut,
            queue,
            disk,
            load1,
            t_s,
            names: by_name,
        };
        let prev = out.last().unwrap_or(&first);
        let grew = Grown::default().after(prev, &reading);
        latest.set(grew.cpu_s / (t_s - prev.t_s).max(1e-9) * 100.0);
        out.push(reading);
    }
}

/// What the names' CPU is taken times so that it sums no more than the tree's, `named`
/// and `tree` over the same span: 1 when it does not, else `tree / named`. The tree's
/// count is the truth (the kernel's count of the cgroup, or `/proc`'s); the names are
/// read process by process after it, so CPU used while a reading walked the processes
/// is in the names but not yet in the tree, and a process leaving the tree unreaped
/// (Sendmail's double-forked children, reparented away) drops the tree's `/proc` sum
/// and the others' growth meanwhile with it, never the names'. Either way the names'
/// excess is a reading's skew: they are scaled into the tree, which is kept exact, and
/// `(unnamed)`, the tree less the names, is never below 0.
fn names_within(named: f64, tree: f64) -> f64 {
    if named > tree && named > 0.0 {
        (tree / named).max(0.0)
    } else {
        1.0
    }
}

/// Seconds from `start` to `at` (0 for an instant before it).
fn since(start: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}

/// The first number a queue command prints.
pub async fn queue_value(cmd: &str) -> Option<f64> {
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

/// Gives back to the points before it the CPU a point shows beyond what `cores` can do in
/// its `watched` seconds. `/proc` shows CPU late: a process's reaped children only when
/// it reaps them, a process born since the last reading with all it used before it was
/// found; a point can so show more than the machine has (201 % on two cores), work done
/// in the points before it. The excess goes to the nearest earlier point with room (to
/// later ones when the first is full too), the user/system split kept, so the points
/// still add up to the run's total and none is above the machine.
fn level_cpu(series: &mut [IntervalPoint], watched: &[f64], cores: f64) {
    let secs = |p: &IntervalPoint, w: f64| {
        p.relay
            .sut
            .as_ref()
            .map_or(0.0, |s| (s.cpu_user_pct + s.cpu_sys_pct) / 100.0 * w)
    };
    let mut used: Vec<f64> = series
        .iter()
        .zip(watched)
        .map(|(p, w)| secs(p, *w))
        .collect();
    let room = |i: usize| cores * watched[i];
    let n = used.len();
    let mut spill = 0.0;
    for i in (0..n).rev().chain(0..n) {
        if series[i].relay.sut.is_none() {
            continue;
        }
        let have = used[i] + spill;
        used[i] = have.min(room(i));
        spill = have - used[i];
    }
    // Every point full (the readings disagree with the clock): the total is kept.
    if let Some(last) = (0..n).rev().find(|i| series[*i].relay.sut.is_some()) {
        used[last] += spill;
    }
    for (i, p) in series.iter_mut().enumerate() {
        let Some(s) = p.relay.sut.as_mut() else {
            continue;
        };
        let was = s.cpu_user_pct + s.cpu_sys_pct;
        let now = used[i] / watched[i].max(1e-9) * 100.0;
        if (now - was).abs() > 1e-9 {
            let sys = if was > 0.0 { s.cpu_sys_pct / was } else { 0.0 };
            s.cpu_sys_pct = now * sys;
            s.cpu_user_pct = now - s.cpu_sys_pct;
        }
    }
}

#[cfg(test)]
mod tests;
