//! Watching the system under test while a run goes: its process tree's CPU, disk, memory
//! and process count read from /proc once per interval (and the first number a queue
//! command prints, the queue device's operations and busy time, and the load average),
//! turned into per-interval rates for the series and a whole-run report. The relay watches its MTA with it, the mailbox workloads their store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::alarm::Ticker;
use crate::stats::host::{self, Device, DiskCounters};
use crate::stats::sut::{self, NetBytes, Sample};
use crate::stats::{IntervalPoint, SutPoint};

/// The processes to watch, found anew at every reading (servers start and end workers).
pub type Pids = Arc<dyn Fn() -> Vec<u32> + Send + Sync>;

/// The bytes the run's clients moved to and from the store so far, read with the tree
/// (a counter the clients keep: loopback has no per-process byte count).
pub type NetRead = Arc<dyn Fn() -> NetBytes + Send + Sync>;

/// The tree's totals now, with the clients' byte count when there is one.
pub fn read_store(pids: &Pids, net: Option<&NetRead>) -> Sample {
    Sample {
        net: net.map(|f| f()),
        ..sut::sample(&pids())
    }
}

/// One reading: the tree's totals, the queue command's value, the device's counters and
/// the load average.
struct Reading {
    sut: Sample,
    queue: Option<f64>,
    disk: Option<DiskCounters>,
    load1: Option<f64>,
    /// Seconds from the start when the totals were read: rates divide by the time between
    /// readings, which drifts from the series' intervals when a reading is late.
    t_s: f64,
}

/// A sampler running beside a run.
pub struct Sampler {
    pids: Pids,
    net: Option<NetRead>,
    device: Option<Device>,
    first: Sample,
    first_disk: Option<DiskCounters>,
    first_t: f64,
    stop: CancellationToken,
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

/// What a sampler saw.
pub struct Observed {
    device: Option<Device>,
    first: Sample,
    first_disk: Option<DiskCounters>,
    first_t: f64,
    readings: Vec<Reading>,
    last: Sample,
    last_disk: Option<DiskCounters>,
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
        let first = read_store(&pids, net.as_ref());
        let first_disk = device.as_ref().and_then(Device::read);
        let first_t = start.elapsed().as_secs_f64();
        let stop = CancellationToken::new();
        let latest = LatestCpu::default();
        let task = tokio::spawn(sample_loop(
            (pids.clone(), net.clone()),
            queue_cmd,
            device.clone(),
            interval,
            (start, first, first_t),
            stop.clone(),
            latest.clone(),
        ));
        Sampler {
            pids,
            net,
            device,
            first,
            first_disk,
            first_t,
            stop,
            task,
            latest,
        }
    }

    /// The system's CPU over its last interval, as it is read.
    pub fn latest_cpu(&self) -> LatestCpu {
        self.latest.clone()
    }

    /// Reads the tree a last time and stops.
    pub async fn finish(self) -> Observed {
        let last = read_store(&self.pids, self.net.as_ref());
        let last_disk = self.device.as_ref().and_then(Device::read);
        self.stop.cancel();
        let readings = self.task.await.unwrap_or_default();
        Observed {
            device: self.device,
            first: self.first,
            first_disk: self.first_disk,
            first_t: self.first_t,
            readings,
            last,
            last_disk,
        }
    }
}

impl Observed {
    /// Interval readings taken.
    pub fn len(&self) -> usize {
        self.readings.len()
    }

    /// True when no interval reading was taken.
    pub fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }

    /// Puts the system's rates (and the queue value) into the series, interval by
    /// interval: point `i` gets what was used between reading `i - 1` and reading `i`.
    pub fn fill(&self, series: &mut [IntervalPoint]) {
        for (i, p) in series.iter_mut().enumerate() {
            let Some(rd) = self.readings.get(i) else {
                break;
            };
            let (prev, prev_disk, prev_t) = if i == 0 {
                (&self.first, self.first_disk, self.first_t)
            } else {
                let r = &self.readings[i - 1];
                (&r.sut, r.disk, r.t_s)
            };
            let dt = rd.t_s - prev_t;
            let mut point = rd.sut.rates_since(prev, dt);
            if let (Some(now), Some(then)) = (rd.disk, prev_disk) {
                let d = now.rates_since(&then, dt);
                point.device_read_iops = Some(d.read_iops);
                point.device_write_iops = Some(d.write_iops);
                point.device_util_pct = Some(d.util_pct);
            }
            point.load1 = rd.load1;
            p.relay.sut = Some(point);
            p.relay.queue = rd.queue;
        }
    }

    /// The whole run's report (`extra.sut` in the results): totals and averages over
    /// `wall` seconds, and the peaks of the intervals in `series`.
    pub fn report(&self, series: &[IntervalPoint], wall: f64) -> serde_json::Value {
        let (a, b) = (&self.first, &self.last);
        let wall = wall.max(1e-9);
        let peak = |f: fn(&SutPoint) -> f64| {
            series
                .iter()
                .filter_map(|p| p.relay.sut.as_ref())
                .map(f)
                .fold(0.0, f64::max)
        };
        let rss = self
            .readings
            .iter()
            .map(|r| r.sut.rss_kib)
            .fold(b.rss_kib.max(a.rss_kib), u64::max);
        let procs = self
            .readings
            .iter()
            .map(|r| r.sut.procs)
            .fold(b.procs.max(a.procs), u64::max);
        let cpu_s = (b.user_s + b.sys_s) - (a.user_s + a.sys_s);
        let shared = self
            .readings
            .iter()
            .map(|r| r.sut.shared_kib)
            .fold(b.shared_kib.max(a.shared_kib), u64::max);
        // Memory per process: all readings' resident KiB over all their processes.
        let (kib, n) = self
            .readings
            .iter()
            .map(|r| &r.sut)
            .chain([b])
            .fold((0u64, 0u64), |(k, n), s| (k + s.rss_kib, n + s.procs));
        let per_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / wall;
        let mut report = serde_json::json!({
            "cpu_peak_pct": peak(|s| s.cpu_user_pct + s.cpu_sys_pct),
            "disk_read_peak_kib_per_s": peak(|s| s.read_kib_s),
            "disk_write_peak_kib_per_s": peak(|s| s.write_kib_s),
            "cpu_user_s": b.user_s - a.user_s,
            "cpu_sys_s": b.sys_s - a.sys_s,
            "cpu_avg_pct": cpu_s / wall * 100.0,
            "disk_read_kib_per_s": b.read_bytes.saturating_sub(a.read_bytes) as f64 / 1024.0 / wall,
            "disk_write_kib_per_s": b.write_bytes.saturating_sub(a.write_bytes) as f64 / 1024.0 / wall,
            "peak_rss_kib": rss,
            "peak_procs": procs,
            "peak_shared_kib": shared,
            "rss_per_proc_kib": if n > 0 { kib as f64 / n as f64 } else { 0.0 },
            "disk_read_calls_per_s": per_s(b.read_calls, a.read_calls),
            "disk_write_calls_per_s": per_s(b.write_calls, a.write_calls),
            "major_faults_per_s": per_s(b.major_faults, a.major_faults),
        });
        let peak_of = |f: fn(&SutPoint) -> Option<f64>| {
            series
                .iter()
                .filter_map(|p| p.relay.sut.as_ref().and_then(f))
                .reduce(f64::max)
        };
        if let (Some(a), Some(b)) = (a.net, b.net) {
            let into = b.into_store.saturating_sub(a.into_store);
            let out = b.out_of_store.saturating_sub(a.out_of_store);
            report["net_in_bytes"] = into.into();
            report["net_out_bytes"] = out.into();
            report["net_in_bytes_per_s"] = (into as f64 / wall).into();
            report["net_out_bytes_per_s"] = (out as f64 / wall).into();
        }
        if let Some(load) = peak_of(|s| s.load1) {
            report["load1_peak"] = load.into();
        }
        if let (Some(dev), Some(a), Some(b)) = (&self.device, self.first_disk, self.last_disk) {
            let d = b.rates_since(&a, wall);
            report["queue_device"] = dev.name.clone().into();
            report["device_read_iops"] = d.read_iops.into();
            report["device_write_iops"] = d.write_iops.into();
            report["device_util_pct"] = d.util_pct.into();
            report["device_util_peak_pct"] = peak_of(|s| s.device_util_pct).unwrap_or(0.0).into();
        }
        report
    }
}

/// Reads the tree (and the queue command) once per interval from `start` (where the tree
/// read `first` at `first_t`), until `stop`, keeping the last interval's CPU in `latest`.
async fn sample_loop(
    (pids, net): (Pids, Option<NetRead>),
    queue_cmd: Option<String>,
    device: Option<Device>,
    interval: Duration,
    (start, first, first_t): (Instant, Sample, f64),
    stop: CancellationToken,
    latest: LatestCpu,
) -> Vec<Reading> {
    let mut out = Vec::new();
    // On the alarm thread: no tokio timer beside the load's waits (see `crate::alarm`).
    let mut ticker = Ticker::new(start + interval, interval);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return out,
        }
        let (p, n, dev) = (pids.clone(), net.clone(), device.clone());
        let (sut, disk, load1) = tokio::task::spawn_blocking(move || {
            (
                read_store(&p, n.as_ref()),
                dev.as_ref().and_then(Device::read),
                host::load1(),
            )
        })
        .await
        .unwrap_or_default();
        let t_s = start.elapsed().as_secs_f64();
        let queue = match &queue_cmd {
            Some(cmd) => queue_value(cmd).await,
            None => None,
        };
        let (prev, prev_t) = out
            .last()
            .map_or((&first, first_t), |r: &Reading| (&r.sut, r.t_s));
        let rates = sut.rates_since(prev, t_s - prev_t);
        latest.set(rates.cpu_user_pct + rates.cpu_sys_pct);
        out.push(Reading {
            sut,
            queue,
            disk,
            load1,
            t_s,
        });
    }
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

#[cfg(test)]
mod tests {
    use super::{NetBytes, Observed, Reading, Sample, first_number};

    #[test]
    fn seed_001s_resource_figures_come_from_the_first_and_last_readings() {
        let at = |rss_kib, procs, shared_kib, calls: u64, faults| Sample {
            rss_kib,
            procs,
            shared_kib,
            read_calls: calls,
            write_calls: calls / 2,
            major_faults: faults,
            net: Some(NetBytes {
                into_store: calls / 10,
                out_of_store: calls,
            }),
            ..Sample::default()
        };
        let o = Observed {
            device: None,
            first: at(100, 1, 10, 1_000, 5),
            first_disk: None,
            first_t: 0.0,
            readings: vec![Reading {
                sut: at(900, 3, 70, 2_000, 6),
                queue: None,
                disk: None,
                load1: None,
                t_s: 1.0,
            }],
            last: at(300, 1, 40, 5_000, 25),
            last_disk: None,
        };
        let r = o.report(&[], 2.0);
        assert_eq!(r["disk_read_calls_per_s"], 2_000.0, "4,000 calls in 2 s");
        assert_eq!(r["disk_write_calls_per_s"], 1_000.0);
        assert_eq!(r["major_faults_per_s"], 10.0, "20 faults in 2 s");
        assert_eq!(r["peak_shared_kib"], 70);
        assert_eq!(r["net_in_bytes"], 400, "the clients wrote 500 - 100 bytes");
        assert_eq!(r["net_out_bytes"], 4_000);
        assert_eq!(r["net_in_bytes_per_s"], 200.0);
        assert_eq!(r["net_out_bytes_per_s"], 2_000.0);
        assert_eq!(r["peak_rss_kib"], 900);
        assert_eq!(
            r["rss_per_proc_kib"], 300.0,
            "(900 + 300) KiB over 3 + 1 processes"
        );
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
