//! Writes the results files of agents that each ran one hour, for the merge benchmark
//! (`bench/scale_out.py`): no agent can run for an hour inside a benchmark, so the files
//! are made the way a real run makes them (a recorder per one-second interval, its
//! compact histograms in the series, the totals and summary from the same recorders),
//! from latencies drawn at random. They are labelled synthetic in their configuration.
//!
//! Usage: hour_agents DIR AGENTS [RATE_PER_S] [SECONDS]

use std::path::PathBuf;

use mailbench::stats::hist::encode;
use mailbench::stats::results::{Results, RunParts, SelfReport};
use mailbench::stats::summary::{SendSummary, Summary};
use mailbench::stats::{IntervalPoint, Metric, Recorder};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: hour_agents DIR AGENTS [RATE_PER_S] [SECONDS]";
    let dir = PathBuf::from(args.get(1).ok_or(usage)?);
    let num = |i: usize, default: u64| -> Result<u64, String> {
        args.get(i)
            .map_or(Ok(default), |a| a.parse().map_err(|_| usage.to_string()))
    };
    let (agents, rate, seconds) = (num(2, 16)?, num(3, 100)?, num(4, 3600)?);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let started_us = 1_800_000_000_000_000;
    for index in 0..agents {
        let mut rng = fastrand::Rng::with_seed(index);
        let mut total = Recorder::new();
        let mut series = Vec::with_capacity(seconds as usize);
        for s in 0..seconds {
            let mut iv = Recorder::new();
            for _ in 0..rate {
                // A log-uniform spread from 0.3 ms to 300 ms, lag mostly small.
                let total_us = (300.0 * 1000f64.powf(rng.f64())) as u64;
                iv.record_us(Metric::Total, total_us);
                iv.record_us(Metric::Lag, rng.u64(0..2_000));
                iv.counters.sent += 1;
                iv.counters.accepted += 1;
                iv.counters.bytes += 1024;
            }
            series.push(IntervalPoint {
                t_s: (s + 1) as f64,
                dt_s: 1.0,
                counters: iv.counters.clone(),
                msgs_per_sec: rate as f64,
                hists: [
                    ("total".to_string(), encode(iv.hist(Metric::Total))),
                    ("lag".to_string(), encode(iv.hist(Metric::Lag))),
                ]
                .into(),
                ..IntervalPoint::default()
            });
            total.merge(&iv);
        }
        let n = total.counters.sent;
        let secs = seconds as f64;
        let mut r = Results::assemble(RunParts {
            command: "send",
            run_id: 0x5eed,
            started_us,
            duration_s: secs,
            config: serde_json::json!({
                "synthetic": "examples/hour_agents.rs",
                "interval_s": 1.0,
                "concurrency": 64,
                "thresholds": [],
            }),
            summary: Summary::Send(SendSummary::derive(&total, n, secs, secs)),
            steps: mailbench::smtp::steps::STEPS,
            self_report: SelfReport::default(),
            total,
            series,
        });
        r.extra.insert(
            "shard".into(),
            serde_json::json!({"index": index, "count": agents, "label": format!("{index}/{agents}")}),
        );
        r.write(&dir.join(format!("agent-{index}.json")))?;
    }
    Ok(())
}
