//! The human summary printed at the end of a run, rendered from the results document only
//! (so it shows exactly what the file holds).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::stats::kind::{self, Layout};
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

fn num(r: &Results, key: &str) -> f64 {
    r.summary.number(key).unwrap_or(0.0)
}

/// An optional count, or `-` when there is none.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// One row of the MTA table: its label and how to read it from a sample.
type SutRow = (&'static str, fn(&crate::stats::SutPoint) -> Option<f64>);

/// The system under test per interval, as averages and peaks over the run's series.
fn sut_table(out: &mut String, series: &[crate::stats::IntervalPoint], what: &str) {
    let points: Vec<&crate::stats::SutPoint> =
        series.iter().filter_map(|p| p.relay.sut.as_ref()).collect();
    if points.is_empty() {
        return;
    }
    let rows: [SutRow; 10] = [
        ("cpu user, % of a core", |p| Some(p.cpu_user_pct)),
        ("cpu system, % of a core", |p| Some(p.cpu_sys_pct)),
        ("disk read, KiB/s", |p| Some(p.read_kib_s)),
        ("disk write, KiB/s", |p| Some(p.write_kib_s)),
        ("memory (RSS), MiB", |p| Some(p.rss_kib as f64 / 1024.0)),
        ("processes", |p| Some(p.procs as f64)),
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
        // Rows only the machine has (the device, the load) are shown when read.
        let values: Vec<f64> = points.iter().filter_map(|p| f(p)).collect();
        if values.is_empty() {
            continue;
        }
        let avg = values.iter().sum::<f64>() / values.len() as f64;
        let peak = values.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(out, "    {name:<26} {avg:>10.1} {peak:>10.1}");
    }
}

/// Latency per step, one row each, in the order `steps` names them.
fn latency_table(out: &mut String, r: &Results, steps: Steps) {
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "latency ms", "count", "p50", "p90", "p99", "p99.9", "max"
    );
    for m in steps.metrics() {
        if let Some(h) = r.latency.get(steps.name(m)) {
            let _ = writeln!(
                out,
                "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                shown_step(r, steps.name(m)),
                h.count,
                ms(h.p50_us),
                ms(h.p90_us),
                ms(h.p99_us),
                ms(h.p999_us),
                ms(h.max_us)
            );
        }
    }
}

/// A step's name as printed: an LMTP run's greeting step is LHLO. The results file keeps
/// the key `ehlo` for it, so that LMTP files written before and after compare and merge.
fn shown_step<'a>(r: &Results, name: &'a str) -> &'a str {
    if name == "ehlo" && r.config["protocol"] == "lmtp" {
        "lhlo"
    } else {
        name
    }
}

/// The errors by class, step and code, with the distinct reasons sampled for each (the
/// first on the row, the others under it).
fn error_table(out: &mut String, r: &Results) {
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
    }
}

/// What the system under test (`what`: the MTA, the store) cost over the run, and its
/// table per interval, when it was observed.
fn sut_cost(out: &mut String, r: &Results, what: &str) {
    let Some(sut) = r.extra.get("sut") else {
        return;
    };
    let _ = writeln!(
        out,
        "  {:<10} cpu {:.2} s user + {:.2} s sys ({:.0} % of a core on average)",
        format!("{what} cost"),
        sut["cpu_user_s"].as_f64().unwrap_or(0.0),
        sut["cpu_sys_s"].as_f64().unwrap_or(0.0),
        sut["cpu_avg_pct"].as_f64().unwrap_or(0.0),
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
    sut_table(out, &r.series, what);
}

/// Renders the summary of any run, in the layout and with the steps its kind of run names
/// (a command this version does not know is shown as a generator's, with SMTP's steps).
pub fn summary(r: &Results, headline: &str) -> String {
    let kind = kind::find(&r.command).unwrap_or(&kind::send::SEND);
    let steps = kind.steps;
    match kind.layout {
        Layout::Generator => render(r, steps, headline),
        Layout::Sink => render_sink(r, headline),
        Layout::Relay => render_relay(r, steps, headline),
        Layout::Dns => render_dns(r, headline),
        Layout::Pop3 => render_pop3(r, steps, headline),
        Layout::Imap => render_imap(r, steps, headline),
        Layout::Profile => render_profile(r, steps, headline),
    }
}

/// Renders the summary of a generator's results; `steps` name its latency rows.
pub fn render(r: &Results, steps: Steps, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  messages   sent {}  accepted {}  rejected {}  errors {}  aborted {}",
        c.sent, c.accepted, c.rejected, c.errors, c.aborted
    );
    let unstarted = num(r, "unstarted");
    if unstarted > 0.0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the target or -c connections could not keep up)",
            num(r, "intended"),
            unstarted
        );
    }
    let _ = writeln!(
        out,
        "  recipients accepted {}  refused {}",
        c.rcpts.accepted, c.rcpts.refused
    );
    // Every rate of the line over one span, named (results before it had no span: then
    // the bytes are put over the same span as the messages, the active one if known).
    let span_s = r
        .summary
        .number("rate_span_s")
        .filter(|s| *s > 0.0)
        .or_else(|| r.summary.number("active_s"))
        .unwrap_or(r.duration_s)
        .max(1e-9);
    let span_name = match r.summary {
        Summary::Relay(_) => "the injection",
        _ => "the active span",
    };
    let _ = writeln!(
        out,
        "  rate       {:.1} msg/s   {:.0} msg/min   {:.2} MB accepted ({:.2} MB/s), over {span_name} ({:.3} s)",
        num(r, "msgs_per_sec"),
        num(r, "mpm"),
        c.bytes as f64 / 1e6,
        c.bytes as f64 / 1e6 / span_s,
        span_s
    );
    let _ = writeln!(
        out,
        "  connections {} (TLS {}), failed to connect {}",
        c.connections, c.tls_connections, c.connect_failures
    );
    let _ = writeln!(out);
    latency_table(&mut out, r, steps);
    let _ = writeln!(out);
    error_table(&mut out, r);
    render_tail(r, &mut out);
    out
}

/// The tool's own costs, warnings and thresholds: the end of every summary.
/// A lab store's lines: the effective limits that bound what it can carry, and its own
/// statistics (`--server-stats`) beside the client's counts.
fn store_lines(out: &mut String, extra: &BTreeMap<String, serde_json::Value>) {
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

fn render_tail(r: &Results, out: &mut String) {
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
    if let Some(w) = r.extra.get("warmup") {
        let _ = writeln!(
            out,
            "  warm-up    {:.1} s, {} messages sent, {} accepted: kept out of every figure above",
            w["duration_s"].as_f64().unwrap_or(0.0),
            w["counters"]["sent"],
            w["counters"]["accepted"]
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

/// Renders the summary of a sink run.
pub fn render_sink(r: &Results, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Sink(s) = &r.summary else {
        return out;
    };
    let _ = writeln!(
        out,
        "  received   messages {}  recipients {}  bytes {}  transactions {}",
        s.messages, s.recipients, s.bytes, s.transactions
    );
    let _ = writeln!(
        out,
        "  refused    transactions {}  negative replies {}  protocol errors {}  sessions {} (TLS {})",
        s.refused, s.rejected, s.protocol_errors, s.sessions, s.tls_sessions
    );
    let _ = writeln!(
        out,
        "  traced     missing {}  of them lost {}  duplicates {}  given up by the client {}  reply never delivered {}  null sender {}",
        s.missing, s.lost, s.duplicates, s.abandoned, s.unconfirmed, s.null_sender
    );
    let _ = writeln!(
        out,
        "  rate       {:.1} msg/s   {:.0} msg/min",
        s.msgs_per_sec, s.mpm
    );
    if let Some(h) = r.latency.get("e2e") {
        let _ = writeln!(
            out,
            "  end to end p50 {} ms  p99 {} ms  max {} ms ({} traced)",
            ms(h.p50_us),
            ms(h.p99_us),
            ms(h.max_us),
            h.count
        );
    }
    let injected: Vec<String> = s
        .faults
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if !injected.is_empty() {
        let _ = writeln!(out, "  faults     {}", injected.join("  "));
    }
    render_tail(r, &mut out);
    out
}

/// Renders the summary of a relay run; `steps` name the injection's latency rows.
pub fn render_relay(r: &Results, steps: Steps, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Relay(s) = &r.summary else {
        return out;
    };
    let i = &s.injection;
    let _ = writeln!(
        out,
        "  injected   sent {}  accepted {}  rejected {}  errors {}   {:.0} msg/min accepted",
        i.sent, i.accepted, i.rejected, i.errors, s.inject_mpm
    );
    let _ = writeln!(
        out,
        "  delivered  {} of {} recipients ({} messages)  bounced {}  lost {}  duplicates {}{}   drain {:.0} {}/min (last arrival {:.2} s after the {})",
        s.delivered,
        s.expected_recipients,
        s.delivered_messages,
        s.bounced,
        s.lost,
        s.duplicates,
        if s.drained { "" } else { "  NOT DRAINED" },
        s.drain_mpm,
        if s.drain_per_recipient {
            "recipients"
        } else {
            "messages"
        },
        s.drain_s,
        if s.release_at_s.is_some() {
            "release"
        } else {
            "first injection"
        }
    );
    if let (Some(held), Some(at)) = (s.flush_held, s.release_at_s) {
        let _ = writeln!(
            out,
            "  flush      {held} messages held during injection, released {at:.2} s after the first injection; the drain counts from there"
        );
    }
    let _ = writeln!(
        out,
        "  end to end p50 {:.3} ms  p99 {:.3} ms (from the end of each message's data)   max backlog {}{}",
        s.e2e_p50_ms,
        s.e2e_p99_ms,
        s.max_backlog,
        if s.drain_per_recipient {
            " recipients (messages arrived in several copies: drain and backlog count recipients)"
        } else {
            ""
        }
    );
    if s.delivered_before_accept > 0 {
        let _ = writeln!(
            out,
            "  before 250 {} of {} messages reached the receiver before the MTA's 250 reached the client (by up to {:.3} ms)",
            s.delivered_before_accept,
            s.delivered_messages,
            s.before_accept_max_ms.unwrap_or(0.0)
        );
    }
    if let (Some(p50), Some(p99)) = (s.e2e_recipient_p50_ms, s.e2e_recipient_p99_ms) {
        let _ = writeln!(
            out,
            "  per rcpt   end to end p50 {p50:.3} ms  p99 {p99:.3} ms (messages arrived in several copies: each recipient timed by its own)"
        );
    }
    let _ = writeln!(
        out,
        "  other mail bounces (null sender) {}  untraced {}  cut off by the end but delivered {}",
        s.bounces, s.untraced, s.aborted_delivered
    );
    if let Some(n) = s.receiver_rejected {
        let faults = r.extra["sink"]["faults"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  receiver   negative replies {n}{}: each a delivery the MTA had to try again or bounce",
            if faults.is_empty() {
                String::new()
            } else {
                format!(" (sink rules fired: {faults})")
            }
        );
    }
    if s.maillog_sent.is_some() {
        let _ = writeln!(
            out,
            "  MTA log    delivered {}  still queued {}",
            opt(s.maillog_sent),
            opt(s.queued_left)
        );
    }
    sut_cost(&mut out, r, "MTA");
    if let Some(rows) = r.extra.get("find_max").and_then(|v| v.as_array()) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:>10} {:>10} {:>10} {:>11} {:>6}  verdict",
            "rate/s", "drain MPM", "e2e p99", "max backlog", "lost"
        );
        for row in rows {
            let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  {:>10.1} {:>10.0} {:>10.1} {:>11} {:>6}  {}",
                f("rate_per_sec"),
                f("drain_mpm"),
                f("e2e_p99_ms"),
                f("max_backlog") as i64,
                f("lost") as u64,
                row["why"].as_str().unwrap_or("")
            );
        }
        let _ = writeln!(
            out,
            "  maximum sustainable rate: {:.1} msg/s ({:.0} msg/min)",
            s.max_sustainable_per_sec.unwrap_or(0.0),
            s.max_sustainable_mpm.unwrap_or(0.0)
        );
    }
    if let Some(rows) = r.extra.get("sweep").and_then(|v| v.as_array()) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:>8} {:>11} {:>10} {:>10} {:>10} {:>11} {:>6}",
            "sessions", "inject MPM", "drain MPM", "e2e p50", "e2e p99", "max backlog", "lost"
        );
        for row in rows {
            let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  {:>8} {:>11.0} {:>10.0} {:>10.1} {:>10.1} {:>11} {:>6}",
                f("concurrency") as u64,
                f("inject_mpm"),
                f("drain_mpm"),
                f("e2e_p50_ms"),
                f("e2e_p99_ms"),
                f("max_backlog") as i64,
                f("lost") as u64
            );
        }
        let _ = writeln!(out, "  (the detail below is the last level's)");
    }
    let _ = writeln!(out);
    out.push_str(&render(r, steps, "  injection detail:").replacen(
        "  injection detail:\n\n",
        "",
        1,
    ));
    out
}

/// `mailbench dns`'s report: questions, answers by code, latency by question type.
pub fn render_dns(r: &Results, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Dns(s) = &r.summary else {
        return out;
    };
    let _ = writeln!(
        out,
        "  questions  {}  answered {}  dropped {}  tcp {}  truncated {}  not queries {}   {:.1} per second",
        s.questions, s.answered, s.dropped, s.tcp, s.truncated, s.ignored, s.queries_per_sec
    );
    // The codes the summary has no key for (notimp, badvers, …), from the server's tally,
    // so that the line adds up to the answers.
    let others: String = r
        .extra
        .get("dns")
        .and_then(|d| d["by_rcode"].as_object())
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !["noerror", "nxdomain", "servfail", "refused", "formerr"].contains(&k.as_str())
        })
        .map(|(k, v)| format!("  {k} {}", v.as_u64().unwrap_or(0)))
        .collect();
    let _ = writeln!(
        out,
        "  replies    noerror {}  nxdomain {}  servfail {}  refused {}  formerr {}{others}   ({} zones)",
        s.noerror, s.nxdomain, s.servfail, s.refused, s.formerr, s.zones
    );
    let _ = writeln!(out);
    latency_table(&mut out, r, kind::dns::DNS.steps);
    let _ = writeln!(out);
    render_tail(r, &mut out);
    out
}

/// The DNS server's counts (`extra.dns`): questions by type, replies by code, the rules
/// that fired.
fn dns_lines(out: &mut String, d: &serde_json::Value) {
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
fn store_report(
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
    render_tail(r, &mut out);
    out
}

/// Renders the summary of a POP3 run; `steps` name its latency rows.
pub fn render_pop3(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Pop3(s) = &r.summary {
            pop3_lines(out, r, s);
        }
    })
}

fn pop3_lines(out: &mut String, r: &Results, s: &crate::stats::summary::Pop3Summary) {
    let _ = writeln!(
        out,
        "  sessions   {}  completed {}  refused (-ERR) {}  errors {}  aborted {}",
        s.sessions, s.completed, s.refused, s.errors, s.aborted
    );
    if s.unstarted > 0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the server or -c connections could not keep up)",
            s.intended, s.unstarted
        );
    }
    let _ = writeln!(
        out,
        "  messages   retrieved {}  deleted {}  {:.2} MB downloaded",
        s.retrieved,
        s.deleted,
        s.bytes as f64 / 1e6
    );
    let _ = writeln!(
        out,
        "  rate       {:.1} sessions/s   {:.1} messages/s retrieved, over the active span ({:.3} s: to the last completed session)",
        s.sessions_per_sec, s.retrieved_per_sec, s.active_s
    );
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  connections {} (TLS {}), failed to connect {}, refused at login {}",
        c.connections, c.tls_connections, c.connect_failures, c.mailbox.login_failures
    );
}

/// Renders the summary of an IMAP run; `steps` name its latency rows.
pub fn render_imap(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Imap(s) = &r.summary {
            imap_lines(out, r, s);
        }
    })
}

fn imap_lines(out: &mut String, r: &Results, s: &crate::stats::summary::ImapSummary) {
    let _ = writeln!(
        out,
        "  commands   {}  completed {}  refused (NO/BAD) {}  errors {}  aborted {}",
        s.commands, s.completed, s.refused, s.errors, s.aborted
    );
    if s.unstarted > 0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the server or -c connections could not keep up)",
            s.intended, s.unstarted
        );
    }
    // `populate --via imap` counts the octets it APPENDs: they went up, not down.
    let direction = if r.config["via"] == "append" {
        "uploaded"
    } else {
        "downloaded"
    };
    let _ = writeln!(
        out,
        "  messages   fetched {}  appended {}  expunged {}  {:.2} MB {direction}",
        s.fetched,
        s.appended,
        s.expunged,
        s.bytes as f64 / 1e6
    );
    let kinds: Vec<String> = r
        .counters
        .mailbox
        .violations
        .0
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let checked = r.config["check_state"].as_bool().unwrap_or(true);
    let _ = match (checked, kinds.is_empty()) {
        (false, _) => writeln!(out, "  state      not checked (--no-state-check)"),
        (true, true) => writeln!(out, "  state      0 violations"),
        (true, false) => writeln!(
            out,
            "  state      {} VIOLATIONS: {}",
            s.violations,
            kinds.join(", ")
        ),
    };
    let _ = writeln!(
        out,
        "  rate       {:.1} commands/s, over the active span ({:.3} s: to the last completed command)",
        s.commands_per_sec, s.active_s
    );
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  sessions   {} (TLS {}), failed to connect {}, refused at login {}",
        c.connections, c.tls_connections, c.connect_failures, c.mailbox.login_failures
    );
}

/// Renders the summary of a profile run: the capacity and the steps it stands on; `steps`
/// name its latency rows.
pub fn render_profile(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Profile(s) = &r.summary {
            profile_lines(out, r, s);
        }
    })
}

fn profile_lines(out: &mut String, r: &Results, s: &crate::stats::summary::ProfileSummary) {
    let cap = &r.extra.get("capacity").cloned().unwrap_or_default();
    let rules: Vec<&str> = cap["rules"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let rules = rules.join(" or ");
    let ramp = r.config["population"]["ramp_start"].is_number();
    let cut = cap["cut_short_at_users"]
        .as_u64()
        .map_or(String::new(), |u| {
            format!("; the step at {u} users was cut short (not judged)")
        });
    let _ = match (s.capacity_users, cap["broke_at_users"].as_u64(), ramp) {
        (Some(n), Some(b), _) => writeln!(
            out,
            "  capacity   {n} users: the largest step that held (no action failed, no rule broke: {rules}); it broke at {b} users"
        ),
        (Some(n), None, true) => writeln!(
            out,
            "  capacity   at least {n} users: every step held (no action failed, no rule broke: {rules}){cut}"
        ),
        (Some(n), None, false) => writeln!(
            out,
            "  capacity   {n} users held: no action failed, no rule broke ({rules})"
        ),
        (None, Some(b), true) => writeln!(
            out,
            "  capacity   below {b} users: the first step already broke (failed actions, or {rules})"
        ),
        (None, Some(b), false) => writeln!(
            out,
            "  capacity   {b} users did NOT hold (failed actions, or {rules})"
        ),
        (None, None, _) if !cut.is_empty() => writeln!(
            out,
            "  capacity   not found: the run was cut short before a step completed{cut}"
        ),
        (None, None, _) => writeln!(out, "  capacity   no step completed"),
    };
    let _ = writeln!(
        out,
        "  actions    {}  completed {}  refused {}  errors {}  overdue at the end {}  late {}  ({:.0}/min finished)",
        s.actions, s.completed, s.refused, s.errors, s.overdue, s.late, s.actions_per_min
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:>8} {:>11} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>10} {:>10}  verdict",
        "users",
        "actions/min",
        "mean ms",
        "p95 ms",
        "p99 ms",
        "failed",
        "overdue",
        "late",
        "store cpu%",
        "store MiB"
    );
    let mut observed = false;
    for st in cap["steps"].as_array().into_iter().flatten() {
        let m = &st["summary"];
        let f = |k: &str| m[k].as_f64().unwrap_or(0.0);
        let store =
            |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        observed |= st["store"].is_object();
        let _ = writeln!(
            out,
            "  {:>8} {:>11.0} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>6} {:>10} {:>10}  {}",
            st["users"].as_u64().unwrap_or(0),
            f("actions_per_min"),
            f("mean_ms"),
            f("p95_ms"),
            f("p99_ms"),
            st["failed"].as_u64().unwrap_or(0),
            m["overdue"].as_u64().unwrap_or(0),
            m["late"].as_u64().unwrap_or(0),
            store(m["sut_cpu"].as_f64(), 0),
            store(st["store"]["rss_kib"].as_f64().map(|k| k / 1024.0), 1),
            step_verdict(st)
        );
    }
    if !observed {
        let _ = writeln!(
            out,
            "  store      not observed (give --sut-pid with the store's main process)"
        );
    }
}

/// A step's verdict as the results file has it: held, broke (and why), or cut short.
fn step_verdict(st: &serde_json::Value) -> String {
    if st["cut_short"].as_bool() == Some(true) {
        return format!(
            "CUT SHORT after {:.1} s of {:.0} s: not judged",
            st["seconds"].as_f64().unwrap_or(0.0),
            st["planned_s"].as_f64().unwrap_or(0.0)
        );
    }
    let mut why: Vec<String> = st["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["ok"].as_bool() == Some(true))
        .filter_map(|r| r["expr"].as_str().map(str::to_string))
        .collect();
    let failed = st["failed"].as_u64().unwrap_or(0);
    if failed > 0 {
        why.push(format!(
            "{failed} of {} actions failed",
            st["summary"]["actions"].as_u64().unwrap_or(0)
        ));
    }
    if why.is_empty() {
        "ok".into()
    } else {
        format!("BROKE {}", why.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::{store_lines, sut_table};
    use crate::stats::{IntervalPoint, RelayPoint, SutPoint};

    #[test]
    fn the_mta_table_shows_averages_and_peaks_per_interval() {
        let point = |user: f64, rss_kib: u64| IntervalPoint {
            relay: RelayPoint {
                sut: Some(SutPoint {
                    cpu_user_pct: user,
                    rss_kib,
                    procs: 10,
                    ..SutPoint::default()
                }),
                ..RelayPoint::default()
            },
            ..IntervalPoint::default()
        };
        let mut out = String::new();
        sut_table(&mut out, &[point(100.0, 1024), point(300.0, 3072)], "MTA");
        let row = |name: &str| {
            out.lines()
                .find(|l| l.trim_start().starts_with(name))
                .map(|l| l.split_whitespace().rev().take(2).collect::<Vec<_>>())
        };
        assert_eq!(row("cpu user"), Some(vec!["300.0", "200.0"]), "{out}");
        assert_eq!(row("memory"), Some(vec!["3.0", "2.0"]), "{out}");
        assert_eq!(row("processes"), Some(vec!["10.0", "10.0"]), "{out}");
    }

    #[test]
    fn issue_25_13_every_rate_of_the_send_line_is_over_one_named_span() {
        // Steps of the protocol's kind; the rate line does not depend on which.
        const STEPS: crate::stats::Steps = crate::stats::Steps(&["connect", "total"]);
        use crate::stats::Recorder;
        use crate::stats::results::{Results, RunParts, SelfReport};
        use crate::stats::summary::{SendSummary, Summary};
        let mut total = Recorder::new();
        total.counters.sent = 1000;
        total.counters.accepted = 1000;
        total.counters.bytes = 2_000_000;
        // The last transaction ended 2 s in; closing the connections took the run to 20 s.
        let summary = Summary::Send(SendSummary::derive(&total, 1000, 20.0, 2.0));
        let r = Results::assemble(RunParts {
            command: "send",
            run_id: 1,
            started_us: 0,
            duration_s: 20.0,
            config: serde_json::json!({}),
            summary,
            steps: STEPS,
            self_report: SelfReport::default(),
            total,
            series: Vec::new(),
        });
        let out = super::render(&r, STEPS, "send");
        let want = "rate       500.0 msg/s   30000 msg/min   2.00 MB accepted (1.00 MB/s), over the active span (2.000 s)";
        assert!(out.contains(want), "expected {want:?} in:\n{out}");
    }

    /// Every kind of run in the registry: a results file of it is read back to the same
    /// summary, and shown in its own layout, headline to tail.
    #[test]
    fn every_kind_of_run_reads_back_and_renders() {
        use crate::stats::Recorder;
        use crate::stats::kind::KINDS;
        use crate::stats::results::{Results, RunParts, SelfReport};
        let dir = std::env::temp_dir().join(format!("mailbench-kinds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for k in KINDS {
            let summary = crate::stats::kind::tests::sample(k);
            let r = Results::assemble(RunParts {
                command: k.name,
                run_id: 1,
                started_us: 0,
                duration_s: 1.0,
                config: serde_json::json!({}),
                summary: summary.clone(),
                steps: k.steps,
                self_report: SelfReport::default(),
                total: Recorder::new(),
                series: Vec::new(),
            });
            let path = dir.join(format!("{}.json", k.name));
            r.write(&path).expect("write");
            let back = Results::read(&path).expect("read back");
            assert_eq!(back.summary, summary, "{}", k.name);
            let out = super::summary(&back, k.name);
            assert!(out.starts_with(&format!("{}\n\n  ", k.name)), "{out}");
            assert!(
                out.contains("\n  tool       cpu "),
                "{}: no tail in\n{out}",
                k.name
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A mailbox run's rate names its span: 200 commands done 0.045 s in, while a refused
    /// login (the server's auth delay) took the run to 1.53 s, is 4,444 commands/s over
    /// the 0.045 s the commands took — said so, not left to look like 200 over 1.53 s.
    #[test]
    fn a_mailbox_rate_names_its_active_span() {
        const STEPS: crate::stats::Steps = crate::stats::Steps(&["connect", "total"]);
        use crate::stats::Recorder;
        use crate::stats::results::{Results, RunParts, SelfReport};
        use crate::stats::summary::{ImapSummary, Pop3Summary, Summary};
        let mut total = Recorder::new();
        total.counters.sent = 200;
        total.counters.accepted = 200;
        let parts = |command, summary| RunParts {
            command,
            run_id: 1,
            started_us: 0,
            duration_s: 1.53,
            config: serde_json::json!({}),
            summary,
            steps: STEPS,
            self_report: SelfReport::default(),
            total: total.clone(),
            series: Vec::new(),
        };
        let imap = Summary::Imap(ImapSummary::derive(&total, 200, 1.53, 0.045));
        let out = super::render_imap(&Results::assemble(parts("imap", imap)), STEPS, "imap");
        let want = "rate       4444.4 commands/s, over the active span (0.045 s: to the last completed command)";
        assert!(out.contains(want), "expected {want:?} in:\n{out}");
        let pop3 = Summary::Pop3(Pop3Summary::derive(&total, 200, 1.53, 0.045));
        let out = super::render_pop3(&Results::assemble(parts("pop3", pop3)), STEPS, "pop3");
        let want = "over the active span (0.045 s: to the last completed session)";
        assert!(out.contains(want), "expected {want:?} in:\n{out}");
    }

    /// The replies line adds up to the answers: a code the summary has no key for
    /// (BADVERS for an EDNS version 1 question) is printed from the server's tally.
    #[test]
    fn the_dns_replies_line_shows_every_code() {
        const STEPS: crate::stats::Steps = crate::stats::Steps(&["answer"]);
        use crate::stats::Recorder;
        use crate::stats::dns::DnsSummary;
        use crate::stats::results::{Results, RunParts, SelfReport};
        use crate::stats::summary::Summary;
        let summary = Summary::Dns(DnsSummary {
            questions: 6,
            answered: 6,
            noerror: 3,
            nxdomain: 2,
            ..DnsSummary::default()
        });
        let mut r = Results::assemble(RunParts {
            command: "dns",
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config: serde_json::json!({}),
            summary,
            steps: STEPS,
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series: Vec::new(),
        });
        r.extra.insert(
            "dns".into(),
            serde_json::json!({"by_rcode": {"noerror": 3, "nxdomain": 2, "badvers": 1}}),
        );
        let out = super::render_dns(&r, "dns");
        assert!(
            out.contains("formerr 0  badvers 1"),
            "expected badvers 1 in the replies line:\n{out}"
        );
    }

    #[test]
    fn no_mta_samples_no_table() {
        let mut out = String::new();
        sut_table(&mut out, &[IntervalPoint::default()], "MTA");
        assert_eq!(out, "");
    }

    #[test]
    fn a_lab_store_shows_its_limits_and_its_own_counts() {
        let extra = serde_json::json!({
            "store_limits": {"pop3 mail_max_userip_connections": "100000"},
            "store_stats": [
                {"name": "logins", "count": 4, "mean_us": 52.6, "p50_us": 50, "p95_us": 60, "max_us": 61},
                {"name": "deliveries", "count": 6, "mean_us": 1216.0, "p50_us": 900, "p95_us": 2000, "max_us": 2100}
            ]
        });
        let extra = serde_json::from_value(extra).expect("a map");
        let mut out = String::new();
        store_lines(&mut out, &extra);
        assert_eq!(
            out,
            "  store limits pop3 mail_max_userip_connections 100000\n  store's own count since it started: logins 4 (mean 0.053 ms)  deliveries 6 (mean 1.216 ms)\n"
        );
        let mut none = String::new();
        store_lines(&mut none, &Default::default());
        assert_eq!(none, "", "no lab, no store lines");
    }
}
