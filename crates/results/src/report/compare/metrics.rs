//! What `compare` puts side by side, read from a results document (or one of its rounds,
//! which has the same keys): the headline rates and latencies, failures and loss, each
//! phase's p50 and p99, the server's CPU, disk, memory and processes, and the tool's CPU.

use serde_json::Value;

/// Which way is good for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// A rate: more is faster.
    Higher,
    /// A time: less is faster.
    Lower,
    /// A count of failures or a resource: less is better.
    Less,
}

/// Summary keys compared, in reading order, with their direction.
const SUMMARY: &[(&str, Better)] = &[
    ("mpm", Better::Higher),
    ("inject_mpm", Better::Higher),
    ("drain_mpm", Better::Higher),
    ("max_sustainable_mpm", Better::Higher),
    ("msgs_per_sec", Better::Higher),
    ("sessions_per_sec", Better::Higher),
    ("retrieved_per_sec", Better::Higher),
    ("commands_per_sec", Better::Higher),
    ("actions_per_min", Better::Higher),
    ("capacity_users", Better::Higher),
    ("p50_ms", Better::Lower),
    ("p99_ms", Better::Lower),
    ("mean_ms", Better::Lower),
    ("p95_ms", Better::Lower),
    ("e2e_p50_ms", Better::Lower),
    ("e2e_p99_ms", Better::Lower),
    ("lag_p99_ms", Better::Lower),
    ("drain_s", Better::Lower),
    ("last_arrival_after_injection_s", Better::Lower),
    ("max_backlog", Better::Less),
    ("unstarted", Better::Less),
    ("overdue", Better::Less),
    ("stuck_users", Better::Less),
    ("failed", Better::Less),
    ("errors", Better::Less),
    ("rejected", Better::Less),
    ("refused", Better::Less),
    ("lost", Better::Less),
    ("damaged", Better::Less),
    ("duplicates", Better::Less),
    ("fault_duplicated_messages", Better::Less),
    ("violations", Better::Less),
    ("late", Better::Less),
    ("fsyncs_per_msg", Better::Less),
    ("files_created_per_msg", Better::Less),
    ("renames_per_msg", Better::Less),
    ("unlinks_per_msg", Better::Less),
    ("bytes_written_per_msg", Better::Less),
    ("ctx_switches_per_msg", Better::Less),
];

/// The rate that decides `--fail-if-slower`: the first of these a run has.
pub const PRIMARY: &[&str] = &[
    "drain_mpm",
    "mpm",
    "commands_per_sec",
    "sessions_per_sec",
    "actions_per_min",
    "msgs_per_sec",
];

/// One compared figure of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Row name (`summary key`, `p99(phase)`, `server cpu ms/msg`, …).
    pub name: String,
    /// Which way is good.
    pub better: Better,
    /// The value.
    pub value: f64,
    /// A latency read from a microsecond histogram: two values within its resolution
    /// (see [`resolution_ms`]) cannot be told apart.
    pub from_hist: bool,
}

/// The smallest difference between two latencies (ms) read from the run's histograms
/// that means anything: the width of the histogram's bucket holding the larger of them,
/// at least the microsecond they are recorded in.
pub fn resolution_ms(a: f64, b: f64) -> f64 {
    let us = (a.abs().max(b.abs()) * 1000.0).round() as u64;
    let h = crate::stats::recorder::new_histogram();
    h.equivalent_range(us).max(1) as f64 / 1000.0
}

/// Every figure of a results document (or round), in reading order.
pub fn figures(doc: &Value) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut push_as = |name: String, better, value: Option<f64>, from_hist: bool| {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            out.push(Figure {
                name,
                better,
                value,
                from_hist,
            });
        }
    };
    let summary = &doc["summary"];
    for (key, better) in SUMMARY {
        // Every `_ms` figure of a summary is a histogram's percentile or mean.
        push_as(
            (*key).to_string(),
            *better,
            summary[*key].as_f64(),
            key.ends_with("_ms"),
        );
    }
    if let Some(latency) = doc["latency"].as_object() {
        for (metric, h) in latency {
            for (q, field) in [("p50", "p50_us"), ("p99", "p99_us")] {
                push_as(
                    format!("{q}({metric}) ms"),
                    Better::Lower,
                    h[field].as_f64().map(|us| us / 1000.0),
                    true,
                );
            }
        }
    }
    let mut push = |name: String, better, value: Option<f64>| push_as(name, better, value, false);
    let messages = [
        "delivered_messages",
        "accepted",
        "messages",
        "commands",
        "sessions",
    ]
    .iter()
    .find_map(|k| summary[*k].as_f64())
    .filter(|n| *n > 0.0);
    let cpu_s = |o: &Value| Some(o["cpu_user_s"].as_f64()? + o["cpu_sys_s"].as_f64()?);
    let sut = &doc["extra"]["sut"];
    push(
        "server cpu % of a core".into(),
        Better::Less,
        sut["cpu_avg_pct"].as_f64(),
    );
    push(
        "server cpu ms/unit".into(),
        Better::Less,
        cpu_s(sut).zip(messages).map(|(c, n)| c * 1000.0 / n),
    );
    // Which of the server's processes got more expensive (seeds 000 and 004 read `top`):
    // each process name's CPU per unit, as the tree's (names that used none left out).
    for r in sut["by_process"].as_array().into_iter().flatten() {
        if let (Some(name), Some(c)) = (r["name"].as_str(), r["cpu_s"].as_f64())
            && c > 0.0
        {
            push(
                format!("server cpu ms/unit: {name}"),
                Better::Less,
                messages.map(|n| c * 1000.0 / n),
            );
        }
    }
    for (key, name) in [
        ("disk_read_kib_per_s", "server disk read KiB/s"),
        ("disk_write_kib_per_s", "server disk write KiB/s"),
        ("peak_pss_kib", "server peak PSS KiB"),
        ("peak_rss_kib", "server peak RSS KiB"),
        ("peak_procs", "server peak processes"),
        ("peak_shared_kib", "server peak shared KiB"),
        ("rss_per_proc_kib", "server RSS KiB/process"),
        ("disk_read_calls_per_s", "server read calls/s"),
        ("disk_write_calls_per_s", "server write calls/s"),
        ("major_faults_per_s", "server major faults/s"),
        // Counted at mailbench's clients (loopback keeps no per-process count).
        ("net_in_bytes_per_s", "server net in bytes/s"),
        ("net_out_bytes_per_s", "server net out bytes/s"),
    ] {
        push(name.into(), Better::Less, sut[key].as_f64());
    }
    // A server's rates are over the time it was watched (`watched_s`; files written
    // before it have their rates over the run).
    let watched = sut["watched_s"].as_f64().or(doc["duration_s"].as_f64());
    let per_unit = |v: Option<f64>| {
        v.zip(watched)
            .zip(messages)
            .map(|((rate, secs), n)| rate * secs / n)
    };
    push(
        "server disk write KiB/unit".into(),
        Better::Less,
        per_unit(sut["disk_write_kib_per_s"].as_f64()),
    );
    push(
        "queue device writes/unit".into(),
        Better::Less,
        per_unit(sut["device_write_iops"].as_f64()),
    );
    // Seed 002's figure: what an MTA asks the DNS for each recipient it delivers.
    push(
        "dns questions per recipient".into(),
        Better::Less,
        summary["dns_queries"]
            .as_f64()
            .zip(summary["delivered"].as_f64().filter(|n| *n > 0.0))
            .map(|(q, n)| q / n),
    );
    // Each a delivery the server had to try again (a relay's receiver refusing).
    push(
        "receiver negative replies".into(),
        Better::Less,
        doc["extra"]["sink"]["rejected"].as_f64(),
    );
    let tool = &doc["self"];
    push(
        "mailbench cpu % of a core".into(),
        Better::Less,
        tool["cpu_avg_pct"].as_f64(),
    );
    push(
        "mailbench cpu µs/unit".into(),
        Better::Less,
        cpu_s(tool).zip(messages).map(|(c, n)| c * 1e6 / n),
    );
    push(
        "mailbench peak RSS KiB".into(),
        Better::Less,
        tool["peak_rss_kib"].as_f64(),
    );
    out
}

/// The per-interval throughput of a results document, for batch means when a side has
/// one run: delivered per second where the run delivers (relay), else accepted.
pub fn interval_rates(doc: &Value) -> Vec<f64> {
    let Some(series) = doc["series"].as_array() else {
        return Vec::new();
    };
    let delivered = series.iter().any(|p| p.get("delivered").is_some());
    series
        .iter()
        .filter_map(|p| {
            if delivered {
                let dt = p["dt_s"].as_f64().filter(|d| *d > 0.0)?;
                Some(p["delivered"].as_f64().unwrap_or(0.0) / dt)
            } else {
                p["msgs_per_sec"].as_f64()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_come_from_summary_latency_server_and_tool() {
        let doc = serde_json::json!({
            "summary": {"mpm": 6000.0, "accepted": 1000, "lost": 0, "intended": 5},
            "latency": {"total": {"p50_us": 1500, "p99_us": 9000}},
            "duration_s": 4.0,
            "extra": {"sut": {"cpu_avg_pct": 50.0, "cpu_user_s": 1.5, "cpu_sys_s": 0.5,
                              "by_process": [{"name": "smtpd", "cpu_s": 1.25}, {"name": "pickup", "cpu_s": 0.0},
                                             {"name": "reaped by qmail-smtpd", "cpu_s": 0.5}],
                              "disk_write_kib_per_s": 500.0, "device_write_iops": 250.0,
                              "net_in_bytes_per_s": 1200.0, "net_out_bytes_per_s": 64000.0},
                      "sink": {"rejected": 7}},
            "self": {"cpu_avg_pct": 5.0, "cpu_user_s": 0.01, "cpu_sys_s": 0.01, "peak_rss_kib": 9000},
        });
        let f = figures(&doc);
        let get = |n: &str| f.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("mpm"), Some(6000.0));
        assert_eq!(get("lost"), Some(0.0));
        assert_eq!(get("intended"), None, "not a compared figure");
        assert_eq!(get("p50(total) ms"), Some(1.5));
        assert_eq!(get("p99(total) ms"), Some(9.0));
        assert_eq!(get("server cpu ms/unit"), Some(2.0));
        // Each process name's CPU per message as the tree's: 1.25 s over 1000 messages.
        assert_eq!(get("server cpu ms/unit: smtpd"), Some(1.25));
        assert_eq!(get("server cpu ms/unit: reaped by qmail-smtpd"), Some(0.5));
        assert_eq!(
            get("server cpu ms/unit: pickup"),
            None,
            "a name that used none"
        );
        let names: Vec<&str> = f.iter().map(|x| x.name.as_str()).collect();
        let at = |n: &str| names.iter().position(|x| *x == n);
        assert!(
            at("server cpu ms/unit") < at("server cpu ms/unit: smtpd"),
            "the names under the tree's row, busiest first: {names:?}"
        );
        assert_eq!(get("server disk write KiB/unit"), Some(2.0));
        assert_eq!(get("queue device writes/unit"), Some(1.0));
        assert_eq!(get("receiver negative replies"), Some(7.0));
        assert_eq!(get("server net in bytes/s"), Some(1200.0));
        assert_eq!(get("server net out bytes/s"), Some(64000.0));
        assert_eq!(
            get("dns questions per recipient"),
            None,
            "a run without DNS"
        );
        let dns = serde_json::json!({"summary": {"dns_queries": 508, "delivered": 254}});
        assert_eq!(
            figures(&dns)
                .iter()
                .find(|x| x.name == "dns questions per recipient")
                .map(|x| x.value),
            Some(2.0)
        );
        assert_eq!(get("mailbench cpu µs/unit"), Some(20.0));
        // Issue 40: the server's rates are over the time it was watched (10 s, where the
        // injection took 4): its KiB per message is rate × 10 s / messages.
        let watched = serde_json::json!({
            "summary": {"accepted": 1000}, "duration_s": 4.0,
            "extra": {"sut": {"watched_s": 10.0, "disk_write_kib_per_s": 500.0}},
        });
        assert_eq!(
            figures(&watched)
                .iter()
                .find(|x| x.name == "server disk write KiB/unit")
                .map(|x| x.value),
            Some(5.0)
        );
        assert_eq!(f[0].name, "mpm", "headline first");
        let hist = |n: &str| f.iter().find(|x| x.name == n).map(|x| x.from_hist);
        assert_eq!(hist("p99(total) ms"), Some(true));
        assert_eq!(hist("mpm"), Some(false));
    }

    #[test]
    fn issue_25_13_the_resolution_is_a_microsecond_below_two_ms_and_a_bucket_above() {
        assert_eq!(resolution_ms(0.0, 0.001), 0.001);
        assert_eq!(resolution_ms(1.5, 1.2), 0.001);
        // 3 significant figures: 100 ms sits in a bucket 64 µs wide.
        assert_eq!(resolution_ms(100.0, 99.0), 0.064);
    }
}
