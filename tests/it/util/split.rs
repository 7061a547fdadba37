//! What a split send must show, whichever launcher started its agents (processes started
//! by the test, `srun`, a Slurm array): every agent took its own part and began at the
//! shared start, the merged results are the single run's, and the sink saw one run whole.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::util::{results, run_expect};

/// The open-loop run every launcher splits: 50 messages a second for 2 s, a gap of 20 ms,
/// so that each one ends inside the interval it was scheduled in and the per-interval
/// counts are exact.
pub const OPEN_LOOP: &[&str] = &["--rate", "50/s", "-n", "100", "-c", "8"];

/// The messages of [`OPEN_LOOP`].
const MESSAGES: u64 = 100;

/// A UTC time `ahead` from now in RFC 3339 with milliseconds, as an operator would give
/// every agent.
pub fn start_in(ahead: Duration) -> String {
    let at = SystemTime::now() + ahead;
    let ms = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .expect("date");
    format!(
        "{}.{:03}Z",
        String::from_utf8_lossy(&out.stdout).trim(),
        ms % 1000
    )
}

/// `mailbench merge FILES -o OUT` (exit 0 expected), and the merged results.
pub fn merged(files: &[PathBuf], out: &Path) -> serde_json::Value {
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.to_string_lossy().into_owned()));
    args.extend(["-o".into(), out.to_string_lossy().into_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_expect(&args, 0);
    results(out)
}

/// The sink's record of one run id.
pub fn seen_run(sink: &serde_json::Value, run_id: &str) -> serde_json::Value {
    sink["extra"]["runs"][run_id].clone()
}

/// Agent i's results file (`files[i]`) says it was agent i of `files.len()`, of run
/// `run_id` (16 hex digits), and that it began within noise of the shared start; `how`
/// names the launcher for the failure message.
pub fn assert_began_together(files: &[PathBuf], run_id: &str, how: &str) {
    let count = files.len() as u64;
    for (i, f) in files.iter().enumerate() {
        let r = results(f);
        let shard = &r["extra"]["shard"];
        assert_eq!(
            (shard["index"].as_u64(), shard["count"].as_u64()),
            (Some(i as u64), Some(count)),
            "{how} gave agent {i} of {count}: {shard:#}"
        );
        let offset = shard["start_offset_s"].as_f64().expect("an offset");
        assert!(
            (-0.05..0.5).contains(&offset),
            "agent {i} of {count} ({how}) began {offset} s off the shared start"
        );
        assert_eq!(r["run_id"], run_id, "{how}: agent {i}");
    }
}

/// The merged results `m` of `count` agents of [`OPEN_LOOP`] equal `one` agent's run of
/// it: the same counts, the single schedule in every interval, the latency within noise.
pub fn assert_merged_as_one(
    m: &serde_json::Value,
    one: &serde_json::Value,
    count: usize,
    how: &str,
) {
    let s = &m["summary"];
    for key in ["intended", "sent", "accepted"] {
        assert_eq!(
            s[key], one["summary"][key],
            "{count} agents ({how}) merged: {key} (merged {s:#})"
        );
    }
    assert_eq!(s["accepted"], MESSAGES, "{how}: {s:#}");
    assert_eq!(s["failed"], 0, "{how}: {s:#}");
    // The merged arrivals keep the single schedule: 50 a second in each interval.
    let per_interval: Vec<u64> = m["series"]
        .as_array()
        .expect("series")
        .iter()
        .map(|p| p["sent"].as_u64().unwrap_or(0))
        .filter(|n| *n > 0)
        .collect();
    assert_eq!(
        per_interval.len(),
        2,
        "{count} agents ({how}): {per_interval:?}"
    );
    for n in &per_interval {
        assert!(
            n.abs_diff(50) <= 1,
            "{count} agents ({how}), per interval: {per_interval:?}"
        );
    }
    // Latency: within noise of the one agent doing the same work on loopback.
    let p50 = |r: &serde_json::Value| r["latency"]["total"]["p50_us"].as_f64().unwrap_or(0.0);
    assert!(
        (p50(m) - p50(one)).abs() < 5_000.0,
        "{how}: p50 merged {} µs against one agent {} µs",
        p50(m),
        p50(one)
    );
    assert_eq!(
        m["extra"]["agents"].as_array().map(Vec::len),
        Some(count),
        "{how}"
    );
}

/// The sink's results `sunk` saw run `run_id` (16 hex digits) of [`OPEN_LOOP`] whole:
/// every message once, none missing.
pub fn assert_sink_saw_whole(sunk: &serde_json::Value, run_id: &str, how: &str) {
    let run = seen_run(sunk, run_id);
    assert_eq!(
        (
            run["distinct"].as_u64(),
            run["missing_count"].as_u64(),
            run["duplicates"].as_u64(),
            run["max_seq"].as_u64()
        ),
        (Some(MESSAGES), Some(0), Some(0), Some(MESSAGES - 1)),
        "the sink saw run {run_id} ({how}) whole: {run:#}"
    );
}
