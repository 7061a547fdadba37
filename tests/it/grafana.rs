//! Issue 31 (conventions): deploy/grafana/mailbench.json is a dashboard Grafana imports
//! (a datasource variable every panel and query points at, panels with grid positions and
//! targets), its PromQL parses with Prometheus's own `promtool check rules`, and every
//! series it queries is in real scrapes of the runs it is for — send, a sink, a relay
//! through a lab Postfix, POP3 and IMAP against a lab Dovecot — with the label values it
//! matches; and every family those scrapes export is on the dashboard.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::install::tool;
use crate::sink::Sink;
use crate::util::{TempDir, Terminated, free_port, mailbench, wait_until};

/// The dashboard as committed.
fn dashboard() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/mailbench.json");
    let text = std::fs::read_to_string(path).expect("deploy/grafana/mailbench.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every panel, those inside collapsed rows too.
fn panels(d: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut all = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        all.push(p);
        all.extend(p["panels"].as_array().into_iter().flatten());
    }
    all
}

/// Every PromQL expression: the targets' and the query variables'.
fn expressions(d: &serde_json::Value) -> Vec<String> {
    let mut exprs: Vec<String> = panels(d)
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .map(|t| t["expr"].as_str().expect("a target's expr").to_string())
        .collect();
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] == "query" {
            exprs.push(v["query"]["query"].as_str().expect("query").to_string());
        }
    }
    exprs
}

/// `(metric name, exact label matchers)` of every `mailbench_…` selector in `expr`;
/// matchers on dashboard variables (`=~"$x"`) or other operators are left out.
fn selectors(expr: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("mailbench_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].to_string();
        let mut matchers = Vec::new();
        if let Some(inner) = tail[end..].strip_prefix('{') {
            let close = inner.find('}').expect("a closed selector");
            for m in inner[..close].split(',') {
                if let Some((k, v)) = m.split_once("=\"")
                    && !k.ends_with(['!', '=', '~'])
                {
                    matchers.push((k.trim().to_string(), v.trim_end_matches('"').to_string()));
                }
            }
        }
        out.push((name, matchers));
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_dashboard_is_importable_and_its_queries_parse() {
    // The selector reader the scrape test relies on: exact matchers kept, variables not.
    assert_eq!(
        selectors(r#"sum(rate(mailbench_x_total{result="a",instance=~"$i"}[1m])) / mailbench_y"#),
        [
            (
                "mailbench_x_total".to_string(),
                vec![("result".to_string(), "a".to_string())]
            ),
            ("mailbench_y".to_string(), vec![]),
        ]
    );
    let d = dashboard();
    for key in ["title", "uid"] {
        assert!(d[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
    }
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars = d["templating"]["list"].as_array().expect("variables");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus datasource variable: {vars:#?}"
    );
    let mut ids = BTreeSet::new();
    for p in panels(&d) {
        let title = p["title"].as_str().expect("a panel title");
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "id of {title} repeated"
        );
        for k in ["h", "w", "x", "y"] {
            assert!(p["gridPos"][k].as_u64().is_some(), "{title}: gridPos.{k}");
        }
        assert!(
            p["gridPos"]["x"].as_u64().unwrap_or(0) + p["gridPos"]["w"].as_u64().unwrap_or(0) <= 24,
            "{title} wider than the grid"
        );
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no targets");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            assert!(t["refId"].as_str().is_some(), "{title}: refId");
            assert!(
                t["expr"].as_str().is_some_and(|e| e.contains("mailbench_")),
                "{title}"
            );
        }
    }
    // Prometheus's own parser: each expression (variables given values, as Grafana
    // would) as a recording rule for `promtool check rules`.
    let dir = TempDir::new("grafana-rules");
    let mut rules = String::from("groups:\n- name: dashboard\n  rules:\n");
    for (i, e) in expressions(&d).iter().enumerate() {
        if e.starts_with("label_values(") {
            continue;
        }
        let e = e
            .replace("$__rate_interval", "1m")
            .replace("$instance", ".*")
            .replace("$phase", "total");
        rules.push_str(&format!("  - record: dashboard_{i}\n    expr: '{e}'\n"));
    }
    let file = dir.0.join("rules.yml");
    std::fs::write(&file, &rules).expect("write rules");
    let out = Command::new(tool("promtool", "prometheus"))
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool check rules: {}{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `/metrics` in the Prometheus text format (no `Accept`), if it answers 200.
fn scrape(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The final `/metrics` of a run of `args`, held after the run.
fn final_scrape(args: &[&str]) -> String {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Terminated(
        mailbench()
            .args(args)
            .args(["-q", "--prometheus", &addr, "--prometheus-hold", "60s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailbench"),
    );
    let mut err = BufReader::new(child.0.stderr.take().expect("stderr"));
    let mut said = String::new();
    let mut line = String::new();
    while err.read_line(&mut line).is_ok_and(|n| n > 0) {
        said.push_str(&line);
        if line.contains("serving the final /metrics") {
            break;
        }
        line.clear();
    }
    assert!(
        line.contains("serving the final /metrics"),
        "{args:?}: {said}"
    );
    let text = scrape(port).expect("the final /metrics");
    assert_eq!(child.stop(), Some(0), "{args:?}");
    text
}

/// name → the label sets of its samples, from a Prometheus-format text.
fn samples(text: &str, into: &mut BTreeMap<String, Vec<BTreeMap<String, String>>>) {
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, _) = line.rsplit_once(' ').expect("name value");
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let labels = labels
            .trim_end_matches('}')
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        into.entry(name.to_string()).or_default().push(labels);
    }
}

#[test]
fn every_series_the_dashboard_queries_is_in_real_scrapes() {
    tool("postfix", "postfix");
    tool("dovecot", "dovecot-imapd");
    let mut seen = BTreeMap::new();
    // A send into a sink that exports too.
    let sink_port = free_port();
    let sink = Sink::start(&["--prometheus", &format!("127.0.0.1:{sink_port}")]);
    samples(
        &final_scrape(&["send", &sink.target(), "--rate", "200/s", "-z", "2s"]),
        &mut seen,
    );
    let mut sink_text = String::new();
    assert!(
        wait_until(Duration::from_secs(5), || {
            sink_text = scrape(sink_port).unwrap_or_default();
            sink_text.contains("mailbench_open_connections")
        }),
        "the sink's /metrics: {sink_text}"
    );
    samples(&sink_text, &mut seen);
    let _ = sink.stop();
    for run in [
        &["relay", "--lab", "postfix", "--rate", "100/s", "-z", "3s"][..],
        &[
            "mailbox", "pop3", "--lab", "dovecot", "--users", "3", "--fill", "3", "-z", "2s",
        ],
        &[
            "mailbox", "imap", "--lab", "dovecot", "--users", "3", "--fill", "3", "-z", "2s",
        ],
    ] {
        samples(&final_scrape(run), &mut seen);
    }
    let d = dashboard();
    let mut queried = BTreeSet::new();
    for e in expressions(&d) {
        for (name, matchers) in selectors(&e) {
            let sets = seen
                .get(&name)
                .unwrap_or_else(|| panic!("{name} (in {e}) is in no scrape: {:?}", seen.keys()));
            assert!(
                sets.iter()
                    .any(|s| matchers.iter().all(|(k, v)| s.get(k) == Some(v))),
                "no {name} sample with {matchers:?} (in {e}): {sets:?}"
            );
            queried.insert(
                name.trim_end_matches("_bucket")
                    .trim_end_matches("_sum")
                    .trim_end_matches("_count")
                    .to_string(),
            );
        }
    }
    // And the other way: what the runs export is on the dashboard.
    for name in seen.keys() {
        let family = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(
            queried.contains(family),
            "{name} is exported but not on the dashboard"
        );
    }
}
