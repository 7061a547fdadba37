//! While a run goes: the live view on a real terminal (tmux, read back with capture-pane,
//! resized mid-run) and `/metrics` scraped and parsed by the Prometheus project's own
//! OpenMetrics parser (Debian's python3-prometheus-client), its final counters equal to
//! the results file's; without OpenMetrics in `Accept`, the Prometheus text format 0.0.4
//! that Prometheus's own `promtool check metrics` accepts; a relay's `/metrics` with its
//! delivery figures through the run and the hold.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::install::tool;
use crate::sink::Sink;
use crate::util::{TempDir, free_port, mailbench, require, results, sigterm, wait_until};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("run tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The live line shows the running figures and how far the run is; resizing the window
/// mid-run and the end of the run leave the summary whole.
#[test]
fn the_live_view_runs_on_a_terminal_and_leaves_the_summary_intact() {
    if require("tmux").is_none() {
        return;
    }
    let sink = Sink::start(&[]);
    let session = format!("mb-live-{}", std::process::id());
    let cmd = format!(
        "{} send {} --rate 300/s -z 4s; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_mailbench"),
        sink.target()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "150",
        "-y",
        "40",
        &cmd,
    ]);
    let pane = |s: &str| tmux(&["capture-pane", "-p", "-t", s]);
    let live = wait_until(Duration::from_secs(3), || {
        let p = pane(&session);
        p.contains("msg/s") && p.contains("% done")
    });
    let during = pane(&session);
    tmux(&["resize-window", "-t", &session, "-x", "70", "-y", "30"]);
    let ended = wait_until(Duration::from_secs(10), || pane(&session).contains("EXIT="));
    tmux(&["resize-window", "-t", &session, "-x", "150", "-y", "40"]);
    let after = pane(&session);
    tmux(&["kill-session", "-t", &session]);
    let _ = sink.stop();
    assert!(live, "no live line on the terminal:\n{during}");
    assert!(ended, "the run did not end:\n{after}");
    assert!(after.contains("EXIT=0"), "{after}");
    for line in [
        "mailbench send: 1200 messages to",
        "messages   sent 1200  accepted 1200",
        "latency ms",
        "total           1200",
    ] {
        assert!(
            after.contains(line),
            "expected {line:?} in the summary:\n{after}"
        );
    }
    assert!(
        !after.contains("% done"),
        "the live line was cleared before the summary:\n{after}"
    );
}

/// Parses an OpenMetrics text with the Prometheus client's parser; returns the samples as
/// `name{labels} value` lines (sorted labels), or the parser's complaint.
fn parse_openmetrics(text: &str) -> Result<Vec<String>, String> {
    let mut child = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse
for fam in parse(sys.stdin.read()):
    for s in fam.samples:
        labels = ','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))
        print(f'{s.name}{{{labels}}} {s.value}')",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3 ends");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The `Accept` header Prometheus 2.x scrapes with.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// `/metrics` as Prometheus scrapes it (OpenMetrics).
fn scrape(port: u16) -> Option<String> {
    scrape_with(port, Some(PROMETHEUS_ACCEPT)).map(|(_, body)| body)
}

/// `/metrics` with `accept` as the `Accept` header (none: no header): the response's
/// Content-Type and body.
fn scrape_with(port: u16, accept: Option<&str>) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{accept}\r\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let kind = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    head.starts_with("HTTP/1.1 200")
        .then(|| (kind, body.to_string()))
}

/// `promtool check metrics` (Prometheus's own linter) on `text`: its complaint, if any.
fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool ends");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn sample(samples: &[String], name_labels: &str) -> Option<f64> {
    samples
        .iter()
        .find_map(|l| l.strip_prefix(name_labels)?.trim().parse().ok())
}

/// `/metrics` during a send run parses as OpenMetrics and counts up; after the run, held
/// open, it has exactly the results file's counters and latency count.
#[test]
fn metrics_parse_while_the_run_goes_and_end_equal_to_the_results_file() {
    // The Prometheus project's OpenMetrics parser, in the system's Python.
    let client = Command::new("/usr/bin/python3")
        .args(["-c", "import prometheus_client"])
        .status();
    assert!(
        client.is_ok_and(|s| s.success()),
        "apt-get install python3-prometheus-client (scripts/install-deps.sh --for-tests)"
    );
    let sink = Sink::start(&[]);
    let dir = TempDir::new("metrics");
    let json = dir.0.join("r.json");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = mailbench()
        .args(["send", &sink.target(), "--rate", "400/s", "-z", "3s"])
        .args(["--prometheus", &addr, "--prometheus-hold", "30s", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start send");
    // Scraped until an interval has been published (the first comes after one second).
    let mut samples = Vec::new();
    let got = wait_until(Duration::from_secs(3), || {
        let Some(text) = scrape(port) else {
            return false;
        };
        samples = parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("the Prometheus parser refused /metrics: {e}\n{text}"));
        sample(&samples, "mailbench_messages_total{result=accepted}").is_some_and(|v| v > 0.0)
    });
    assert!(
        got,
        "no /metrics with accepted messages during the run: {samples:#?}"
    );
    let accepted_during =
        sample(&samples, "mailbench_messages_total{result=accepted}").expect("accepted counter");
    assert!(
        accepted_during > 0.0 && accepted_during < 1200.0,
        "{accepted_during}"
    );
    assert!(
        sample(
            &samples,
            "mailbench_latency_seconds_bucket{le=+Inf,phase=total}"
        )
        .is_some(),
        "latency histogram: {samples:#?}"
    );
    assert!(
        sample(&samples, "mailbench_in_flight{}").is_some(),
        "{samples:#?}"
    );

    // The run ends and holds /metrics open: it says so on stderr.
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while err.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
        if line.contains("serving the final /metrics") {
            break;
        }
        line.clear();
    }
    assert!(line.contains("serving the final /metrics"), "got {line:?}");
    // Issue 31: as Prometheus scrapes it, OpenMetrics, said in the Content-Type and
    // ended by `# EOF`; promtool reads only the 0.0.4 format (it refuses the `info` type).
    let (kind, end) = scrape_with(port, Some(PROMETHEUS_ACCEPT)).expect("/metrics after the run");
    assert_eq!(
        kind,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(end.ends_with("# EOF\n"), "{end}");
    let samples = parse_openmetrics(&end).unwrap_or_else(|e| panic!("{e}\n{end}"));
    // Issue 25 item 12: a scraper that does not ask for OpenMetrics (no Accept, or curl's
    // `*/*`) gets the text format 0.0.4, which promtool (Prometheus's own checker) passes
    // and the OpenMetrics parser refuses (no `# EOF`): the two really differ.
    tool("promtool", "prometheus");
    for accept in [None, Some("*/*"), Some("text/plain;version=0.0.4")] {
        let (kind, plain) = scrape_with(port, accept).expect("/metrics in the 0.0.4 format");
        assert_eq!(
            kind, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}: {plain}"
        );
        promtool_check(&plain)
            .unwrap_or_else(|e| panic!("promtool check metrics refused it: {e}\n{plain}"));
        assert!(
            plain.contains("mailbench_messages_total{result=\"accepted\"}"),
            "{plain}"
        );
        assert!(!plain.contains("# EOF"), "{plain}");
        assert!(parse_openmetrics(&plain).is_err(), "{plain}");
    }
    assert!(
        promtool_check(&end).is_err(),
        "promtool took OpenMetrics: {end}"
    );
    let r = results(&json);
    let c = &r["counters"];
    for (sample_name, key) in [
        ("mailbench_messages_total{result=sent}", "sent"),
        ("mailbench_messages_total{result=accepted}", "accepted"),
        ("mailbench_messages_total{result=rejected}", "rejected"),
        (
            "mailbench_recipients_total{result=accepted}",
            "rcpts_accepted",
        ),
        ("mailbench_connections_total{}", "connections"),
        ("mailbench_message_bytes_total{}", "bytes"),
    ] {
        assert_eq!(
            sample(&samples, sample_name),
            c[key].as_f64(),
            "{sample_name} against the results file's {key}"
        );
    }
    assert_eq!(
        sample(&samples, "mailbench_latency_seconds_count{phase=total}"),
        r["latency"]["total"]["count"].as_f64(),
        "latency count"
    );
    assert!(end.contains(&format!(
        "run_id=\"{}\"",
        r["run_id"].as_str().unwrap_or("?")
    )));
    sigterm(&child);
    let status = child.wait().expect("wait");
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM ends the hold, not the result"
    );
    let _ = sink.stop();
}

/// A sample's value in a Prometheus-format (or OpenMetrics) text: `name_labels` is the
/// exact text before the value (`name{labels}` as served).
fn value(text: &str, name_labels: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name_labels)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Issue 25 item 12: a relay's `/metrics` through a lab Postfix whose sink answers slowly
/// (a backlog builds): mid-run `recipients_total{result="delivered"}` is what arrived
/// (accepted minus the backlog, not the accepted count), and while held after the run
/// the relay's delivery, backlog, server CPU and in-flight gauges are still there (not
/// the embedded sink's `open_connections`), `delivered` equal to the results file's.
#[test]
fn issue_25_a_relays_metrics_show_its_deliveries_through_the_hold() {
    tool("promtool", "prometheus");
    if require("postfix").is_none() {
        return;
    }
    let dir = TempDir::new("relay-metrics");
    let json = dir.0.join("r.json");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = mailbench()
        .args(["relay", "--lab", "postfix", "--rate", "200/s", "-z", "3s"])
        .args(["--sink-rule", "data_end:delay=100ms", "-q"])
        .args(["--prometheus", &addr, "--prometheus-hold", "60s", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start relay");
    let delivered = r#"mailbench_recipients_total{result="delivered"}"#;
    let accepted = r#"mailbench_recipients_total{result="accepted"}"#;
    let mut text = String::new();
    let mut seen_backlog = false;
    let got = wait_until(Duration::from_secs(20), || {
        let Some(t) = scrape(port) else {
            return false;
        };
        text = t;
        let backlog = value(&text, "mailbench_backlog").unwrap_or(0.0);
        seen_backlog = backlog >= 10.0;
        seen_backlog && value(&text, delivered).is_some()
    });
    assert!(
        got,
        "no mid-run /metrics with a backlog of 10 or more:\n{text}"
    );
    let (d, a, b) = (
        value(&text, delivered).unwrap_or(-1.0),
        value(&text, accepted).unwrap_or(-1.0),
        value(&text, "mailbench_backlog").unwrap_or(-1.0),
    );
    let m = value(&text, "mailbench_delivered_messages").unwrap_or(-1.0);
    // One recipient a message: delivered recipients are the delivered messages, and with
    // the backlog make up what was accepted (the counts are read a moment apart).
    assert!(
        (d - m).abs() <= 2.0 && (d + b - a).abs() <= 2.0,
        "mid-run: expected delivered {delivered} = delivered messages {m} = accepted {a} - backlog {b}, got {d}\n{text}"
    );
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while err.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
        if line.contains("serving the final /metrics") {
            break;
        }
        line.clear();
    }
    assert!(line.contains("serving the final /metrics"), "got {line:?}");
    let end = scrape(port).expect("/metrics after the run");
    let r = results(&json);
    for gauge in [
        "mailbench_delivered_messages",
        "mailbench_backlog",
        "mailbench_server_cpu_percent",
        "mailbench_in_flight",
    ] {
        assert!(
            value(&end, gauge).is_some(),
            "{gauge} held after the run:\n{end}"
        );
    }
    assert!(
        !end.contains("open_connections"),
        "the embedded sink's gauge:\n{end}"
    );
    assert_eq!(
        value(&end, delivered),
        r["summary"]["delivered"].as_f64(),
        "held delivered against the results file's\n{end}"
    );
    assert_eq!(
        value(&end, "mailbench_delivered_messages"),
        r["summary"]["delivered_messages"].as_f64(),
        "{end}"
    );
    let (_, plain) = scrape_with(port, None).expect("/metrics without Accept");
    promtool_check(&plain).unwrap_or_else(|e| panic!("promtool: {e}\n{plain}"));
    sigterm(&child);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "SIGTERM ends the hold");
}

/// Issue 44: a split agent's live lines name its shard (`/metrics` labels its series with
/// it), so that agents' terminals side by side say which is which.
#[test]
fn a_split_agents_live_lines_name_its_shard() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let at = crate::util::split::start_in(Duration::from_millis(1200));
    let args = [
        "send",
        &target,
        "--shard",
        "1/2",
        "--run-id",
        "5a4d",
        "--start-at",
        &at,
        "--rate",
        "100/s",
        "-z",
        "2s",
    ];
    let out = mailbench().args(args).output().expect("mailbench send");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" msg/s ")).collect();
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.contains("s [shard 1/2] ")),
        "expected every live line to name [shard 1/2]:\n{err}"
    );
    let _ = sink.stop();
}
