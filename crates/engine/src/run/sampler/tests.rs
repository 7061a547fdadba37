use std::collections::BTreeMap;

use super::{NameCount, NetBytes, Observed, Reading, Sample, first_number};
use crate::stats::IntervalPoint;

/// A reading at `t_s` of a tree that has used `cpu_s` (a fifth of it system time) and
/// written `kib` KiB.
fn at(t_s: f64, cpu_s: f64, kib: u64) -> Reading {
    Reading {
        sut: Sample {
            user_s: cpu_s * 0.8,
            sys_s: cpu_s * 0.2,
            write_bytes: kib * 1024,
            rss_kib: 1000,
            procs: 2,
            ..Sample::default()
        },
        t_s,
        ..Reading::default()
    }
}

fn point(t_s: f64, dt_s: f64) -> IntervalPoint {
    IntervalPoint {
        t_s,
        dt_s,
        ..IntervalPoint::default()
    }
}

fn cpu(p: &IntervalPoint) -> f64 {
    let s = p.relay.sut.as_ref().expect("a reading");
    s.cpu_user_pct + s.cpu_sys_pct
}

#[test]
fn each_point_gets_what_grew_over_its_own_span_and_the_points_add_up_to_the_totals() {
    // Issue 40: the run's watch lasted 4.16 s, its series' third point was the injection's
    // last 0.191 s; reading i went to point i whatever their spans, the last points got
    // nothing, and the average was taken over 3.65 s.
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            at(0.0, 0.0, 0),
            at(1.0, 1.4, 100),
            at(2.0, 3.2, 300),
            at(3.0, 4.0, 400),
            at(4.0, 4.2, 400),
            at(4.16, 4.2, 400),
        ],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![
        point(1.0, 1.0),
        point(2.0, 1.0),
        point(2.2, 0.2),
        point(3.0, 0.8),
        point(4.0, 1.0),
        point(4.16, 0.16),
    ];
    o.fill(&mut series, 0);
    let got: Vec<f64> = series
        .iter()
        .map(|p| (cpu(p) * 1e6).round() / 1e6)
        .collect();
    assert_eq!(got, [140.0, 180.0, 80.0, 80.0, 20.0, 0.0], "CPU per point");
    let sum: f64 = series.iter().map(|p| cpu(p) / 100.0 * p.dt_s).sum();
    assert!(
        (sum - 4.2).abs() < 1e-9,
        "the points add up to 4.2 s: {sum}"
    );
    let writes: f64 = series
        .iter()
        .map(|p| p.relay.sut.as_ref().map_or(0.0, |s| s.write_kib_s) * p.dt_s)
        .sum();
    assert!((writes - 400.0).abs() < 1e-9, "400 KiB written: {writes}");
    let r = o.report(&series);
    assert_eq!(r["watched_s"], 4.16);
    assert!((r["cpu_avg_pct"].as_f64().unwrap_or(0.0) - 4.2 / 4.16 * 100.0).abs() < 1e-9);
    assert!((r["cpu_user_s"].as_f64().unwrap_or(0.0) - 3.36).abs() < 1e-9);
    assert!((r["cpu_sys_s"].as_f64().unwrap_or(0.0) - 0.84).abs() < 1e-9);
    assert!((r["cpu_peak_pct"].as_f64().unwrap_or(0.0) - 180.0).abs() < 1e-9);
    assert_eq!(r["disk_write_kib"], 400.0);
    assert!((r["disk_write_kib_per_s"].as_f64().unwrap_or(0.0) - 400.0 / 4.16).abs() < 1e-9);
}

#[test]
fn cpu_shown_late_beyond_the_machine_goes_back_to_the_points_before_it() {
    // Two cores. /proc showed 2.6 s in the third second (children reaped then, used over
    // the seconds before): 0.6 s more than two cores can do in a second goes back to the
    // second (1.5 s: room for 0.5) and then the first (1.0 s: 0.1 of its room). A first
    // point over the machine gives its excess forward.
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            at(0.0, 0.0, 0),
            at(1.0, 1.0, 0),
            at(2.0, 2.5, 0),
            at(3.0, 5.1, 0),
            at(4.0, 5.6, 0),
        ],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![
        point(1.0, 1.0),
        point(2.0, 1.0),
        point(3.0, 1.0),
        point(4.0, 1.0),
    ];
    o.fill(&mut series, 0);
    let got: Vec<f64> = series
        .iter()
        .map(|p| (cpu(p) * 1e6).round() / 1e6)
        .collect();
    assert_eq!(got, [110.0, 200.0, 200.0, 50.0], "CPU per point");
    let s = series[0].relay.sut.as_ref().expect("a reading");
    assert!(
        (s.cpu_sys_pct - 22.0).abs() < 1e-9,
        "the split is kept: {}",
        s.cpu_sys_pct
    );
    let r = o.report(&series);
    assert!((r["cpu_peak_pct"].as_f64().unwrap_or(0.0) - 200.0).abs() < 1e-9);
    assert!((r["cpu_avg_pct"].as_f64().unwrap_or(0.0) - 5.6 / 4.0 * 100.0).abs() < 1e-9);

    let o = Observed::new(
        None,
        0,
        1.0,
        vec![at(0.0, 0.0, 0), at(1.0, 2.3, 0), at(2.0, 2.5, 0)],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![point(1.0, 1.0), point(2.0, 1.0)];
    o.fill(&mut series, 0);
    let got: Vec<f64> = series
        .iter()
        .map(|p| (cpu(p) * 1e6).round() / 1e6)
        .collect();
    assert_eq!(got, [200.0, 50.0], "the first point's excess goes forward");
}

#[test]
fn a_series_that_starts_after_the_watch_is_put_on_the_watchs_clock() {
    // The generator's time zero came 0.5 s after the sampler's.
    let o = Observed::new(
        None,
        1_000_000,
        1.0,
        vec![at(0.0, 0.0, 0), at(1.0, 1.0, 0), at(2.0, 1.0, 0)],
    );
    let mut series = vec![point(1.0, 1.0), point(1.5, 0.5), point(3.0, 1.5)];
    o.fill(&mut series, 1_500_000);
    // Point 1 is (0.5, 1.5] on the sampler's clock: half of a busy second, half idle.
    assert!((cpu(&series[0]) - 50.0).abs() < 1e-9, "{}", cpu(&series[0]));
    assert_eq!(cpu(&series[1]), 0.0);
    assert!(
        series[2].relay.sut.is_none(),
        "after the watch's end: no reading, not 0"
    );
}

#[test]
fn a_process_that_leaves_the_tree_takes_nothing_back() {
    // 2 s used, then a process holding 1.5 s left the tree; the others used 0.5 s more.
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            at(0.0, 0.0, 0),
            at(1.0, 2.0, 0),
            at(2.0, 0.5, 0),
            at(3.0, 1.0, 0),
        ],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![point(1.0, 1.0), point(2.0, 1.0), point(3.0, 1.0)];
    o.fill(&mut series, 0);
    let got: Vec<f64> = series.iter().map(cpu).collect();
    assert_eq!(got, [200.0, 0.0, 50.0]);
    let r = o.report(&series);
    assert!((r["cpu_avg_pct"].as_f64().unwrap_or(0.0) - 2.5 / 3.0 * 100.0).abs() < 1e-9);
}

#[test]
fn levels_and_the_queue_value_come_from_the_reading_that_ended_the_point_never_twice() {
    let with = |t_s: f64, procs: u64, queue: f64| Reading {
        sut: Sample {
            procs,
            ..Sample::default()
        },
        queue: Some(queue),
        t_s,
        ..Reading::default()
    };
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            with(0.0, 1, 0.0),
            with(1.01, 5, 10.0),
            with(2.02, 7, 20.0),
            with(3.0, 3, 30.0),
        ],
    );
    // Points end at 1.0, 2.0, 2.6 (the injection's last) and 3.0.
    let mut series = vec![
        point(1.0, 1.0),
        point(2.0, 1.0),
        point(2.6, 0.6),
        point(3.0, 0.4),
    ];
    o.fill(&mut series, 0);
    let queues: Vec<Option<f64>> = series.iter().map(|p| p.relay.queue).collect();
    assert_eq!(queues, [Some(10.0), Some(20.0), None, Some(30.0)]);
    let procs: Vec<u64> = series
        .iter()
        .map(|p| p.relay.sut.as_ref().map_or(0, |s| s.procs))
        .collect();
    assert_eq!(
        procs,
        [5, 7, 3, 3],
        "the nearest level where none ended a point"
    );
}

#[test]
fn seed_001s_resource_figures_come_from_the_first_and_last_readings() {
    let at = |t_s, rss_kib, procs, shared_kib, calls: u64, faults| Reading {
        sut: Sample {
            rss_kib,
            procs,
            shared_kib,
            pss_kib: Some(rss_kib / 4),
            read_calls: calls,
            write_calls: calls / 2,
            major_faults: faults,
            net: Some(NetBytes {
                into_store: calls / 10,
                out_of_store: calls,
            }),
            ..Sample::default()
        },
        t_s,
        ..Reading::default()
    };
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            at(0.0, 100, 1, 10, 1_000, 5),
            at(1.0, 900, 3, 70, 2_000, 6),
            at(2.0, 300, 1, 40, 5_000, 25),
        ],
    );
    let r = o.report(&[]);
    assert_eq!(r["disk_read_calls_per_s"], 2_000.0, "4,000 calls in 2 s");
    assert_eq!(r["disk_write_calls_per_s"], 1_000.0);
    assert_eq!(r["major_faults_per_s"], 10.0, "20 faults in 2 s");
    assert_eq!(r["peak_shared_kib"], 70);
    assert_eq!(r["net_in_bytes"], 400, "the clients wrote 500 - 100 bytes");
    assert_eq!(r["net_out_bytes"], 4_000);
    assert_eq!(r["net_in_bytes_per_s"], 200.0);
    assert_eq!(r["net_out_bytes_per_s"], 2_000.0);
    assert_eq!(r["peak_rss_kib"], 900);
    assert_eq!(r["peak_pss_kib"], 225);
    assert_eq!(
        r["rss_per_proc_kib"], 260.0,
        "(100 + 900 + 300) KiB over 1 + 3 + 1 processes"
    );
    assert_eq!(r["pss_per_proc_kib"], 65.0);
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

/// A reading's counts by name, `(name, cpu_s)`, a fifth of each system time.
fn names(of: &[(&str, f64)]) -> BTreeMap<String, NameCount> {
    of.iter()
        .map(|(n, cpu_s)| {
            let c = NameCount {
                cpu_s: *cpu_s,
                sys_s: cpu_s * 0.2,
                rss_kib: 1000,
                procs: 1,
                ..NameCount::default()
            };
            (n.to_string(), c)
        })
        .collect()
}

/// The whole run's CPU by name, `(name, cpu_s, share_pct)` rounded to µs, and
/// `cpu_unnamed_s`.
fn by_name(r: &serde_json::Value) -> (Vec<(String, f64, f64)>, f64) {
    let round = |v: &serde_json::Value| (v.as_f64().unwrap_or(-1.0) * 1e6).round() / 1e6;
    let rows = r["by_process"]
        .as_array()
        .expect("by_process")
        .iter()
        .map(|row| {
            let name = row["name"].as_str().unwrap_or("?").to_string();
            (name, round(&row["cpu_s"]), round(&row["share_pct"]))
        })
        .collect();
    (rows, round(&r["cpu_unnamed_s"]))
}

/// A newcomer's finding: the CPU by process name showed `(unnamed)` −0.40 s. The tree is
/// read from `/proc` here: process b (0.5 s) leaves the tree unreaped (Sendmail's
/// double-forked children) and takes its CPU out of the tree's sum, while a uses 0.4 s
/// more: the tree's sum goes 1.0 → 0.9, a drop not taken back (1.0 s in all), the names
/// 1.4 s. The tree stays 1.0 s (the revert d24cee4: raising it to the names' made it
/// exceed the cgroup's own count); the names are scaled into it, (unnamed) 0.
#[test]
fn names_that_sum_more_than_the_tree_are_scaled_into_it_and_nothing_is_negative() {
    let with = |t_s: f64, cpu_s: f64, of: &[(&str, f64)]| Reading {
        names: names(of),
        ..at(t_s, cpu_s, 0)
    };
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            with(0.0, 0.0, &[("a", 0.0), ("b", 0.0)]),
            with(1.0, 1.0, &[("a", 0.5), ("b", 0.5)]),
            with(2.0, 0.9, &[("a", 0.9), ("b", 0.5)]),
        ],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![point(1.0, 1.0), point(2.0, 1.0)];
    o.fill(&mut series, 0);
    let got: Vec<f64> = series
        .iter()
        .map(|p| (cpu(p) * 1e6).round() / 1e6)
        .collect();
    assert_eq!(got, [100.0, 0.0], "the tree's CPU per point, kept");
    let second = &series[1].relay.sut.as_ref().expect("a reading").by_process;
    assert!(
        second.values().all(|pct| *pct == 0.0),
        "no name above the tree's 0 % in the second point: {second:?}"
    );
    let r = o.report(&series);
    assert_eq!(
        r["cpu_user_s"].as_f64().map(|s| (s * 1e6).round() / 1e6),
        Some(0.8)
    );
    assert_eq!(
        r["cpu_sys_s"].as_f64().map(|s| (s * 1e6).round() / 1e6),
        Some(0.2)
    );
    let (rows, unnamed) = by_name(&r);
    let want = [
        ("a".to_string(), 0.642857, 64.285714),
        ("b".to_string(), 0.357143, 35.714286),
    ];
    assert_eq!(
        rows, want,
        "a 0.9 and b 0.5 of 1.4 s, scaled into the tree's 1.0 s"
    );
    assert_eq!(unnamed, 0.0, "(unnamed) in {r:#}");
}

/// The other shape: the tree is the cgroup's count, read before the processes, and the
/// MTA is busy at the watch's last reading: the names took 0.1 s the cgroup's count had
/// not yet (2.1 s against 2.0 s), which showed (unnamed) −0.10 s. A tree the names fall
/// short of keeps its (unnamed) as it is.
#[test]
fn a_reading_that_read_the_names_after_the_cgroup_shows_no_negative_unnamed() {
    let with = |t_s: f64, cpu_s: f64, of: &[(&str, f64)]| Reading {
        names: names(of),
        ..at(t_s, cpu_s, 0)
    };
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            with(0.0, 0.0, &[("smtpd", 0.0), ("qmgr", 0.0)]),
            with(1.0, 1.0, &[("smtpd", 0.6), ("qmgr", 0.4)]),
            with(2.0, 2.0, &[("smtpd", 1.4), ("qmgr", 0.7)]),
        ],
    );
    let o = Observed { cores: 2.0, ..o };
    let mut series = vec![point(1.0, 1.0), point(2.0, 1.0)];
    o.fill(&mut series, 0);
    let p2 = &series[1].relay.sut.as_ref().expect("a reading").by_process;
    let sum: f64 = p2.values().sum();
    assert!(
        (sum - 100.0).abs() < 1e-9,
        "the names' 110 % scaled into the tree's 100 %: {p2:?}"
    );
    let r = o.report(&series);
    let (rows, unnamed) = by_name(&r);
    let want = [
        ("smtpd".to_string(), 1.333333, 66.666667),
        ("qmgr".to_string(), 0.666667, 33.333333),
    ];
    assert_eq!(
        rows, want,
        "1.4 and 0.7 of 2.1 s, scaled into the tree's 2.0 s"
    );
    assert_eq!(unnamed, 0.0, "(unnamed) in {r:#}");

    // The names short of the tree by 0.3 s: nothing scaled, 0.3 s unnamed.
    let o = Observed::new(
        None,
        0,
        1.0,
        vec![
            with(0.0, 0.0, &[("smtpd", 0.0)]),
            with(1.0, 1.0, &[("smtpd", 0.7)]),
        ],
    );
    let r = o.report(&[]);
    let (rows, unnamed) = by_name(&r);
    assert_eq!(rows, [("smtpd".to_string(), 0.7, 70.0)]);
    assert_eq!(unnamed, 0.3);
}
