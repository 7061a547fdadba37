//! The report's charts as data: each chart is a uPlot table (`[x, y1, y2, …]`) with its
//! labels, made here from the results files alone so that the page's script only draws.
//! Several runs overlay on one x axis: their points are joined on the union of their x
//! values, with gaps where a run has none.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::stats::collector::IntervalPoint;
use crate::stats::results::Results;

/// Longest series drawn per run; longer runs are merged into buckets of consecutive
/// intervals (latency and gauges keep the bucket's highest value, rates its mean).
pub const MAX_POINTS: usize = 4000;

/// Points on a percentile-distribution curve (x = 1/(1−q) from 1 to 100,000, log-spaced,
/// 30 per decade so that 90 %, 99 % … fall on points).
const PCT_POINTS: usize = 151;

/// What the x axis is, so that the page labels it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum XAxis {
    /// Seconds since the start of the run.
    Time,
    /// 1/(1−q) on a log scale, labelled as percentiles.
    Percentile,
    /// A plain number named by `x_label`.
    Linear,
}

/// One chart, ready for uPlot.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// Stable id (tests and links find a chart by it).
    pub id: String,
    /// Title above the chart.
    pub title: String,
    /// Unit of the y axis.
    pub unit: String,
    /// Kind of x axis.
    pub x: XAxis,
    /// Name of the x axis.
    pub x_label: String,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// One label per y column.
    pub series: Vec<String>,
    /// `[x, y1, y2, …]`, each the same length; `None` is a gap.
    pub data: Vec<Vec<Option<f64>>>,
    /// Spans of x drawn shaded, `[from, to]`: a profile's settles (`--settle`), the part
    /// of each step kept out of its figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shaded: Vec<[f64; 2]>,
    /// The lines are drawn stacked, each a band on the ones before it (the server's CPU
    /// by process name); the data keep each line's own values.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stacked: bool,
}

/// How a bucket of intervals becomes one point when a long run is thinned.
#[derive(Clone, Copy)]
enum Agg {
    Mean,
    Max,
}

/// A column of the time series.
struct Column {
    label: &'static str,
    get: fn(&IntervalPoint) -> Option<f64>,
    agg: Agg,
}

/// A time-series chart: its columns, drawn when any of them has a non-zero value.
struct TimeChart {
    id: &'static str,
    title: &'static str,
    unit: &'static str,
    columns: &'static [Column],
}

fn rate(n: u64, p: &IntervalPoint) -> f64 {
    if p.dt_s > 0.0 { n as f64 / p.dt_s } else { 0.0 }
}

/// Where a chart names the rate of units done: the run's kind says in which units
/// (`stats::kind::headline`).
const RATE: &str = "{rate}";
/// Where a chart names the server's watched device: a queue for an MTA, a store for a
/// mailbox server.
const DEVICE: &str = "{device}";

/// Where a chart names the server under test: the MTA, the store.
const SERVER: &str = "{server}";

/// `text` with the words of `r`'s kind put in for [`RATE`], [`DEVICE`] and [`SERVER`].
pub(super) fn in_words(text: &str, r: &Results) -> String {
    let h = super::headline::of(r);
    text.replace(RATE, h.throughput)
        .replace(DEVICE, h.device)
        .replace(SERVER, h.server)
}

const TIME_CHARTS: &[TimeChart] = &[
    TimeChart {
        id: "profile_users",
        title: "Virtual users, and actions due and not done",
        unit: "users / actions",
        columns: &[
            Column {
                label: "users",
                get: |p| p.relay.profile.as_ref().map(|q| q.users as f64),
                agg: Agg::Max,
            },
            Column {
                label: "overdue actions",
                get: |p| p.relay.profile.as_ref().map(|q| q.overdue as f64),
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "profile_actions",
        title: "Actions finished per minute, and failed",
        unit: "per minute / count",
        columns: &[
            Column {
                label: "actions/min",
                get: |p| p.relay.profile.as_ref().map(|q| q.actions_per_min),
                agg: Agg::Mean,
            },
            Column {
                label: "failed",
                get: |p| p.relay.profile.as_ref().map(|q| q.errors as f64),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "profile_latency",
        title: "Action response time (from when each was due)",
        unit: "ms",
        columns: &[
            Column {
                label: "mean",
                get: |p| p.relay.profile.as_ref().and_then(|q| q.mean_ms),
                agg: Agg::Max,
            },
            Column {
                label: "p95",
                get: |p| p.relay.profile.as_ref().and_then(|q| q.p95_ms),
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "throughput",
        title: "Throughput",
        unit: "per second",
        columns: &[
            Column {
                label: RATE,
                get: |p| Some(p.msgs_per_sec),
                agg: Agg::Mean,
            },
            Column {
                label: "delivered/s",
                get: |p| p.relay.delivered.map(|d| rate(d, p)),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "latency",
        title: "Latency over time",
        unit: "ms",
        columns: &[
            Column {
                label: "p50",
                get: |p| p.hists.contains_key("total").then_some(p.p50_ms),
                agg: Agg::Max,
            },
            Column {
                label: "p99",
                get: |p| p.hists.contains_key("total").then_some(p.p99_ms),
                agg: Agg::Max,
            },
            Column {
                label: "end-to-end p99",
                get: |p| p.e2e_p99_ms,
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "lag",
        title: "Schedule lag p99",
        unit: "ms",
        columns: &[Column {
            label: "lag p99",
            get: |p| p.hists.contains_key("lag").then_some(p.lag_p99_ms),
            agg: Agg::Max,
        }],
    },
    TimeChart {
        id: "backlog",
        title: "Backlog (accepted, not yet delivered) and queue",
        unit: "messages",
        columns: &[
            Column {
                label: "backlog",
                get: |p| p.relay.backlog.map(|b| b as f64),
                agg: Agg::Max,
            },
            Column {
                label: "queue",
                get: |p| p.relay.queue,
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "errors",
        title: "Failures per interval",
        unit: "count",
        columns: &[
            Column {
                label: "rejected",
                get: |p| Some(p.counters.rejected as f64),
                agg: Agg::Mean,
            },
            Column {
                label: "errors",
                get: |p| Some(p.counters.errors as f64),
                agg: Agg::Mean,
            },
            Column {
                label: "connect failures",
                get: |p| Some(p.counters.connect_failures as f64),
                agg: Agg::Mean,
            },
            Column {
                label: "refused recipients",
                get: |p| Some(p.counters.rcpts.refused as f64),
                agg: Agg::Mean,
            },
            Column {
                label: "late starts",
                get: |p| Some(p.counters.late_starts as f64),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "sut_cpu",
        title: "{server} CPU",
        unit: "% of one core",
        columns: &[
            Column {
                label: "user",
                get: |p| p.relay.sut.as_ref().map(|s| s.cpu_user_pct),
                agg: Agg::Mean,
            },
            Column {
                label: "system",
                get: |p| p.relay.sut.as_ref().map(|s| s.cpu_sys_pct),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "sut_disk",
        title: "{server} disk",
        unit: "KiB/s",
        columns: &[
            Column {
                label: "read",
                get: |p| p.relay.sut.as_ref().map(|s| s.read_kib_s),
                agg: Agg::Mean,
            },
            Column {
                label: "write",
                get: |p| p.relay.sut.as_ref().map(|s| s.write_kib_s),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "sut_device",
        title: DEVICE,
        unit: "operations/s",
        columns: &[
            Column {
                label: "reads/s",
                get: |p| p.relay.sut.as_ref().and_then(|s| s.device_read_iops),
                agg: Agg::Mean,
            },
            Column {
                label: "writes/s",
                get: |p| p.relay.sut.as_ref().and_then(|s| s.device_write_iops),
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "sut_device_busy",
        title: "{device} busy, and the load average",
        unit: "% busy / load",
        columns: &[
            Column {
                label: "busy %",
                get: |p| p.relay.sut.as_ref().and_then(|s| s.device_util_pct),
                agg: Agg::Max,
            },
            Column {
                label: "load (1 min)",
                get: |p| p.relay.sut.as_ref().and_then(|s| s.load1),
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "sut_memory",
        title: "{server} memory (RSS, and its shared part)",
        unit: "MiB",
        columns: &[
            Column {
                label: "rss",
                get: |p| p.relay.sut.as_ref().map(|s| s.rss_kib as f64 / 1024.0),
                agg: Agg::Max,
            },
            Column {
                label: "shared",
                get: |p| p.relay.sut.as_ref()?.shared_kib.map(|k| k as f64 / 1024.0),
                agg: Agg::Max,
            },
        ],
    },
    TimeChart {
        id: "sut_procs",
        title: "{server} processes",
        unit: "processes",
        columns: &[Column {
            label: "processes",
            get: |p| p.relay.sut.as_ref().map(|s| s.procs as f64),
            agg: Agg::Max,
        }],
    },
    TimeChart {
        id: "sut_calls",
        title: "{server} read and write calls, major page faults",
        unit: "per second",
        columns: &[
            Column {
                label: "read calls",
                get: |p| p.relay.sut.as_ref()?.read_calls_s,
                agg: Agg::Mean,
            },
            Column {
                label: "write calls",
                get: |p| p.relay.sut.as_ref()?.write_calls_s,
                agg: Agg::Mean,
            },
            Column {
                label: "major faults",
                get: |p| p.relay.sut.as_ref()?.major_faults_s,
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "sut_net",
        title: "{server} network (counted at mailbench's clients)",
        unit: "bytes/s",
        columns: &[
            Column {
                label: "in",
                get: |p| p.relay.sut.as_ref()?.net_in_bytes_s,
                agg: Agg::Mean,
            },
            Column {
                label: "out",
                get: |p| p.relay.sut.as_ref()?.net_out_bytes_s,
                agg: Agg::Mean,
            },
        ],
    },
    TimeChart {
        id: "tool_cpu",
        title: "mailbench's own CPU",
        unit: "% of one core",
        columns: &[Column {
            label: "cpu",
            get: |p| Some(p.cpu_pct),
            agg: Agg::Mean,
        }],
    },
];

/// A named line before runs are joined: its points as (x, y).
pub struct Line {
    /// Its name in the legend.
    pub label: String,
    /// Its points, x ascending; `None` is a gap.
    pub points: Vec<(f64, Option<f64>)>,
}

/// Every chart the runs have data for, in reading order.
pub fn all(runs: &[(String, &Results)]) -> Vec<Chart> {
    let mut charts: Vec<Chart> = TIME_CHARTS
        .iter()
        .filter_map(|c| time_chart(c, runs))
        .collect();
    charts.extend(
        runs.iter()
            .enumerate()
            .filter_map(|(i, (label, r))| process_chart(i, label, r, runs.len())),
    );
    charts.extend(percentile_charts(runs));
    charts.extend(step_charts(runs));
    charts
}

/// How many process names the stacked chart draws; the rest are one band, `others`.
const TOP_NAMES: usize = 6;

/// The server's CPU by process name over time (`series[].sut.by_process`, % of one
/// core), one band per name stacked, the [`TOP_NAMES`] busiest over the run and the
/// rest as `others`: which of its processes was busy when, as `top` would have shown it.
/// One chart per run (run `i` of `of`; stacks of two runs on one chart would not read);
/// `None` for a run whose intervals were not read by name.
fn process_chart(i: usize, label: &str, r: &Results, of: usize) -> Option<Chart> {
    fn by(p: &IntervalPoint) -> Option<&BTreeMap<String, f64>> {
        p.relay.sut.as_ref().map(|s| &s.by_process)
    }
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for p in &r.series {
        for (name, pct) in by(p).into_iter().flatten() {
            *total.entry(name.as_str()).or_default() += pct * p.dt_s;
        }
    }
    let mut names: Vec<(&str, f64)> = total.into_iter().collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let top: Vec<&str> = names.iter().take(TOP_NAMES).map(|(n, _)| *n).collect();
    let rest = names.len() > TOP_NAMES;
    let series = thin(&r.series);
    // A bucket's mean of `get` over its points read by name; None where none was.
    let mean = |b: &Bucket, get: &dyn Fn(&BTreeMap<String, f64>) -> f64| {
        let v: Vec<f64> = b.points.iter().filter_map(by).map(get).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut lines: Vec<Line> = top
        .iter()
        .map(|name| Line {
            label: (*name).to_string(),
            points: series
                .iter()
                .map(|b| (b.last_t, mean(b, &|m| m.get(*name).copied().unwrap_or(0.0))))
                .collect(),
        })
        .collect();
    if rest {
        let others = |m: &BTreeMap<String, f64>| {
            m.iter()
                .filter(|(n, _)| !top.contains(&n.as_str()))
                .map(|(_, v)| v)
                .sum::<f64>()
        };
        lines.push(Line {
            label: "others".into(),
            points: series
                .iter()
                .map(|b| (b.last_t, mean(b, &others)))
                .collect(),
        });
    }
    let title = in_words("{server} CPU by process", r);
    let (id, title) = if of > 1 {
        (
            format!("sut_by_process_{}", i + 1),
            format!("{title}: {label}"),
        )
    } else {
        ("sut_by_process".to_string(), title)
    };
    let mut chart = chart(
        &id,
        &title,
        "% of one core",
        XAxis::Time,
        "seconds",
        false,
        lines,
    )?;
    chart.stacked = true;
    chart.shaded = settles(r);
    Some(chart)
}

/// A line's label: prefixed with its run's when several runs share the chart.
pub fn name(runs: &[(String, &Results)], run: &str, line: &str) -> String {
    if runs.len() > 1 {
        format!("{run}: {line}")
    } else {
        line.to_string()
    }
}

fn time_chart(c: &TimeChart, runs: &[(String, &Results)]) -> Option<Chart> {
    let mut lines = Vec::new();
    for (label, r) in runs {
        let series = thin(&r.series);
        for col in c.columns {
            let points: Vec<(f64, Option<f64>)> = series
                .iter()
                .map(|bucket| (bucket.last_t, bucket.value(col)))
                .collect();
            if points.iter().any(|(_, y)| y.is_some_and(|v| v != 0.0)) {
                lines.push(Line {
                    label: name(runs, label, &in_words(col.label, r)),
                    points,
                });
            }
        }
    }
    // Runs of several kinds on one page share a title: the first run's words name it.
    let title = runs
        .first()
        .map_or_else(|| c.title.to_string(), |(_, r)| in_words(c.title, r));
    let mut chart = chart(c.id, &title, c.unit, XAxis::Time, "seconds", false, lines)?;
    chart.shaded = runs.iter().flat_map(|(_, r)| settles(r)).collect();
    Some(chart)
}

/// A profile's settles on its clock (`extra.capacity.steps[].settle`): where its time
/// charts are shaded.
fn settles(r: &Results) -> Vec<[f64; 2]> {
    let steps = r.extra.get("capacity").and_then(|c| c["steps"].as_array());
    steps
        .into_iter()
        .flatten()
        .filter_map(|st| {
            let s = st.get("settle")?;
            let from = s["from_s"].as_f64()?;
            Some([from, from + s["duration_s"].as_f64()?])
        })
        .collect()
}

/// Consecutive intervals merged so that no run draws more than [`MAX_POINTS`].
struct Bucket<'a> {
    last_t: f64,
    points: &'a [IntervalPoint],
}

impl Bucket<'_> {
    fn value(&self, col: &Column) -> Option<f64> {
        let values: Vec<f64> = self.points.iter().filter_map(col.get).collect();
        if values.is_empty() {
            return None;
        }
        Some(match col.agg {
            Agg::Mean => values.iter().sum::<f64>() / values.len() as f64,
            Agg::Max => values.iter().copied().fold(f64::MIN, f64::max),
        })
    }
}

fn thin(series: &[IntervalPoint]) -> Vec<Bucket<'_>> {
    let per = series.len().div_ceil(MAX_POINTS).max(1);
    series
        .chunks(per)
        .filter_map(|points| {
            Some(Bucket {
                last_t: points.last()?.t_s,
                points,
            })
        })
        .collect()
}

/// The x values of the percentile curves: 1/(1−q), log-spaced from 1 (q = 0) to 100,000
/// (q = 0.99999), the same for every run so that their curves share the axis.
fn percentile_grid() -> Vec<f64> {
    (0..PCT_POINTS)
        .map(|i| 10f64.powf(5.0 * i as f64 / (PCT_POINTS - 1) as f64))
        .collect()
}

/// A latency histogram as a percentile-distribution curve in ms, as HdrHistogram's
/// plotter draws it; points past the last sample's quantile are gaps.
fn percentile_curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, Option<f64>)> {
    let n = h.len() as f64;
    percentile_grid()
        .into_iter()
        .map(|x| {
            let q = 1.0 - 1.0 / x;
            let y = (x <= n.max(1.0)).then(|| (h.value_at_quantile(q) as f64 / 1000.0).max(0.001));
            (x, y)
        })
        .collect()
}

/// One chart with every metric for a single run; one chart per metric when runs overlay.
fn percentile_charts(runs: &[(String, &Results)]) -> Vec<Chart> {
    let curve = |r: &Results, metric: &str| {
        r.latency
            .get(metric)
            .filter(|h| h.count > 0)
            .map(|h| percentile_curve(&h.to_hist()))
    };
    let metrics: Vec<&String> = {
        let mut m: Vec<&String> = runs.iter().flat_map(|(_, r)| r.latency.keys()).collect();
        m.sort();
        m.dedup();
        m
    };
    let pct = |id: String, title: String, lines| {
        chart(
            &id,
            &title,
            "ms",
            XAxis::Percentile,
            "percentile",
            true,
            lines,
        )
    };
    if let [(_, r)] = runs {
        let lines = metrics
            .iter()
            .filter_map(|m| {
                Some(Line {
                    label: m.to_string(),
                    points: curve(r, m)?,
                })
            })
            .collect();
        return pct(
            "percentiles".into(),
            "Latency by percentile, per phase".into(),
            lines,
        )
        .into_iter()
        .collect();
    }
    metrics
        .iter()
        .filter_map(|m| {
            let lines = runs
                .iter()
                .filter_map(|(label, r)| {
                    Some(Line {
                        label: label.clone(),
                        points: curve(r, m)?,
                    })
                })
                .collect();
            pct(
                format!("percentiles_{m}"),
                format!("Latency by percentile: {m}"),
                lines,
            )
        })
        .collect()
}

/// The step tables a command may leave in `extra` (a concurrency sweep, a `--find-max`
/// search, a capacity ramp) as curves against their step variable.
fn step_charts(runs: &[(String, &Results)]) -> Vec<Chart> {
    struct Steps {
        key: &'static str,
        x: &'static str,
        x_label: &'static str,
        ys: &'static [(&'static str, &'static str, &'static str)],
    }
    const STEPS: &[Steps] = &[
        Steps {
            key: "sweep",
            x: "concurrency",
            x_label: "concurrency",
            ys: &[
                ("drain_mpm", "Sweep: delivered per minute", "messages/min"),
                ("e2e_p99_ms", "Sweep: end-to-end p99", "ms"),
            ],
        },
        Steps {
            key: "find_max",
            x: "rate_per_sec",
            x_label: "offered rate (per second)",
            ys: &[
                (
                    "drain_mpm",
                    "Find-max: delivered per minute",
                    "messages/min",
                ),
                ("e2e_p99_ms", "Find-max: end-to-end p99", "ms"),
            ],
        },
    ];
    let mut charts = Vec::new();
    for s in STEPS {
        for (y, title, unit) in s.ys {
            let lines = runs
                .iter()
                .filter_map(|(label, r)| {
                    let rows = r.extra.get(s.key)?.as_array()?;
                    let points = rows
                        .iter()
                        .filter_map(|row| Some((row[s.x].as_f64()?, row[*y].as_f64())))
                        .collect();
                    Some(Line {
                        label: name(runs, label, y),
                        points,
                    })
                })
                .collect();
            charts.extend(chart(
                &format!("{}_{y}", s.key),
                title,
                unit,
                XAxis::Linear,
                s.x_label,
                false,
                lines,
            ));
        }
    }
    charts.extend(capacity_chart(runs));
    charts
}

/// A capacity ramp: each action's mean latency against the user count.
fn capacity_chart(runs: &[(String, &Results)]) -> Option<Chart> {
    let mut lines = Vec::new();
    for (label, r) in runs {
        let Some(steps) = r.extra.get("capacity").and_then(|c| c["steps"].as_array()) else {
            continue;
        };
        let mut by_action: BTreeMap<String, Vec<(f64, Option<f64>)>> = BTreeMap::new();
        for step in steps {
            let (Some(users), Some(actions)) =
                (step["users"].as_f64(), step["actions"].as_object())
            else {
                continue;
            };
            for (action, row) in actions {
                by_action
                    .entry(action.clone())
                    .or_default()
                    .push((users, row["mean_ms"].as_f64()));
            }
        }
        lines.extend(by_action.into_iter().map(|(action, points)| Line {
            label: name(runs, label, &action),
            points,
        }));
    }
    chart(
        "capacity",
        "Capacity ramp: mean action time",
        "ms",
        XAxis::Linear,
        "users",
        false,
        lines,
    )
}

/// `v` to 5 significant digits: what a chart can show, and a third of the page's bytes.
fn significant(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(4 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Joins lines on the union of their x values; `None` when there is nothing to draw.
pub fn chart(
    id: &str,
    title: &str,
    unit: &str,
    x: XAxis,
    x_label: &str,
    log_y: bool,
    lines: Vec<Line>,
) -> Option<Chart> {
    if lines.is_empty() {
        return None;
    }
    // x values as exact integers of a thousandth, so equal times join.
    let key = |x: f64| (x * 1000.0).round() as i64;
    let mut xs: Vec<i64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|(x, _)| key(*x)))
        .collect();
    xs.sort_unstable();
    xs.dedup();
    let index: BTreeMap<i64, usize> = xs.iter().enumerate().map(|(i, x)| (*x, i)).collect();
    let mut data = vec![xs.iter().map(|x| Some(*x as f64 / 1000.0)).collect()];
    for l in &lines {
        let mut col = vec![None; xs.len()];
        for (x, y) in &l.points {
            col[index[&key(*x)]] = y.map(significant);
        }
        data.push(col);
    }
    Some(Chart {
        id: id.into(),
        title: title.into(),
        unit: unit.into(),
        x,
        x_label: x_label.into(),
        log_y,
        series: lines.into_iter().map(|l| l.label).collect(),
        data,
        shaded: Vec::new(),
        stacked: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, rate: f64, p99: f64) -> IntervalPoint {
        IntervalPoint {
            t_s: t,
            dt_s: 1.0,
            msgs_per_sec: rate,
            p99_ms: p99,
            // Latency is drawn only where the interval has samples.
            hists: [("total".to_string(), String::new())].into(),
            ..Default::default()
        }
    }

    /// Issue 40: an interval in which nothing finished (a DNS server with no query, a
    /// pause) has no latency: a gap in the chart, not a point at 0 ms.
    #[test]
    fn an_interval_without_samples_is_a_gap_in_the_latency_chart() {
        let chart = TIME_CHARTS
            .iter()
            .find(|c| c.id == "latency")
            .expect("latency");
        let idle = IntervalPoint {
            t_s: 2.0,
            dt_s: 1.0,
            ..Default::default()
        };
        let series = [point(1.0, 10.0, 4.0), idle, point(3.0, 10.0, 6.0)];
        let p99: Vec<Option<f64>> = series
            .chunks(1)
            .map(|points| {
                Bucket {
                    last_t: points[0].t_s,
                    points,
                }
                .value(&chart.columns[1])
            })
            .collect();
        assert_eq!(p99, vec![Some(4.0), None, Some(6.0)]);
    }

    #[test]
    fn a_long_run_is_thinned_to_at_most_max_points_keeping_means_and_peaks() {
        let series: Vec<IntervalPoint> = (0..10_000)
            .map(|i| point(f64::from(i + 1), f64::from(i % 2) * 10.0, f64::from(i % 7)))
            .collect();
        let buckets = thin(&series);
        assert!(
            buckets.len() <= MAX_POINTS,
            "expected at most {MAX_POINTS} points, got {}",
            buckets.len()
        );
        let first = &buckets[0];
        assert_eq!(first.points.len(), 3, "10,000 intervals in buckets of 3");
        assert_eq!(first.last_t, 3.0);
        // rates 0, 10, 0 → mean 3.33; p99 0, 1, 2 → max 2.
        let chart = |id: &str| TIME_CHARTS.iter().find(|c| c.id == id).expect(id);
        let (throughput, latency) = (
            &chart("throughput").columns[0],
            &chart("latency").columns[1],
        );
        assert!((first.value(throughput).unwrap_or(0.0) - 10.0 / 3.0).abs() < 1e-9);
        assert_eq!(first.value(latency), Some(2.0));
    }

    /// Issue 43: a profile's settles (`extra.capacity.steps[].settle`) are the spans its
    /// time charts shade; a run without them shades nothing.
    #[test]
    fn a_profiles_settles_are_shaded_on_its_time_charts() {
        let users = |t_s: f64| IntervalPoint {
            t_s,
            relay: crate::stats::collector::RelayPoint {
                profile: Some(crate::stats::collector::ProfilePoint {
                    users: 2,
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut r = Results::assemble(crate::stats::results::RunParts {
            command: "profile",
            run_id: 1,
            started_us: 0,
            duration_s: 4.0,
            config: serde_json::json!({}),
            summary: crate::stats::summary::Summary::Profile(Default::default()),
            steps: crate::stats::Steps(&["action"]),
            self_report: Default::default(),
            total: crate::stats::Recorder::new(),
            series: vec![users(1.0), users(2.0), users(3.0), users(4.0)],
        });
        let shaded = |r: &Results| {
            let charts = all(&[("a".into(), r)]);
            let c = charts.iter().find(|c| c.id == "profile_users").cloned();
            c.expect("the users chart").shaded
        };
        assert!(shaded(&r).is_empty(), "no settle: nothing shaded");
        r.extra.insert(
            "capacity".into(),
            serde_json::json!({"steps": [
                {"users": 2, "settle": {"from_s": 0.0, "duration_s": 0.5, "actions": 3}},
                {"users": 4, "settle": {"from_s": 2.0, "duration_s": 0.5, "actions": 6}},
            ]}),
        );
        assert_eq!(shaded(&r), [[0.0, 0.5], [2.0, 2.5]]);
    }

    /// Issue 43: the server's CPU by process name over time, stacked: the six busiest
    /// names over the run, each its own % of a core per interval, and the rest summed as
    /// `others`; a run not read by name draws none.
    #[test]
    fn the_servers_cpu_by_process_is_a_stacked_chart_of_the_busiest_names_and_others() {
        let at = |t_s: f64, by: &[(&str, f64)]| IntervalPoint {
            t_s,
            dt_s: 1.0,
            relay: crate::stats::collector::RelayPoint {
                sut: Some(crate::stats::SutPoint {
                    by_process: by.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        // Eight names: smtp busiest over the run, p1 and p2 the least busy.
        let first = [
            ("smtp", 50.0),
            ("smtpd", 30.0),
            ("cleanup", 20.0),
            ("qmgr", 10.0),
            ("master", 8.0),
            ("scache", 6.0),
            ("p1", 2.0),
            ("p2", 1.0),
        ];
        let run = |series: Vec<IntervalPoint>| {
            Results::assemble(crate::stats::results::RunParts {
                command: "relay",
                run_id: 1,
                started_us: 0,
                duration_s: 2.0,
                config: serde_json::json!({}),
                summary: crate::stats::summary::Summary::Imap(Default::default()),
                steps: crate::stats::Steps(&["total"]),
                self_report: Default::default(),
                total: crate::stats::Recorder::new(),
                series,
            })
        };
        let r = run(vec![
            at(1.0, &first),
            at(2.0, &[("smtpd", 40.0), ("p1", 3.0)]),
        ]);
        let charts = all(&[("a".into(), &r)]);
        let c = charts
            .iter()
            .find(|c| c.id == "sut_by_process")
            .expect("the chart");
        assert!(c.stacked);
        assert_eq!(
            c.series,
            [
                "smtpd", "smtp", "cleanup", "qmgr", "master", "scache", "others"
            ]
        );
        assert_eq!(c.data[0], [Some(1.0), Some(2.0)]);
        assert_eq!(c.data[1], [Some(30.0), Some(40.0)], "smtpd");
        assert_eq!(
            c.data[2],
            [Some(50.0), Some(0.0)],
            "smtp, idle in the second"
        );
        assert_eq!(c.data[7], [Some(3.0), Some(3.0)], "others: p1 and p2");
        let json = serde_json::to_string(c).expect("json");
        assert!(json.contains("\"stacked\":true"), "{json}");
        // A run whose points hold no names (a profile's) has no such chart.
        let none = run(vec![at(1.0, &[])]);
        assert!(
            all(&[("a".into(), &none)])
                .iter()
                .all(|c| c.id != "sut_by_process")
        );
    }

    #[test]
    fn the_stores_network_calls_and_shared_memory_are_drawn_over_time() {
        let at = |t_s: f64, bytes: f64| IntervalPoint {
            t_s,
            relay: crate::stats::collector::RelayPoint {
                sut: Some(crate::stats::SutPoint {
                    rss_kib: 4096,
                    shared_kib: Some(2048),
                    read_calls_s: Some(10.0),
                    net_in_bytes_s: Some(bytes),
                    net_out_bytes_s: Some(bytes * 4.0),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = Results::assemble(crate::stats::results::RunParts {
            command: "imap",
            run_id: 1,
            started_us: 0,
            duration_s: 2.0,
            config: serde_json::json!({}),
            summary: crate::stats::summary::Summary::Imap(Default::default()),
            steps: crate::stats::Steps(&["total"]),
            self_report: Default::default(),
            total: crate::stats::Recorder::new(),
            series: vec![at(1.0, 100.0), at(2.0, 300.0)],
        });
        let charts = all(&[("a".into(), &r)]);
        let get = |id: &str| charts.iter().find(|c| c.id == id).expect(id);
        let net = get("sut_net");
        assert_eq!(net.series, ["in", "out"]);
        assert_eq!(
            net.data[1..],
            [
                vec![Some(100.0), Some(300.0)],
                vec![Some(400.0), Some(1200.0)]
            ]
        );
        assert_eq!(
            get("sut_memory").data[2],
            [Some(2.0), Some(2.0)],
            "shared MiB"
        );
        assert_eq!(
            get("sut_calls").series,
            ["read calls"],
            "none written: no line"
        );
    }

    #[test]
    fn chart_values_keep_five_significant_digits() {
        assert_eq!(significant(1234.5678), 1234.6);
        assert_eq!(significant(0.000_123_456_7), 0.000_123_46);
        assert_eq!(significant(98_765_432.0), 98_765_000.0);
        assert_eq!(significant(0.0), 0.0);
    }

    #[test]
    fn runs_overlay_on_the_union_of_their_times_with_gaps() {
        let a = vec![point(1.0, 5.0, 1.0), point(2.0, 6.0, 1.0)];
        let b = vec![point(1.5, 7.0, 1.0)];
        let line = |label: &str, s: &[IntervalPoint]| Line {
            label: label.into(),
            points: s.iter().map(|p| (p.t_s, Some(p.msgs_per_sec))).collect(),
        };
        let c = chart(
            "t",
            "t",
            "",
            XAxis::Time,
            "s",
            false,
            vec![line("a", &a), line("b", &b)],
        )
        .expect("a chart");
        assert_eq!(
            c.data,
            vec![
                vec![Some(1.0), Some(1.5), Some(2.0)],
                vec![Some(5.0), None, Some(6.0)],
                vec![None, Some(7.0), None],
            ]
        );
    }

    #[test]
    fn a_percentile_curve_reads_the_histogram_and_stops_at_its_last_sample() {
        let mut h = crate::stats::recorder::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("in range");
        }
        let curve = percentile_curve(&h);
        assert_eq!(curve.len(), PCT_POINTS);
        let at = |x: f64| {
            curve
                .iter()
                .find(|(cx, _)| (cx - x).abs() / x < 1e-9)
                .and_then(|(_, y)| *y)
        };
        // x = 1 is q = 0 (the minimum), x = 10 is q = 0.9, x = 100 is q = 0.99.
        let near =
            |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() / want < 0.01);
        assert!(near(at(1.0), 1.0), "q=0: got {:?}", at(1.0));
        assert!(near(at(10.0), 900.0), "q=0.9: got {:?}", at(10.0));
        assert!(near(at(100.0), 990.0), "q=0.99: got {:?}", at(100.0));
        assert_eq!(
            at(100_000.0),
            None,
            "past 1,000 samples there is no q=0.99999"
        );
    }
}
