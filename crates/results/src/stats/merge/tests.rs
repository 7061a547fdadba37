use std::ops::Range;

use serde_json::json;

use super::*;
use crate::stats::Metric;
use crate::stats::hist::{HistJson, encode};
use crate::stats::recorder::new_histogram;
use crate::stats::results::RunParts;
use crate::stats::summary::SendSummary;
use crate::stats::{IntervalPoint, Recorder, Steps};

/// Merges send results.
fn merge_send(inputs: &[Input], force: bool) -> Result<Results, String> {
    merge(inputs, STEPS, force)
}

const STEPS: Steps = Steps(&["connect", "banner", "mail", "rcpt", "data", "quit"]);

const T0: u64 = 1_800_000_000_000_000;

/// An agent that had `ms` as whole-transaction latencies, one second per point of
/// `per_point` messages, started `late_us` after T0.
fn agent(name: &str, run_id: u64, ms: Range<u64>, shard: Option<(u64, u64)>) -> Input {
    agent_at(name, run_id, ms, shard, 0)
}

fn agent_at(
    name: &str,
    run_id: u64,
    ms: Range<u64>,
    shard: Option<(u64, u64)>,
    late_us: u64,
) -> Input {
    let mut total = Recorder::new();
    let mut series = Vec::new();
    let values: Vec<u64> = ms.collect();
    for (i, chunk) in values.chunks(10).enumerate() {
        let mut iv = Recorder::new();
        for v in chunk {
            iv.record_us(Metric::Total, v * 1000);
            iv.counters.sent += 1;
            iv.counters.accepted += 1;
        }
        series.push(IntervalPoint {
            t_s: (i + 1) as f64 + 0.002,
            dt_s: 1.0,
            msgs_per_sec: iv.counters.accepted as f64,
            counters: iv.counters.clone(),
            hists: [("total".to_string(), encode(iv.hist(Metric::Total)))].into(),
            ..IntervalPoint::default()
        });
        total.merge(&iv);
    }
    let secs = series.len() as f64;
    let n = total.counters.sent;
    let mut r = Results::assemble(RunParts {
        command: "send",
        run_id,
        started_us: T0 + late_us,
        duration_s: secs,
        config: json!({"interval_s": 1.0, "concurrency": 2, "rate": 10, "thresholds": ["p99(total)<150ms"]}),
        summary: Summary::Send(SendSummary::derive(&total, n, secs, secs)),
        steps: STEPS,
        self_report: SelfReport::default(),
        total,
        series,
    });
    if let Some((index, count)) = shard {
        r.extra.insert(
            "shard".into(),
            json!({"index": index, "count": count, "label": format!("{index}/{count}")}),
        );
    }
    Input {
        name: name.into(),
        results: r,
    }
}

#[test]
fn histograms_add_to_exactly_the_one_agent_percentiles() {
    let a = agent("a.json", 7, 1..101, Some((0, 2)));
    let b = agent("b.json", 7, 101..201, Some((1, 2)));
    let m = merge_send(&[a, b], false).expect("merges");
    let mut all = new_histogram();
    for v in 1..201u64 {
        all.record(v * 1000).expect("record");
    }
    let expected = HistJson::from_hist(&all);
    assert_eq!(m.latency["total"], expected, "merged histogram");
    assert_eq!(
        (expected.p50_us / 1000, expected.p99_us / 1000),
        (100, 198),
        "the known percentiles"
    );
    assert_eq!((m.counters.sent, m.counters.accepted), (200, 200));
    let Summary::Send(s) = &m.summary else {
        panic!("a send summary, got {:?}", m.summary)
    };
    assert_eq!((s.injection.intended, s.injection.accepted), (200, 200));
    assert_eq!(s.p99_ms, expected.p99_us as f64 / 1000.0);
    assert_eq!(m.config["concurrency"], 4, "the agents' connections add up");
    assert_eq!(m.series.len(), 10, "ten aligned seconds");
    assert_eq!(m.series[0].counters.accepted, 20);
    assert!(
        (m.series[0].msgs_per_sec - 20.0).abs() < 1e-9,
        "rate of the merged interval: {}",
        m.series[0].msgs_per_sec
    );
    // Seconds 0 and 5 hold 1..10 ms and 101..110 ms: the interval's p99 is 110 ms.
    assert_eq!(m.series[0].p99_ms.round(), 110.0);
    assert_eq!(m.extra["agents"].as_array().map(Vec::len), Some(2));
}

#[test]
fn merging_is_associative() {
    let parts = || {
        [
            agent("a.json", 7, 1..41, Some((0, 3))),
            agent("b.json", 7, 41..101, Some((1, 3))),
            agent_at("c.json", 7, 5..75, Some((2, 3)), 400_000),
        ]
    };
    // A merge of part of the agents needs --force (and says partial); the whole does not.
    let [a, b, c] = parts();
    let ab = merge_send(&[a, b], true).expect("a+b");
    assert_eq!(ab.extra["merge"]["missing_shards"], json!(["2/3"]));
    let left = merge_send(
        &[
            Input {
                name: "ab.json".into(),
                results: ab,
            },
            c,
        ],
        false,
    )
    .expect("(a+b)+c");
    let [a, b, c] = parts();
    let bc = merge_send(&[b, c], true).expect("b+c");
    let right = merge_send(
        &[
            a,
            Input {
                name: "bc.json".into(),
                results: bc,
            },
        ],
        false,
    )
    .expect("a+(b+c)");
    assert_eq!(left.counters, right.counters);
    assert_eq!(left.latency, right.latency);
    assert_eq!(left.summary, right.summary);
    let per_point = |r: &Results| -> Vec<(u64, u64)> {
        r.series
            .iter()
            .map(|p| (p.counters.accepted, (p.p99_ms * 1000.0) as u64))
            .collect()
    };
    assert_eq!(per_point(&left), per_point(&right));
    assert_eq!(left.extra["agents"].as_array().map(Vec::len), Some(3));
    assert_eq!(left.extra["merge"]["partial"], json!(false));
}

#[test]
fn different_runs_configurations_and_repeated_shards_are_refused_in_one_line() {
    let cases: [(Vec<Input>, &str); 4] = [
        (
            vec![
                agent("a.json", 7, 1..11, None),
                agent("b.json", 8, 1..11, None),
            ],
            "a.json has run id 0000000000000007 and b.json has 0000000000000008",
        ),
        (
            vec![
                agent("a.json", 7, 1..11, Some((1, 2))),
                agent("b.json", 7, 1..11, Some((1, 2))),
            ],
            "a.json and b.json are both shard 1/2",
        ),
        (
            vec![
                agent("a.json", 7, 1..11, Some((0, 2))),
                agent("b.json", 7, 1..11, Some((1, 3))),
            ],
            "split the run differently",
        ),
        (
            {
                let mut b = agent("b.json", 7, 1..11, None);
                b.results.config["rate"] = 20.into();
                vec![agent("a.json", 7, 1..11, None), b]
            },
            "config.rate: 10 against 20",
        ),
    ];
    for (inputs, says) in cases {
        let err = merge_send(&inputs, false).expect_err(says);
        assert!(
            err.contains(says) && err.ends_with("--force merges anyway") && !err.contains('\n'),
            "expected one line with {says:?}, got {err:?}"
        );
        let forced = merge_send(&inputs, true).expect("--force merges");
        let recorded = forced.extra["merge"]["forced"].to_string();
        assert!(recorded.contains(says), "forced: {recorded}");
    }
    let mut sink = agent("s.json", 7, 1..11, None);
    sink.results.command = "relay".into();
    let err = merge_send(&[sink], false).expect_err("a relay");
    assert!(err.starts_with("s.json: a relay run"), "{err}");
}

#[test]
fn sinks_unite_their_sequence_numbers() {
    let report = |seen: Vec<[u64; 2]>, duplicates: u64| {
        let distinct = seen.iter().map(|[a, b]| b - a + 1).sum();
        let max_seq = seen.last().map_or(0, |r| r[1]);
        BTreeMap::from([(
            "0000000000000007".to_string(),
            RunReport {
                distinct,
                arrivals: distinct + duplicates,
                duplicates,
                max_seq,
                missing: Vec::new(),
                missing_count: 0,
                seen,
            },
        )])
    };
    // Even numbers at one sink, odd at the other, 7 at both, 12 and 14 nowhere.
    let evens: Vec<[u64; 2]> = (0..=10).step_by(2).map(|s| [s, s]).collect();
    let odds: Vec<[u64; 2]> = [1, 3, 5, 7, 9, 11, 13].iter().map(|s| [*s, *s]).collect();
    let mut b = odds.clone();
    b.push([16, 16]);
    let runs = runs::merge(&[report(evens, 1), report(b, 0), report(vec![[7, 7]], 0)]);
    let r = &runs["0000000000000007"];
    assert_eq!(r.seen, vec![[0, 11], [13, 13], [16, 16]]);
    assert_eq!(r.distinct, 14);
    assert_eq!(r.duplicates, 2, "one at a sink, one across sinks");
    assert_eq!((r.max_seq, r.missing_count), (16, 3));
    assert_eq!(r.missing, vec![12, 14, 15]);
}

/// `a` with its series replaced by points of (end, span, CPU %, accepted).
fn with_series(mut a: Input, points: &[(f64, f64, f64, u64)]) -> Input {
    a.results.series = points
        .iter()
        .map(|&(t_s, dt_s, cpu_pct, accepted)| IntervalPoint {
            t_s,
            dt_s,
            cpu_pct,
            msgs_per_sec: accepted as f64 / dt_s,
            counters: crate::stats::Counters {
                accepted,
                ..Default::default()
            },
            ..IntervalPoint::default()
        })
        .collect();
    a
}

/// Issue 25 item 11: agents peaking at 1.35–1.49 % merged into a 41.6 % peak, a 2.9 ms
/// final interval's 37 % added to a whole interval's. A point counts for its span.
#[test]
fn issue_25_a_final_sliver_counts_for_its_span() {
    let a = with_series(
        agent("a.json", 7, 1..11, Some((0, 2))),
        &[
            (1.0, 1.0, 1.35, 10),
            (2.0, 1.0, 1.40, 10),
            (2.0029, 0.0029, 37.0, 0),
        ],
    );
    let b = with_series(
        agent("b.json", 7, 1..11, Some((1, 2))),
        &[
            (1.0, 1.0, 1.49, 10),
            (2.0, 1.0, 1.20, 12),
            (2.0031, 0.0031, 38.0, 1),
        ],
    );
    let m = merge_send(&[a, b], false).expect("merges");
    assert_eq!(m.series.len(), 2, "the slivers fall in the last second");
    let last = &m.series[1];
    let span = 1.0031;
    let cpu = (1.40 + 37.0 * 0.0029) / 1.0029 + (1.20 + 38.0 * 0.0031) / span;
    assert!(
        (last.dt_s - span).abs() < 1e-9 && (last.cpu_pct - cpu).abs() < 1e-9,
        "last point: expected {span} s at {cpu:.4} %, got {} s at {:.4} %",
        last.dt_s,
        last.cpu_pct
    );
    assert!(
        (last.msgs_per_sec - (10.0 / 1.0029 + 13.0 / span)).abs() < 1e-9,
        "expected {} msg/s, got {}",
        10.0 / 1.0029 + 13.0 / span,
        last.msgs_per_sec
    );
    assert!(
        (m.series[0].cpu_pct - 2.84).abs() < 1e-9,
        "{:?}",
        m.series[0]
    );
    assert!(
        (m.self_report.cpu_peak_pct - 2.84).abs() < 1e-9,
        "peak: expected 2.84 %, got {}",
        m.self_report.cpu_peak_pct
    );
}

/// Issue 25 item 11: sinks started apart, one with its sliver alone in an interval the
/// other fills: the sliver adds its ms' work to that interval, not its percentage.
#[test]
fn issue_25_a_sliver_alone_in_an_interval_is_spread_over_it() {
    let a = with_series(
        agent("a.json", 7, 1..11, None),
        &[(1.0, 1.0, 4.6, 10), (2.0, 1.0, 4.6, 10)],
    );
    // Started 0.2 s late: its points end at 1.2 s, and 1.3 s past the grid line at
    // 1 s, in the next interval.
    let b = with_series(
        agent_at("b.json", 7, 1..11, None, 200_000),
        &[(1.0, 1.0, 4.3, 10), (1.1, 0.1, 70.0, 1)],
    );
    let m = merge_send(&[a, b], false).expect("merges");
    let cpus: Vec<f64> = m.series.iter().map(|p| p.cpu_pct).collect();
    let expected = [4.6 + 4.3, 4.6 + 70.0 * 0.1];
    assert!(
        cpus.len() == 2 && cpus.iter().zip(expected).all(|(g, e)| (g - e).abs() < 1e-9),
        "expected {expected:?}, got {cpus:?}"
    );
    assert!(
        (m.self_report.cpu_peak_pct - 11.6).abs() < 1e-9,
        "{}",
        m.self_report.cpu_peak_pct
    );
}

/// Issue 25 item 19: sinks storing in different directories are one run's sinks (where
/// each stored is output, not workload); a different kind of store is another workload.
#[test]
fn issue_25_per_agent_store_paths_do_not_block_a_merge() {
    let stored = |name: &str, store: &str| {
        let mut a = agent(name, 7, 1..11, None);
        a.results.config["store"] = store.into();
        a
    };
    let m = merge_send(
        &[
            stored("a.json", "dir:/tmp/a"),
            stored("b.json", "dir:/tmp/b"),
        ],
        false,
    )
    .expect("paths differ only");
    let stores: Vec<&Value> = m.extra["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| &a["config"]["store"])
        .collect();
    assert_eq!(
        stores,
        [&json!("dir:/tmp/a"), &json!("dir:/tmp/b")],
        "kept per agent"
    );
    assert_eq!(m.config["store"], "dir", "the merged file names the kind");
    let same = merge_send(
        &[stored("a.json", "dir:/s"), stored("b.json", "dir:/s")],
        false,
    )
    .expect("same store");
    assert_eq!(same.config["store"], "dir:/s");
    let err = merge_send(
        &[
            stored("a.json", "dir:/tmp/a"),
            stored("b.json", "maildir:/tmp/b"),
        ],
        false,
    )
    .expect_err("kinds differ");
    assert!(err.contains("config.store"), "{err}");
}

/// `agent` as an open-loop agent of a split run whose schedule counts from `start_at`.
fn scheduled(name: &str, shard: (u64, u64), start_at: Option<&str>) -> Input {
    let mut a = agent(name, 7, 1..11, Some(shard));
    a.results.config["pacing"] = json!({"mode": "open", "rate": 30.0});
    a.results.extra.get_mut("shard").expect("shard")["start_at"] = json!(start_at);
    a
}

/// Issue 40: 2 of 3 shards merged into 467 messages at 66.8 msg/s, exit 0, without a word
/// of the third. Refused in one line naming the missing shard; forced, the merged results
/// say they are partial and which shards are missing.
#[test]
fn issue_40_a_split_run_with_a_shard_missing_is_refused_or_marked_partial() {
    let at = Some("2026-11-28T12:00:00.000Z");
    let two_of_three = || {
        [
            scheduled("a.json", (0, 3), at),
            scheduled("c.json", (2, 3), at),
        ]
    };
    let err = merge_send(&two_of_three(), false).expect_err("a shard is missing");
    assert!(
        err.starts_with(
            "shard 1/3 of the run is in no file (the files hold 0/3 (a.json), 2/3 (c.json))"
        ) && err.ends_with("--force merges anyway")
            && !err.contains('\n'),
        "got {err:?}"
    );
    let one_of_four = [scheduled("a.json", (1, 4), at)];
    let err = merge_send(&one_of_four, false).expect_err("three are missing");
    assert!(
        err.starts_with("shards 0/4, 2/4, 3/4 of the run are in no file"),
        "{err}"
    );
    let m = merge_send(&two_of_three(), true).expect("forced");
    assert_eq!(
        (
            &m.extra["merge"]["partial"],
            &m.extra["merge"]["missing_shards"]
        ),
        (&json!(true), &json!(["1/3"]))
    );
    assert!(
        m.extra["merge"]["forced"][0]
            .as_str()
            .is_some_and(|s| s.contains("1/3"))
    );
    let whole = [
        scheduled("a.json", (0, 3), at),
        scheduled("b.json", (1, 3), at),
        scheduled("c.json", (2, 3), at),
    ];
    let m = merge_send(&whole, false).expect("every shard");
    assert_eq!(
        (
            &m.extra["merge"]["partial"],
            &m.extra["merge"]["missing_shards"]
        ),
        (&json!(false), &json!([]))
    );
}

/// Issue 40: agents given `--start-at +3s` two seconds apart counted their schedules from
/// two instants, and merge took them (18.1 msg/s for a run planned at 30/s). Agents whose
/// shared start differs, or open-loop agents without one, are refused in one line.
#[test]
fn issue_40_agents_whose_schedules_count_from_different_starts_are_refused() {
    let cases = [
        (
            [
                scheduled("a.json", (0, 2), Some("2026-11-28T12:00:03.000Z")),
                scheduled("b.json", (1, 2), Some("2026-11-28T12:00:05.000Z")),
            ],
            "a.json and b.json count their schedules from different starts (2026-11-28T12:00:03.000Z and 2026-11-28T12:00:05.000Z, 2.000 s apart)",
        ),
        (
            [
                scheduled("a.json", (0, 2), None),
                scheduled("b.json", (1, 2), None),
            ],
            "a.json is an open-loop agent without --start-at",
        ),
    ];
    for (inputs, says) in cases {
        let err = merge_send(&inputs, false).expect_err(says);
        assert!(
            err.starts_with(says) && err.contains("one absolute --start-at") && !err.contains('\n'),
            "expected {says:?}, got {err:?}"
        );
    }
    // A closed-loop split has no schedule to share: no start is needed.
    let closed = [
        agent("a.json", 7, 1..11, Some((0, 2))),
        agent("b.json", 7, 1..11, Some((1, 2))),
    ];
    merge_send(&closed, false).expect("closed loop without --start-at");
}
