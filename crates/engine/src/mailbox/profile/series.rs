//! A profile run's time series: one point per interval with the users running, the
//! actions that finished in it (per minute, their mean, 95th and 99th percentile, errors),
//! the actions due and not done at its end, and the store's CPU, disk, memory and network bytes over it
//! (read here, on the profile's own intervals, which end with the steps; absent when no
//! store process is watched). What `report` charts.

use std::time::Instant;

use crate::run::sampler::{NetRead, Pids, read_store};
use crate::stats::collector::ProfilePoint;
use crate::stats::cpu::CpuTimes;
use crate::stats::hist::ms;
use crate::stats::sut::Sample;
use crate::stats::{IntervalPoint, Metric, Recorder, RelayPoint, SutPoint};

/// The store's process tree, read at every interval's end.
pub struct StoreReader {
    pids: Pids,
    net: Option<NetRead>,
    last: Option<(Sample, Instant)>,
}

impl StoreReader {
    /// Reads the tree (and the clients' byte count `net`) now: the first interval's start.
    pub async fn start(pids: Pids, net: Option<NetRead>) -> StoreReader {
        let last = read(&pids, &net).await.map(|s| (s, Instant::now()));
        StoreReader { pids, net, last }
    }

    /// The tree's totals now; `None` when no process is watched (nothing observed).
    pub async fn sample(&self) -> Option<Sample> {
        read(&self.pids, &self.net).await
    }

    /// What the tree used since the previous call (or the start); `None` when it was not
    /// observed at both ends.
    pub async fn interval(&mut self) -> Option<SutPoint> {
        let now = read(&self.pids, &self.net)
            .await
            .map(|s| (s, Instant::now()));
        let point = match (&self.last, &now) {
            (Some((then, t0)), Some((s, t1))) => {
                Some(s.rates_since(then, t1.duration_since(*t0).as_secs_f64()))
            }
            _ => None,
        };
        self.last = now;
        point
    }
}

/// The tree's totals, read off the async threads; `None` when there is no process.
async fn read(pids: &Pids, net: &Option<NetRead>) -> Option<Sample> {
    let (pids, net) = (pids.clone(), net.clone());
    tokio::task::spawn_blocking(move || {
        let watched: Pids = {
            let p = pids();
            if p.is_empty() {
                return None;
            }
            std::sync::Arc::new(move || p.clone())
        };
        Some(read_store(&watched, net.as_ref()))
    })
    .await
    .ok()
    .flatten()
}

/// One interval: what finished in it (`rec`), the `overdue` actions at its end, and the
/// tool's and the store's use of the machine.
pub struct Interval<'a> {
    /// Seconds from the run's start to the interval's end.
    pub t_s: f64,
    /// Its length, s.
    pub dt_s: f64,
    /// Virtual users running.
    pub users: u64,
    /// The actions that finished in it.
    pub rec: &'a Recorder,
    /// Actions due and not done at its end.
    pub overdue: u64,
    /// mailbench's CPU over it.
    pub cpu: CpuTimes,
    /// The store over it.
    pub store: Option<SutPoint>,
}

impl Interval<'_> {
    /// The series point.
    pub fn point(&self) -> IntervalPoint {
        let dt = self.dt_s.max(1e-9);
        let all = self.rec.hist(super::metric(None));
        let c = &self.rec.counters;
        let mean_ms = (!all.is_empty()).then(|| all.mean() / 1000.0);
        IntervalPoint {
            t_s: self.t_s,
            dt_s: self.dt_s,
            counters: c.clone(),
            msgs_per_sec: c.accepted as f64 / dt,
            p50_ms: ms(all, 0.5),
            p99_ms: ms(all, 0.99),
            lag_p99_ms: ms(self.rec.hist(Metric::Lag), 0.99),
            e2e_p99_ms: None,
            cpu_pct: self.cpu.total().as_secs_f64() / dt * 100.0,
            hists: Default::default(),
            relay: RelayPoint {
                sut: self.store.clone(),
                profile: Some(ProfilePoint {
                    users: self.users,
                    actions_per_min: c.sent as f64 / dt * 60.0,
                    mean_ms,
                    p95_ms: mean_ms.map(|_| ms(all, 0.95)),
                    errors: c.errors + c.rejected,
                    overdue: self.overdue,
                }),
                ..RelayPoint::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_point_holds_what_finished_in_its_interval() {
        let mut rec = Recorder::new();
        // Below 2,048 µs the histogram is exact.
        for us in [100u64, 200, 300, 400] {
            rec.record(super::super::metric(None), Duration::from_micros(us));
        }
        rec.counters.sent = 5;
        rec.counters.accepted = 4;
        rec.counters.errors = 1;
        let iv = Interval {
            t_s: 3.0,
            dt_s: 0.5,
            users: 7,
            rec: &rec,
            overdue: 2,
            cpu: CpuTimes::default(),
            store: None,
        };
        let p = iv.point();
        let pp = p.relay.profile.expect("a profile point");
        assert_eq!(pp.users, 7);
        assert_eq!(pp.actions_per_min, 600.0, "5 actions in 0.5 s");
        assert_eq!(pp.mean_ms, Some(0.25));
        assert_eq!(pp.errors, 1);
        assert_eq!(pp.overdue, 2);
        assert_eq!(p.msgs_per_sec, 8.0, "4 completed in 0.5 s");
        assert!(p.relay.sut.is_none(), "no store watched: absent, not 0");
        let empty = Recorder::new();
        let none = Interval { rec: &empty, ..iv }.point();
        assert_eq!(
            none.relay.profile.and_then(|p| p.mean_ms),
            None,
            "no action finished: no mean"
        );
    }
}
