//! The pieces every text summary shares: the latency and error tables, the system under
//! test's cost, a lab store's lines, the DNS server's counts, and the tail (the tool's own
//! cost, warnings, notes, thresholds) that ends every summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::stats::{Results, Steps};

/// Microseconds as milliseconds, to the microsecond.
pub(super) fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// A summary's number by its key, 0 when it has none.
pub(super) fn num(r: &Results, key: &str) -> f64 {
    r.summary.number(key).unwrap_or(0.0)
}

/// `--settle`'s line under a table of steps (a sweep's levels, a profile's ramp): what
/// each `what`'s settle did (`each` says it for one row), kept out of its figures;
/// nothing when no row has a settle.
pub(super) fn settles(
    out: &mut String,
    rows: &[serde_json::Value],
    what: &str,
    each: impl Fn(&serde_json::Value) -> String,
) {
    let each: Vec<String> = rows
        .iter()
        .filter(|row| row.get("settle").is_some_and(|s| s.is_object()))
        .map(each)
        .collect();
    if !each.is_empty() {
        let _ = writeln!(
            out,
            "  settle     kept out of each {what}'s figures ({})",
            each.join("; ")
        );
    }
}

/// An optional count, or `-` when there is none.
pub(super) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// One row of the MTA table: its label and how to read it from a sample.
type SutRow = (&'static str, fn(&crate::stats::SutPoint) -> Option<f64>);

/// The system under test per interval, as averages and peaks over the run's series: the
/// average weighs each interval by its length (a rate's average is the run's count over
/// the time, as the line above says it), the peak is the busiest interval.
pub(super) fn sut_table(out: &mut String, series: &[crate::stats::IntervalPoint], what: &str) {
    let points: Vec<(f64, &crate::stats::SutPoint)> = series
        .iter()
        .filter_map(|p| Some((p.dt_s, p.relay.sut.as_ref()?)))
        .collect();
    if points.is_empty() {
        return;
    }
    let rows: [SutRow; 17] = [
        ("cpu user, % of a core", |p| Some(p.cpu_user_pct)),
        ("cpu system, % of a core", |p| Some(p.cpu_sys_pct)),
        ("disk read, KiB/s", |p| Some(p.read_kib_s)),
        ("disk write, KiB/s", |p| Some(p.write_kib_s)),
        ("memory (PSS), MiB", |p| {
            p.pss_kib.map(|k| k as f64 / 1024.0)
        }),
        ("memory (RSS summed), MiB", |p| {
            Some(p.rss_kib as f64 / 1024.0)
        }),
        ("of it shared, MiB", |p| {
            p.shared_kib.map(|k| k as f64 / 1024.0)
        }),
        ("processes", |p| Some(p.procs as f64)),
        ("read calls/s", |p| p.read_calls_s),
        ("write calls/s", |p| p.write_calls_s),
        ("major page faults/s", |p| p.major_faults_s),
        ("network in, bytes/s", |p| p.net_in_bytes_s),
        ("network out, bytes/s", |p| p.net_out_bytes_s),
        ("queue device reads/s", |p| p.device_read_iops),
        ("queue device writes/s", |p| p.device_write_iops),
        ("queue device busy, %", |p| p.device_util_pct),
        ("load average (1 min)", |p| p.load1),
    ];
    let _ = writeln!(
        out,
        "  {:<28} {:>10} {:>10}",
        format!("{what} per interval"),
        "average",
        "peak"
    );
    for (name, f) in rows {
        // Rows read only in some runs (the device, the load, the clients' byte count, the
        // proportional set size) are shown when read, averaged over the intervals read.
        let values: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|(dt, p)| Some((*dt, f(p)?)))
            .collect();
        if values.is_empty() {
            continue;
        }
        // Points without a length (hand-made) weigh alike.
        let time: f64 = values.iter().map(|(dt, _)| dt).sum();
        let weight = |dt: f64| if time > 0.0 { dt } else { 1.0 };
        let avg = values.iter().map(|(dt, v)| weight(*dt) * v).sum::<f64>()
            / values.iter().map(|(dt, _)| weight(*dt)).sum::<f64>();
        let peak = values.iter().map(|(_, v)| *v).fold(f64::MIN, f64::max);
        let _ = writeln!(out, "    {name:<26} {avg:>10.1} {peak:>10.1}");
    }
    if points.iter().any(|(_, p)| p.pss_kib.is_some()) {
        let _ = writeln!(
            out,
            "    (PSS counts each page shared by N processes 1/N in each: the memory they hold; RSS summed counts shared pages in every process)"
        );
    }
}

/// A step's latency in the table, ms: a sample is kept in whole µs, rounded down, so one
/// of 0 µs (the results file's 0) was under 1 µs, printed `<0.001`, not a 0 that reads
/// as "no wait measured".
fn step_ms(us: u64) -> String {
    if us == 0 { "<0.001".into() } else { ms(us) }
}

/// Latency per step, one row each, in the order `steps` names them; when a figure was
/// under 1 µs, a note says why (a reply already read when its wait began), and with
/// pipelining which steps carry the round trip.
pub(super) fn latency_table(out: &mut String, r: &Results, steps: Steps) {
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "latency ms", "count", "p50", "p90", "p99", "p99.9", "max"
    );
    // The steps whose median was under 1 µs.
    let mut under_1us = Vec::new();
    for m in steps.metrics() {
        if let Some(h) = r.latency.get(steps.name(m)) {
            if h.count > 0 && h.p50_us == 0 {
                under_1us.push(steps.name(m));
            }
            let _ = writeln!(
                out,
                "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                shown_step(r, steps.name(m)),
                h.count,
                step_ms(h.p50_us),
                step_ms(h.p90_us),
                step_ms(h.p99_us),
                step_ms(h.p999_us),
                step_ms(h.max_us)
            );
        }
    }
    if under_1us.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  (a step is timed from the reply before it, or the connect, to its own reply: <0.001, under 1 µs, is a reply\n   already there when its wait began, as a greeting sent at once)"
    );
    let grouped = ["mail", "rcpt", "data"];
    if r.config["pipelining"] == true && under_1us.iter().any(|s| grouped.contains(s)) {
        let _ = writeln!(
            out,
            "  (pipelined: MAIL, RCPT and DATA go in one write and their replies come back together, so the round trip\n   is in the group's first reply, mail's, or data_end's when the next transaction went with it; rcpt and\n   data show the wait after it, none)"
        );
    }
}

/// A step's name as printed: an LMTP run's greeting step is LHLO. The results file keeps
/// the key `ehlo` for it, so that LMTP files written before and after compare and merge.
pub(super) fn shown_step<'a>(r: &Results, name: &'a str) -> &'a str {
    if name == "ehlo" && r.config["protocol"] == "lmtp" {
        "lhlo"
    } else {
        name
    }
}

/// The errors by class, step and code, with the distinct reasons sampled for each (the
/// first on the row, the others under it).
pub(super) fn error_table(out: &mut String, r: &Results) {
    if r.errors.is_empty() {
        let _ = writeln!(out, "  errors     none");
    } else {
        let _ = writeln!(
            out,
            "  errors     {:<14} {:<13} {:>5} {:>9}  reasons seen",
            "class", "phase", "code", "count"
        );
        let cut = |t: &str| t.chars().take(90).collect::<String>();
        for e in &r.errors {
            let first = e.samples.first().or(e.sample.as_ref());
            let _ = writeln!(
                out,
                "             {:<14} {:<13} {:>5} {:>9}  {}",
                e.class,
                shown_step(r, &e.phase),
                e.code,
                e.count,
                cut(first.map_or("", |s| s.as_str()))
            );
            for more in e.samples.iter().skip(1) {
                let _ = writeln!(out, "{:>58}{}", "", cut(more));
            }
        }
        if let Some(why) = banner_timeout_cause(r) {
            let _ = writeln!(out, "             {why}");
        }
    }
}

/// Why connections time out at the banner, when some did: TCP connected (the kernel
/// accepted them into the server's listen queue) and no server process greeted them. A
/// server at its process limit does exactly that (Postfix's `default_process_limit` or
/// smtpd's maxproc, Dovecot's `process_limit`); a greeting delay (`postscreen_greet_wait`,
/// a tarpit) longer than the timeout is the other cause.
fn banner_timeout_cause(r: &Results) -> Option<String> {
    let n: u64 = r
        .errors
        .iter()
        .filter(|e| e.phase == "banner" && e.class == "timeout")
        .map(|e| e.count)
        .sum();
    (n > 0).then(|| {
        format!(
            "(the {n} banner timeouts connected and were never greeted: most often a server at its\n              process limit, e.g. Postfix's default_process_limit, Dovecot's process_limit, whose\n              kernel queued what no process took; else a greeting longer than the timeout)"
        )
    })
}

/// What the system under test (`what`: the MTA, the store) cost over the run, and its
/// table per interval, when it was observed.
pub(super) fn sut_cost(out: &mut String, r: &Results, what: &str) {
    let Some(sut) = r.extra.get("sut") else {
        return;
    };
    // Files written before issue 40 have no `watched_s`: their average says no more.
    let over = sut["watched_s"]
        .as_f64()
        .map_or(String::new(), |s| format!(" over the {s:.1} s watched"));
    let _ = writeln!(
        out,
        "  {:<10} cpu {:.2} s user + {:.2} s sys ({:.0} % of a core on average{over}, peak {:.0} %)",
        format!("{what} cost"),
        sut["cpu_user_s"].as_f64().unwrap_or(0.0),
        sut["cpu_sys_s"].as_f64().unwrap_or(0.0),
        sut["cpu_avg_pct"].as_f64().unwrap_or(0.0),
        sut["cpu_peak_pct"].as_f64().unwrap_or(0.0),
    );
    match (
        sut["queue_device"].as_str(),
        sut["queue_device_note"].as_str(),
    ) {
        (Some(dev), _) => {
            let _ = writeln!(
                out,
                "  queue dev  {dev}: {:.0} reads/s, {:.0} writes/s, busy {:.0} % on average (peak {:.0} %)",
                sut["device_read_iops"].as_f64().unwrap_or(0.0),
                sut["device_write_iops"].as_f64().unwrap_or(0.0),
                sut["device_util_pct"].as_f64().unwrap_or(0.0),
                sut["device_util_peak_pct"].as_f64().unwrap_or(0.0),
            );
        }
        (None, Some(note)) => {
            let _ = writeln!(out, "  queue dev  none watched: {note}");
        }
        (None, None) => {}
    }
    super::processes::by_process(out, sut, what);
    sut_table(out, &r.series, what);
}

/// A lab store's lines: the effective limits that bound what it can carry, and its own
/// statistics (`--server-stats`) beside the client's counts.
pub(super) fn store_lines(out: &mut String, extra: &BTreeMap<String, serde_json::Value>) {
    if let Some(serde_json::Value::Object(limits)) = extra.get("store_limits") {
        let parts: Vec<String> = limits
            .iter()
            .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
            .collect();
        let _ = writeln!(out, "  store limits {}", parts.join(", "));
    }
    let Some(serde_json::Value::Array(metrics)) = extra.get("store_stats") else {
        return;
    };
    let parts: Vec<String> = metrics
        .iter()
        .map(|m| {
            format!(
                "{} {} (mean {:.3} ms)",
                m["name"].as_str().unwrap_or("?"),
                m["count"].as_u64().unwrap_or(0),
                m["mean_us"].as_f64().unwrap_or(0.0) / 1000.0
            )
        })
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(
            out,
            "  store's own count since it started: {}",
            parts.join("  ")
        );
    }
}

/// The tool's own costs, warnings and thresholds: the end of every summary.
pub(super) fn render_tail(r: &Results, out: &mut String) {
    store_lines(out, &r.extra);
    if let Some(d) = r.extra.get("dns") {
        dns_lines(out, d);
    }
    let s = &r.self_report;
    let _ = writeln!(
        out,
        "  tool       cpu {:.2} s user + {:.2} s sys ({:.0} % of a core on average, peak {:.0} %), peak RSS {:.1} MiB",
        s.cpu_user_s,
        s.cpu_sys_s,
        s.cpu_avg_pct,
        s.cpu_peak_pct,
        s.peak_rss_kib as f64 / 1024.0
    );
    for w in &s.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    for (key, label) in [("preflight", "preflight"), ("notes", "note")] {
        for n in r
            .extra
            .get(key)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let _ = writeln!(out, "  {label:<10} {}", n.as_str().unwrap_or(""));
        }
    }
    if let Some(d) = r.extra.get("dkim") {
        let _ = writeln!(
            out,
            "  dkim       signed {} messages ({}), {:.1} µs of CPU each on average, {:.2} s in all",
            d["signed"],
            d["algorithm"].as_str().unwrap_or("?"),
            d["sign_cpu_us_mean"].as_f64().unwrap_or(0.0),
            d["sign_cpu_s"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(d) = r.extra.get("dkim_verify") {
        let _ = writeln!(
            out,
            "  dkim check passed {}  failed {}  unsigned {}  ({:.1} µs of CPU each){}",
            d["pass"],
            d["fail"],
            d["unsigned"],
            d["verify_cpu_us_mean"].as_f64().unwrap_or(0.0),
            d["first_failure"]
                .as_str()
                .map_or(String::new(), |w| format!("; first failure: {w}"))
        );
    }
    if let Some(s) = r.extra.get("store") {
        let _ = writeln!(
            out,
            "  store      stored {}{}  refused: 452 disk full {}  451 failed {}",
            s["stored"],
            if s["fsync"] == true { " (fsynced)" } else { "" },
            s["full"],
            s["failed"]
        );
    }
    if let Some(w) = r.extra.get("warmup") {
        let _ = writeln!(
            out,
            "  warm-up    {:.1} s, {} messages sent, {} accepted: kept out of every figure above",
            w["duration_s"].as_f64().unwrap_or(0.0),
            w["counters"]["sent"],
            w["counters"]["accepted"]
        );
    }
    let kept: Vec<&str> = ["mta_logs", "store_logs"]
        .iter()
        .filter_map(|k| r.extra.get(*k)?.as_array())
        .flatten()
        .filter_map(|p| p.as_str())
        .collect();
    if !kept.is_empty() {
        let _ = writeln!(
            out,
            "  logs       the servers' own, kept to check the figures against: {}",
            kept.join(", ")
        );
    }
    for t in &r.thresholds {
        let _ = writeln!(
            out,
            "  threshold  {:<28} {}  (value {:.3})",
            t.expr,
            if t.ok { "ok" } else { "BREACHED" },
            t.value
        );
    }
}

/// The DNS server's counts (`extra.dns`): questions by type, replies by code, the rules
/// that fired.
pub(super) fn dns_lines(out: &mut String, d: &serde_json::Value) {
    let pairs = |v: &serde_json::Value| -> String {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, n)| n.as_f64().unwrap_or(0.0) > 0.0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            })
            .unwrap_or_default()
    };
    let _ = writeln!(
        out,
        "  dns        {} questions: {}   replies: {}",
        d["questions"],
        pairs(&d["by_type"]),
        pairs(&d["by_rcode"])
    );
    if let Some(per) = d.get("per_message") {
        let _ = writeln!(
            out,
            "  dns/msg    {} per delivered message ({} per recipient)   answered in p50 {} ms  p99 {} ms   MTA deferrals blamed on DNS {}",
            pairs(per),
            pairs(&d["per_recipient"]),
            d["latency_p50_ms"],
            d["latency_p99_ms"],
            d["mta_deferred"]
        );
    }
    for f in d["faults"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  dns rule   {:<32} fired {}",
            f["rule"].as_str().unwrap_or(""),
            f["fired"]
        );
    }
}

/// A mail-store workload's report: the headline, the workload's own lines, then the
/// latency and error tables, the store's cost and the tail every command shares.
pub(super) fn store_report(
    r: &Results,
    steps: Steps,
    headline: &str,
    body: impl FnOnce(&mut String),
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    body(&mut out);
    let _ = writeln!(out);
    latency_table(&mut out, r, steps);
    let _ = writeln!(out);
    error_table(&mut out, r);
    sut_cost(&mut out, r, "store");
    super::store::resources(&mut out, r);
    render_tail(r, &mut out);
    out
}
