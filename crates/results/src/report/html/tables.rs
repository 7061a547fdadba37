//! The report's tables as static HTML (readable without script, printed, and checked by
//! tests): the runs' header, the headline summary, latency, errors, thresholds, the
//! server's resources, the tool's own CPU and warnings, and any step table a command left
//! in `extra`. One column per run; a section appears only when some run has its data.

use std::fmt::Write as _;

use serde_json::Value;

use super::format::{escape, show};
use crate::stats::results::Results;

/// A key → value table with one column per run; each cell carries the raw JSON value
/// in `data-value` and its run and key, so a reader (or a test) can check it exactly.
fn key_table(
    id: &str,
    title: &str,
    labels: &[&str],
    rows: &[(String, Vec<Option<Value>>)],
) -> String {
    if rows.is_empty() {
        return String::new();
    }
    section_head(id, title) + &key_rows(labels, rows) + "</section>"
}

/// A key table folded away under `title`, for the raw keys that the headline already
/// said in plain words: there for whoever checks a figure, out of the way of a first read.
fn folded_key_table(
    id: &str,
    title: &str,
    labels: &[&str],
    rows: &[(String, Vec<Option<Value>>)],
) -> String {
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"{}\"><details><summary>{}</summary>{}</details></section>",
        escape(id),
        escape(title),
        key_rows(labels, rows)
    )
}

/// The `<table>` of a key table.
fn key_rows(labels: &[&str], rows: &[(String, Vec<Option<Value>>)]) -> String {
    let mut h = String::from("<table><thead><tr><th></th>");
    for l in labels {
        let _ = write!(h, "<th>{}</th>", escape(l));
    }
    h.push_str("</tr></thead><tbody>");
    for (key, values) in rows {
        let _ = write!(h, "<tr><th>{}</th>", escape(key));
        for (run, v) in values.iter().enumerate() {
            match v {
                Some(v) => {
                    let _ = write!(
                        h,
                        "<td data-run=\"{run}\" data-key=\"{}\" data-value=\"{}\">{}</td>",
                        escape(key),
                        escape(&v.to_string()),
                        escape(&show(v))
                    );
                }
                None => h.push_str("<td></td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    h
}

fn section_head(id: &str, title: &str) -> String {
    format!("<section id=\"{}\"><h2>{}</h2>", escape(id), escape(title))
}

/// The rows of a flat object per run (nested objects become dotted keys), in the first
/// run's key order, then keys only later runs have.
fn object_rows(objects: &[Option<&Value>]) -> Vec<(String, Vec<Option<Value>>)> {
    let flat: Vec<Flat> = objects
        .iter()
        .map(|o| {
            let mut out = Vec::new();
            if let Some(o) = o {
                flatten("", o, &mut out);
            }
            out
        })
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for f in &flat {
        for (k, _) in f {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.into_iter()
        .map(|k| {
            let values = flat
                .iter()
                .map(|f| f.iter().find(|(fk, _)| *fk == k).map(|(_, v)| v.clone()))
                .collect();
            (k, values)
        })
        .collect()
}

/// An object's scalar values by dotted key, in order.
type Flat = Vec<(String, Value)>;

fn flatten(prefix: &str, v: &Value, out: &mut Flat) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Array(_) => {}
        v => out.push((prefix.to_string(), v.clone())),
    }
}

/// The tables read after the headline: the runs' header, and the summary's raw keys
/// folded away.
pub fn head(runs: &[(String, &Results)]) -> String {
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    let summaries: Vec<Value> = runs
        .iter()
        .map(|(_, r)| serde_json::to_value(&r.summary).unwrap_or(Value::Null))
        .collect();
    header(runs, &labels)
        + &folded_key_table(
            "summary",
            "Every summary figure, by its key in the results file",
            &labels,
            &object_rows(&summaries.iter().map(Some).collect::<Vec<_>>()),
        )
}

/// The tables after the charts, in reading order.
pub fn details(runs: &[(String, &Results)]) -> String {
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    let mut h = String::new();
    h.push_str(&latency(runs, &labels));
    h.push_str(&errors(runs));
    h.push_str(&thresholds(runs));
    let extra =
        |key: &str| -> Vec<Option<&Value>> { runs.iter().map(|(_, r)| r.extra.get(key)).collect() };
    let server = runs.first().map_or_else(
        || "Server under test".to_string(),
        |(_, r)| super::charts::in_words("{server} under test", r),
    );
    for (key, id, title) in [
        ("sut", "sut", server.as_str()),
        ("store_limits", "store_limits", "Store limits in effect"),
        ("dns", "dns", "DNS questions and replies"),
    ] {
        h.push_str(&key_table(id, title, &labels, &object_rows(&extra(key))));
    }
    h.push_str(&step_table(
        runs,
        "dns_faults",
        "DNS fault rules and how often each fired",
        &[("rule", "rule"), ("fired", "fired")],
        |r| r.extra.get("dns").map(|d| &d["faults"]),
    ));
    h.push_str(&tool(runs, &labels));
    h.push_str(&step_table(
        runs,
        "sweep",
        "Concurrency sweep",
        &[
            ("concurrency", "sessions"),
            ("inject_mpm", "injected (msg/min)"),
            ("drain_mpm", "drained (msg/min)"),
            ("delivery_per_sec", "delivered (msg/s)"),
            ("e2e_p50_ms", "end to end p50 (ms)"),
            ("e2e_p99_ms", "end to end p99 (ms)"),
            ("max_backlog", "max backlog"),
            ("lost", "lost"),
            ("why", "verdict"),
        ],
        |r| r.extra.get("sweep"),
    ));
    h.push_str(&step_table(
        runs,
        "find_max",
        "Find-max steps",
        &[
            ("rate_per_sec", "rate (msg/s)"),
            ("inject_per_sec", "injected (msg/s)"),
            ("delivery_per_sec", "delivered (msg/s)"),
            ("drain_mpm", "drained (msg/min)"),
            ("e2e_p99_ms", "end to end p99 (ms)"),
            ("max_backlog", "max backlog"),
            ("lost", "lost"),
            ("why", "verdict"),
        ],
        |r| r.extra.get("find_max"),
    ));
    h.push_str(&step_table(
        runs,
        "capacity",
        "Capacity ramp",
        &[
            ("users", "users"),
            ("seconds", "ran (s)"),
            ("summary.actions_per_min", "actions/min"),
            ("summary.mean_ms", "mean (ms)"),
            ("summary.p95_ms", "p95 (ms)"),
            ("summary.p99_ms", "p99 (ms)"),
            ("failed", "failed"),
            ("summary.overdue", "never done"),
            ("summary.unstarted", "not begun at its end"),
            ("stuck_users", "users left waiting"),
            ("summary.sut_cpu", "store CPU (%)"),
            ("verdict", "verdict"),
        ],
        |r| r.extra.get("capacity").map(|c| &c["steps"]),
    ));
    h.push_str(&capacity_verdict(runs, &labels));
    h.push_str(&config(runs));
    h
}

fn header(runs: &[(String, &Results)], labels: &[&str]) -> String {
    let mut rows: Vec<(String, Vec<Option<Value>>)> = [
        (
            "command",
            (|r: &Results| Value::from(r.command.clone())) as fn(&Results) -> Value,
        ),
        ("target", |r| {
            r.config
                .get("target")
                .or_else(|| r.config.get("targets"))
                .or_else(|| r.config.get("listen"))
                .cloned()
                .unwrap_or(Value::Null)
        }),
        ("run id", |r| r.run_id.clone().into()),
        ("started", |r| r.started_at.clone().into()),
        ("duration (s)", |r| r.duration_s.into()),
        ("interrupted", |r| r.interrupted.into()),
        ("host", |r| r.environment.hostname.clone().into()),
        ("kernel", |r| r.environment.kernel.clone().into()),
        ("cpus", |r| r.environment.cpus.into()),
        ("mailbench", |r| {
            r.environment.mailbench_version.clone().into()
        }),
    ]
    .into_iter()
    .map(|(k, get)| {
        (
            k.to_string(),
            runs.iter().map(|(_, r)| Some(get(r))).collect(),
        )
    })
    .collect();
    // The MTA a relay went through, or the lab store a mailbox workload ran on, is what
    // its figures are about.
    for (name, at) in [("store", "/lab"), ("MTA", "/relay/lab")] {
        let labs: Vec<Option<Value>> = runs
            .iter()
            .map(|(_, r)| r.config.pointer(at).filter(|v| v.is_string()).cloned())
            .collect();
        if labs.iter().any(Option::is_some) {
            rows.insert(1, (name.to_string(), labs));
        }
    }
    key_table("run", "Run", labels, &rows)
}

fn latency(runs: &[(String, &Results)], labels: &[&str]) -> String {
    let mut metrics: Vec<&String> = runs.iter().flat_map(|(_, r)| r.latency.keys()).collect();
    metrics.sort();
    metrics.dedup();
    if metrics.is_empty() {
        return String::new();
    }
    let mut h = section_head("latency_table", "Latency (ms)");
    h.push_str("<table><thead><tr><th>metric</th>");
    if runs.len() > 1 {
        h.push_str("<th>run</th>");
    }
    h.push_str("<th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody>");
    for m in metrics {
        for (i, (_, r)) in runs.iter().enumerate() {
            let Some(x) = r.latency.get(m) else { continue };
            let _ = write!(h, "<tr><th>{}</th>", escape(m));
            if runs.len() > 1 {
                let _ = write!(h, "<td>{}</td>", escape(labels[i]));
            }
            let _ = write!(h, "<td>{}</td>", x.count);
            for us in [x.p50_us, x.p90_us, x.p99_us, x.p999_us, x.max_us] {
                let _ = write!(h, "<td>{:.3}</td>", us as f64 / 1000.0);
            }
            h.push_str("</tr>");
        }
    }
    h.push_str("</tbody></table></section>");
    h
}

fn errors(runs: &[(String, &Results)]) -> String {
    if runs.iter().all(|(_, r)| r.errors.is_empty()) {
        return String::new();
    }
    let mut h = section_head("errors_table", "Errors by class, phase and code");
    h.push_str("<table><thead><tr><th>run</th><th>class</th><th>phase</th><th>code</th><th>count</th><th>reasons seen</th></tr></thead><tbody>");
    for (label, r) in runs {
        for e in &r.errors {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(label),
                escape(&e.class),
                escape(&e.phase),
                e.code,
                e.count,
                reasons(e)
            );
        }
    }
    h.push_str("</tbody></table></section>");
    h
}

/// The distinct reasons sampled for an error row, one per line (files older than the
/// `samples` list carry only `sample`).
fn reasons(e: &crate::stats::results::ErrorRow) -> String {
    match (e.samples.is_empty(), &e.sample) {
        (true, Some(s)) => escape(s),
        _ => e
            .samples
            .iter()
            .map(|t| escape(t))
            .collect::<Vec<_>>()
            .join("<br>"),
    }
}

fn thresholds(runs: &[(String, &Results)]) -> String {
    if runs.iter().all(|(_, r)| r.thresholds.is_empty()) {
        return String::new();
    }
    let mut h = section_head("thresholds", "Thresholds");
    h.push_str("<table><thead><tr><th>run</th><th>threshold</th><th>measured</th><th>verdict</th></tr></thead><tbody>");
    for (label, r) in runs {
        for t in &r.thresholds {
            let (class, word) = if t.ok {
                ("pass", "pass")
            } else {
                ("fail", "FAIL")
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td class=\"{class}\">{word}</td></tr>",
                escape(label),
                escape(&t.expr),
                t.value
            );
        }
    }
    h.push_str("</tbody></table></section>");
    h
}

fn tool(runs: &[(String, &Results)], labels: &[&str]) -> String {
    let selfs: Vec<Value> = runs
        .iter()
        .map(|(_, r)| {
            let mut v = serde_json::to_value(&r.self_report).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.remove("warnings");
            }
            v
        })
        .collect();
    let mut h = key_table(
        "tool",
        "mailbench itself",
        labels,
        &object_rows(&selfs.iter().map(Some).collect::<Vec<_>>()),
    );
    let warnings: Vec<(&str, &String)> = runs
        .iter()
        .flat_map(|(l, r)| r.self_report.warnings.iter().map(move |w| (l.as_str(), w)))
        .collect();
    if !warnings.is_empty() {
        h.push_str(&section_head("warnings", "Warnings"));
        h.push_str("<ul>");
        for (label, w) in warnings {
            let _ = write!(h, "<li><b>{}</b>: {}</li>", escape(label), escape(w));
        }
        h.push_str("</ul></section>");
    }
    h
}

/// A list of flat objects (steps) as a table, one row per step: the `lead` columns (key,
/// plain label) that tell the story, and every column folded away below them when the
/// steps have more (a capacity step has dozens).
fn step_table(
    runs: &[(String, &Results)],
    id: &str,
    title: &str,
    lead: &[(&str, &str)],
    rows_of: impl Fn(&Results) -> Option<&Value>,
) -> String {
    let tables: Vec<(&str, Vec<Flat>)> = runs
        .iter()
        .filter_map(|(label, r)| {
            let rows = rows_of(r)?.as_array()?;
            let flat = rows
                .iter()
                .map(|row| {
                    let mut out = Vec::new();
                    flatten("", row, &mut out);
                    out
                })
                .collect();
            Some((label.as_str(), flat))
        })
        .collect();
    if tables.is_empty() {
        return String::new();
    }
    let mut h = section_head(&format!("{id}_table"), title);
    for (label, rows) in tables {
        let mut keys: Vec<&str> = lead
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| rows.iter().any(|row| row.iter().any(|(rk, _)| rk == k)))
            .collect();
        let shown = keys.len();
        for row in &rows {
            for (k, _) in row {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        if runs.len() > 1 {
            let _ = write!(h, "<h3>{}</h3>", escape(label));
        }
        let header = |k: &str| {
            let plain = lead.iter().find(|(l, _)| *l == k).map_or(k, |(_, t)| *t);
            plain.to_string()
        };
        if shown > 0 {
            h.push_str(&rows_table(&rows, &keys[..shown], header));
        }
        if keys.len() > shown {
            if shown > 0 {
                h.push_str("<details><summary>Every column</summary>");
            }
            h.push_str(&rows_table(&rows, &keys, str::to_string));
            if shown > 0 {
                h.push_str("</details>");
            }
        }
    }
    h.push_str("</section>");
    h
}

/// The `<table>` of steps `rows` in columns `keys`, headed as `header` names them.
fn rows_table(rows: &[Flat], keys: &[&str], header: impl Fn(&str) -> String) -> String {
    let mut h = String::from("<table><thead><tr>");
    for k in keys {
        let _ = write!(h, "<th>{}</th>", escape(&header(k)));
    }
    h.push_str("</tr></thead><tbody>");
    for row in rows {
        h.push_str("<tr>");
        for k in keys {
            let v = row.iter().find(|(rk, _)| rk == k).map(|(_, v)| show(v));
            let _ = write!(h, "<td>{}</td>", escape(&v.unwrap_or_default()));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    h
}

fn capacity_verdict(runs: &[(String, &Results)], labels: &[&str]) -> String {
    let verdicts: Vec<Option<Value>> = runs
        .iter()
        .map(|(_, r)| {
            let c = r.extra.get("capacity")?;
            Some(serde_json::json!({
                "capacity_users": c["capacity_users"],
                "capacity_at_least": c["capacity_at_least"],
                "broke_at_users": c["broke_at_users"],
                "cut_short_at_users": c["cut_short_at_users"],
                "rules": c["rules"].as_array().map(|a| {
                    a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                }),
            }))
        })
        .collect();
    if verdicts.iter().all(Option::is_none) {
        return String::new();
    }
    key_table(
        "capacity_verdict",
        "Capacity",
        labels,
        &object_rows(&verdicts.iter().map(Option::as_ref).collect::<Vec<_>>()),
    )
}

fn config(runs: &[(String, &Results)]) -> String {
    let mut h = section_head("config", "Configuration");
    for (label, r) in runs {
        let text = serde_json::to_string_pretty(&r.config).unwrap_or_default();
        let _ = write!(
            h,
            "<details><summary>{}</summary><pre>{}</pre></details>",
            escape(label),
            escape(&text)
        );
    }
    h.push_str("</section>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_a_results_file_cannot_open_a_tag() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn a_key_table_keeps_every_runs_raw_value_and_leaves_missing_cells_empty() {
        let a = serde_json::json!({"mpm": 1234.5678, "lost": 0, "faults": {"delay": 3}});
        let b = serde_json::json!({"mpm": 1000, "extra_key": true});
        let rows = object_rows(&[Some(&a), Some(&b)]);
        let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["faults.delay", "lost", "mpm", "extra_key"]);
        let html = key_table("s", "S", &["a", "b"], &rows);
        assert!(
            html.contains(
                "<td data-run=\"0\" data-key=\"mpm\" data-value=\"1234.5678\">1234.57</td>"
            ),
            "got {html}"
        );
        assert!(html.contains("data-key=\"extra_key\" data-value=\"true\">yes</td>"));
        assert!(html.contains("<tr><th>lost</th><td data-run=\"0\" data-key=\"lost\" data-value=\"0\">0</td><td></td></tr>"), "got {html}");
    }
}
