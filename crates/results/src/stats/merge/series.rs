//! The agents' series on one interval grid: points that end at the same time since the
//! shared start (`--start-at` + k × interval) are one point, their counters summed and
//! their histograms added, so every interval's rate and percentiles are recomputed from
//! the merged data rather than averaged. A point's rate and CPU share are weighted by its
//! span: a run's final sliver (a few ms, whose CPU share can be tens of %) adds what it
//! did in those ms to its interval, not its percentage as if it lasted the interval.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::stats::collector::SERIES_HISTS;
use crate::stats::hist::{decode, encode, ms};
use crate::stats::recorder::{add_hist, new_histogram};
use crate::stats::{Counters, IntervalPoint, RelayPoint, Results, SutPoint};

/// A share of an interval by which a point's end may miss the grid and still be on it
/// (timer wake-up, a late tick); a run's final sliver past a grid line is a point of its own.
const ON_GRID: f64 = 0.25;

/// The points of one grid interval, gathered before their histograms are decoded: each
/// interval's histograms are decoded, added and encoded again in turn, so that memory
/// holds one interval's at a time (an HDR histogram takes ~100 KiB in memory, and a
/// one-hour run has 3,600 intervals).
#[derive(Default)]
struct Cell<'a> {
    t_s: f64,
    /// What each file's points in this interval did, by file.
    shares: BTreeMap<usize, Share>,
    counters: Counters,
    /// (file, its point's time, metric, encoded histogram).
    hists: Vec<(&'a str, f64, &'a str, &'a str)>,
    /// The store's reading in this interval, from the agent that watched it, with the
    /// span of its point (a sliver's reading gives way to a whole interval's).
    sut: Option<(f64, SutPoint)>,
}

/// One file's points in one grid interval: the seconds they span, and their rate and CPU
/// share each multiplied by its point's span (what a weighted average is made of).
#[derive(Default)]
struct Share {
    span_s: f64,
    msgs: f64,
    cpu_pct_s: f64,
}

/// The merged series of `runs`, time zero at `t0_us` (µs since the Unix epoch), on a grid
/// of `interval_s`; each interval's store reading is `watcher`'s (the index of the run
/// that watched the store), its network bytes left out: those were counted at that
/// agent's clients only (the run's are the summed counters). The error names a histogram
/// that does not decode.
pub fn merge(
    runs: &[(&str, &Results)],
    t0_us: u64,
    interval_s: f64,
    watcher: Option<usize>,
) -> Result<Vec<IntervalPoint>, String> {
    let interval_s = interval_s.max(1e-3);
    let mut cells: BTreeMap<u64, Cell> = BTreeMap::new();
    for (file, (name, r)) in runs.iter().enumerate() {
        let offset_s = r.started_at_us.saturating_sub(t0_us) as f64 / 1e6;
        for p in &r.series {
            let end_s = offset_s + p.t_s;
            let k = (end_s / interval_s - ON_GRID).ceil().max(1.0) as u64;
            let c = cells.entry(k).or_default();
            c.t_s = c.t_s.max(end_s);
            let share = c.shares.entry(file).or_default();
            share.span_s += p.dt_s;
            share.msgs += p.msgs_per_sec * p.dt_s;
            share.cpu_pct_s += p.cpu_pct * p.dt_s;
            c.counters.add(&p.counters);
            if Some(file) == watcher
                && let Some(sut) = &p.relay.sut
                && c.sut.as_ref().is_none_or(|(dt, _)| *dt < p.dt_s)
            {
                let sut = SutPoint {
                    net_in_bytes_s: None,
                    net_out_bytes_s: None,
                    ..sut.clone()
                };
                c.sut = Some((p.dt_s, sut));
            }
            c.hists.extend(
                p.hists
                    .iter()
                    .map(|(metric, text)| (*name, p.t_s, metric.as_str(), text.as_str())),
            );
        }
    }
    cells.into_values().map(|c| point(c, interval_s)).collect()
}

/// One merged point, its figures recomputed from its sums and added histograms. Its span
/// is the longest any file's points in it cover. Its rate and CPU share are the files'
/// summed (agents run side by side), each file's averaged over its points' span — or,
/// when that is shorter, over the interval (at most the point's span): a sliver some
/// ms long adds what it did in those ms, not its percentage as if it lasted the interval.
fn point(c: Cell, interval_s: f64) -> Result<IntervalPoint, String> {
    let mut hists: BTreeMap<&str, Histogram<u64>> = BTreeMap::new();
    for (name, t_s, metric, text) in &c.hists {
        let h = decode(text).map_err(|e| format!("{name}: series at {t_s:.1} s: {e}"))?;
        add_hist(hists.entry(metric).or_insert_with(new_histogram), &h);
    }
    let empty = new_histogram();
    let hist = |name: &str| hists.get(name).unwrap_or(&empty);
    let dt_s = c.shares.values().map(|s| s.span_s).fold(0.0, f64::max);
    let floor = dt_s.min(interval_s).max(1e-9);
    let sum = |f: fn(&Share) -> f64| -> f64 {
        c.shares.values().map(|s| f(s) / s.span_s.max(floor)).sum()
    };
    Ok(IntervalPoint {
        t_s: c.t_s,
        dt_s,
        msgs_per_sec: sum(|s| s.msgs),
        p50_ms: ms(hist("total"), 0.5),
        p99_ms: ms(hist("total"), 0.99),
        lag_p99_ms: ms(hist("lag"), 0.99),
        e2e_p99_ms: (!hist("e2e").is_empty()).then(|| ms(hist("e2e"), 0.99)),
        cpu_pct: sum(|s| s.cpu_pct_s),
        hists: SERIES_HISTS
            .iter()
            .filter_map(|(name, _)| hists.get(name).map(|h| (name.to_string(), encode(h))))
            .collect(),
        counters: c.counters,
        relay: RelayPoint {
            sut: c.sut.map(|(_, sut)| sut),
            ..Default::default()
        },
    })
}
