//! `mailbench merge`: the results files of the agents of one split run (`send`, `mailbox
//! pop3` or `mailbox imap` with `--shard`) or of several sinks, made into exactly the results one agent would have recorded:
//! counters summed, HDR histograms added bucket by bucket (never percentiles averaged),
//! series aligned on the shared interval grid (`series`), the summary derived again from
//! the sums, the sinks' sequence numbers united (`runs`), a store's agents checked for
//! shared users and its figures taken from the one agent that watched it (`store`). Each agent's environment, own
//! figures and warnings are kept in `extra.agents`. A merged file merges again (the
//! operation is associative), and `report` and `compare` read it like any other.

mod runs;
mod series;
mod store;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::collector::busiest_cpu;
use super::kind::Merge;
use super::results::{ErrorRow, Results, SelfReport};
use super::seen::RunReport;
use super::summary::{BouncesSent, SinkSummary, SinkTallies, Summary};
use super::{Recorder, Steps};

/// One results file to merge, with the name that error lines and `extra.agents` use.
pub struct Input {
    /// The file's name as given.
    pub name: String,
    /// Its contents.
    pub results: Results,
}

/// Configuration keys that may differ between agents of one run: each agent's share of
/// the connections, where it sent, where a sink listened, where a sink stored (output,
/// not workload: only the kind of store must agree). Each agent's are kept in its entry
/// of `extra.agents`.
const PER_AGENT_KEYS: &[&str] = &["concurrency", "target", "targets", "listen", "store"];

/// The part of a per-agent key that is workload and must agree: a store's kind
/// (`dir:`, `maildir:`, `mbox:`, `discard`), not its path.
fn workload_part(key: &str, value: &Value) -> Option<Value> {
    match (key, value.as_str()) {
        ("store", Some(store)) => Some(store.split(':').next().unwrap_or(store).into()),
        _ => None,
    }
}

/// Merges `inputs` into one results document; `steps` names the latency rows of their
/// command (SMTP's phases for `send`, none for `sink`). Refuses (one line) files of
/// different kinds, and, unless `force`, files of different runs, configurations, the
/// same shard twice, a split run with shards missing (forced: `extra.merge.partial`) or
/// agents whose schedules count from different starts; what `force` overrode is recorded
/// in `extra.merge.forced`.
pub fn merge(inputs: &[Input], steps: Steps, force: bool) -> Result<Results, String> {
    let Some(first) = inputs.first() else {
        return Err("merge: give the results files of the agents to merge".into());
    };
    let command = first.results.command.as_str();
    let Some(how) = super::kind::merging(command) else {
        return Err(format!(
            "{}: a {command} run; merge adds up send, mailbox pop3 and mailbox imap agents and sinks (a relay split over machines runs as send agents against the MTA and sinks where it delivers)",
            first.name
        ));
    };
    let mut forced = Vec::new();
    for other in &inputs[1..] {
        if other.results.command != command {
            return Err(format!(
                "{} is a {command} run and {} a {} run; merge files of one kind",
                first.name, other.name, other.results.command
            ));
        }
        let mut objections = Vec::new();
        if other.results.run_id != first.results.run_id {
            objections.push(format!(
                "{} has run id {} and {} has {}: not agents of one run (give every agent the same --run-id)",
                first.name, first.results.run_id, other.name, other.results.run_id
            ));
        }
        if let Some(key) = config_difference(&first.results.config, &other.results.config) {
            objections.push(format!(
                "{} and {} ran different configurations (config.{key}: {} against {})",
                first.name, other.name, first.results.config[&key], other.results.config[&key]
            ));
        }
        forced.extend(objections);
    }
    let agents: Vec<Value> = inputs.iter().flat_map(agents_of).collect();
    let open_loop = first.results.config["pacing"]["mode"] == "open";
    let twice = shard_twice(&agents);
    let on_a_store = matches!(how, Merge::Agents(g) if g.on_a_store());
    // Agents that shared users (or one that ran unsplit beside them) differ in
    // configuration too (its users file, its lack of a split): the sharing is the line
    // that says what went wrong, unless one agent is simply here twice.
    if on_a_store
        && twice.is_none()
        && let Some(shared) = store::users_shared(&agents)
    {
        forced.insert(0, shared);
    }
    let missing = match twice {
        Some(twice) => {
            forced.push(twice);
            Vec::new()
        }
        None => missing_shards(&agents),
    };
    if !missing.is_empty() {
        forced.push(missing_line(&agents, &missing));
    }
    if let Some(apart) = schedules_apart(&agents, open_loop) {
        forced.push(apart);
    }
    if let Some(why) = forced.first()
        && !force
    {
        return Err(format!("{why}; --force merges anyway"));
    }

    let t0_us = inputs
        .iter()
        .map(|i| i.results.started_at_us)
        .min()
        .unwrap_or(0);
    let end_us = inputs
        .iter()
        .map(|i| i.results.started_at_us + (i.results.duration_s * 1e6) as u64)
        .max()
        .unwrap_or(t0_us);
    let duration_s = (end_us.saturating_sub(t0_us) as f64 / 1e6).max(1e-9);
    let offset_s = |r: &Results| r.started_at_us.saturating_sub(t0_us) as f64 / 1e6;

    let mut total = Recorder::new();
    for i in inputs {
        total.counters.add(&i.results.counters);
        for (name, h) in &i.results.latency {
            let metric = steps
                .find(name)
                .ok_or_else(|| format!("{}: latency {name:?} is not a {command} metric", i.name))?;
            total.add_samples(metric, &h.to_hist());
        }
    }
    // The merged recorder holds no error rows: those are merged as rows (`merge_errors`).
    let (latency, _) = Results::tables(&total, steps);

    let interval_s = first.results.config["interval_s"].as_f64().unwrap_or(1.0);
    let named: Vec<(&str, &Results)> = inputs
        .iter()
        .map(|i| (i.name.as_str(), &i.results))
        .collect();
    // The store's own figures come from the one agent that watched it (all watched one
    // store: summed, they would count it once per watcher).
    let watcher = on_a_store
        .then(|| {
            inputs
                .iter()
                .position(|i| i.results.extra.contains_key("sut"))
        })
        .flatten();
    let series = series::merge(&named, t0_us, interval_s, watcher)?;

    let mut extra = BTreeMap::new();
    if let Some(w) = watcher {
        let (sut, said) = store::watched(inputs, w, &agents);
        extra.insert("sut".into(), sut);
        extra.insert("store_watched_by".into(), said);
    }
    let summary = match how {
        Merge::Agents(generator) => {
            let intended = inputs
                .iter()
                .map(|i| i.results.summary.number("intended").unwrap_or(0.0) as u64)
                .sum();
            let active_s = inputs
                .iter()
                .map(|i| offset_s(&i.results) + i.results.summary.number("active_s").unwrap_or(0.0))
                .fold(0.0, f64::max);
            generator.derive(&total, intended, duration_s, active_s)
        }
        Merge::Receivers => {
            let reports = inputs
                .iter()
                .map(sink_runs)
                .collect::<Result<Vec<_>, _>>()?;
            let runs = runs::merge(&reports);
            let summary = sink_summary(inputs, &total, &runs, duration_s);
            extra.insert(
                "runs".into(),
                serde_json::to_value(&runs).unwrap_or_default(),
            );
            Summary::Sink(summary)
        }
    };

    let mut config = first.results.config.clone();
    let concurrency: u64 = inputs
        .iter()
        .filter_map(|i| i.results.config["concurrency"].as_u64())
        .sum();
    if concurrency > 0 {
        config["concurrency"] = concurrency.into();
    }
    // Where each sink stored is in its agent entry; the merged file names the kind only
    // when the agents' paths differ.
    if let Some(store) = config.get("store").cloned()
        && inputs
            .iter()
            .any(|i| i.results.config.get("store") != Some(&store))
        && let Some(kind) = workload_part("store", &store)
    {
        config["store"] = kind;
    }
    let cpu_avg_pct = inputs
        .iter()
        .map(|i| i.results.self_report.cpu_avg_pct)
        .sum();
    let self_report = SelfReport {
        cpu_user_s: inputs
            .iter()
            .map(|i| i.results.self_report.cpu_user_s)
            .sum(),
        cpu_sys_s: inputs.iter().map(|i| i.results.self_report.cpu_sys_s).sum(),
        cpu_avg_pct,
        cpu_peak_pct: busiest_cpu(
            &series,
            std::time::Duration::from_secs_f64(interval_s.max(1e-3)),
            cpu_avg_pct,
        ),
        peak_rss_kib: inputs
            .iter()
            .map(|i| i.results.self_report.peak_rss_kib)
            .max()
            .unwrap_or(0),
        warnings: agents
            .iter()
            .flat_map(|a| {
                let who = a["shard"]["label"]
                    .as_str()
                    .map(|s| format!("shard {s}"))
                    .unwrap_or_else(|| a["file"].as_str().unwrap_or("?").to_string());
                a["self"]["warnings"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|w| w.as_str())
                    .map(move |w| format!("{who}: {w}"))
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    extra.insert("agents".into(), Value::Array(agents));
    extra.insert(
        "merge".into(),
        json!({
            "files": inputs.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
            "forced": forced,
            "partial": !missing.is_empty(),
            "missing_shards": missing,
        }),
    );
    Ok(Results {
        schema_version: first.results.schema_version,
        command: command.into(),
        run_id: first.results.run_id.clone(),
        started_at: humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_micros(t0_us),
        )
        .to_string(),
        started_at_us: t0_us,
        duration_s,
        interrupted: inputs.iter().any(|i| i.results.interrupted),
        config,
        environment: first.results.environment.clone(),
        summary,
        counters: total.counters.clone(),
        errors: merge_errors(inputs),
        latency,
        series,
        self_report,
        thresholds: Vec::new(),
        extra,
    })
}

/// The first configuration key (other than [`PER_AGENT_KEYS`]) whose values differ.
fn config_difference(a: &Value, b: &Value) -> Option<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return (a != b).then(|| "(the whole configuration)".to_string());
    };
    let workload = |m: &serde_json::Map<String, Value>, k: &str| {
        let v = m.get(k).cloned().unwrap_or(Value::Null);
        if PER_AGENT_KEYS.contains(&k) {
            workload_part(k, &v)
        } else {
            Some(v)
        }
    };
    a.keys()
        .chain(b.keys())
        .find(|k| workload(a, k) != workload(b, k))
        .cloned()
}

/// The agents a file holds: those a merged file lists, or the file's own run.
fn agents_of(i: &Input) -> Vec<Value> {
    if let Some(list) = i.results.extra.get("agents").and_then(|a| a.as_array()) {
        return list.clone();
    }
    let r = &i.results;
    vec![json!({
        "file": i.name,
        "shard": r.extra.get("shard"),
        "started_at_us": r.started_at_us,
        "duration_s": r.duration_s,
        "environment": r.environment,
        "self": r.self_report,
        "summary": r.summary,
        "interrupted": r.interrupted,
        "config": PER_AGENT_KEYS
            .iter()
            .filter_map(|k| Some((k.to_string(), r.config.get(*k)?.clone())))
            .collect::<serde_json::Map<_, _>>(),
    })]
}

/// A line naming two agents that are the same shard of a split run, or of splits into
/// different numbers of agents.
fn shard_twice(agents: &[Value]) -> Option<String> {
    // The split the first agent names, and which file had each index of it.
    let mut split: Option<(u64, &str)> = None;
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for a in agents {
        let s = &a["shard"];
        let (Some(index), Some(count)) = (s["index"].as_u64(), s["count"].as_u64()) else {
            continue;
        };
        let file = a["file"].as_str().unwrap_or("?");
        let (first_count, first_file) = *split.get_or_insert((count, file));
        if count != first_count {
            return Some(format!(
                "{first_file} and {file} split the run differently (into {first_count} and {count} agents)"
            ));
        }
        if count > 1
            && let Some(other) = seen.insert(index, file)
        {
            return Some(format!(
                "{other} and {file} are both shard {index}/{count}: the same agent's results twice would count its messages twice"
            ));
        }
    }
    None
}

/// The shards of a split run that no file holds (`I/N` labels), when the files hold
/// agents of one split.
fn missing_shards(agents: &[Value]) -> Vec<String> {
    let shards: Vec<(u64, u64)> = agents
        .iter()
        .filter_map(|a| Some((a["shard"]["index"].as_u64()?, a["shard"]["count"].as_u64()?)))
        .collect();
    let Some(&(_, count)) = shards.first() else {
        return Vec::new();
    };
    (0..count)
        .filter(|i| !shards.iter().any(|s| s.0 == *i))
        .map(|i| format!("{i}/{count}"))
        .collect()
}

/// The line that names the shards no file holds, and those that are here with the file
/// each came in (a label alone does not say which file to look at).
fn missing_line(agents: &[Value], missing: &[String]) -> String {
    let here: Vec<String> = agents
        .iter()
        .filter_map(|a| {
            let label = a["shard"]["label"].as_str()?;
            Some(match a["file"].as_str() {
                Some(file) => format!("{label} ({file})"),
                None => label.to_string(),
            })
        })
        .collect();
    let (one, is) = match missing.len() {
        1 => ("shard", "is"),
        _ => ("shards", "are"),
    };
    format!(
        "{one} {} of the run {is} in no file (the files hold {}): the merged figures would be only part of the run (marked partial if forced); merge every agent's file",
        missing.join(", "),
        here.join(", ")
    )
}

/// A line naming two agents of a split run whose schedules count from different starts
/// (their `--start-at` differs, or an open-loop agent had none, so each counted from its
/// own start): their messages were not sent on one schedule, and merged they would show
/// a rate the run never planned.
fn schedules_apart(agents: &[Value], open_loop: bool) -> Option<String> {
    let split: Vec<(&str, Option<&str>)> = agents
        .iter()
        .filter(|a| a["shard"]["count"].as_u64().is_some_and(|n| n > 1))
        .map(|a| {
            (
                a["file"].as_str().unwrap_or("?"),
                a["shard"]["start_at"].as_str(),
            )
        })
        .collect();
    let fix = "start every agent with one absolute --start-at (a UTC time)";
    if open_loop && let Some((file, _)) = split.iter().find(|(_, at)| at.is_none()) {
        return Some(format!(
            "{file} is an open-loop agent without --start-at: its schedule counted from its own start, not the run's; {fix}"
        ));
    }
    let (first_file, first_at) = split.iter().find_map(|(f, at)| Some((*f, (*at)?)))?;
    let (file, at) = split
        .iter()
        .find_map(|(f, at)| at.filter(|at| *at != first_at).map(|at| (*f, at)))?;
    let secs = |t: &str| {
        humantime::parse_rfc3339_weak(t)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64())
    };
    let apart = match (secs(first_at), secs(at)) {
        (Some(a), Some(b)) => format!(", {:.3} s apart", (a - b).abs()),
        _ => String::new(),
    };
    Some(format!(
        "{first_file} and {file} count their schedules from different starts ({first_at} and {at}{apart}): not one run's schedule; {fix}"
    ))
}

/// The error tables added up: rows of one class, step and code are one row, with up to
/// three distinct samples.
fn merge_errors(inputs: &[Input]) -> Vec<ErrorRow> {
    let mut rows: BTreeMap<(String, String, u16), ErrorRow> = BTreeMap::new();
    for row in inputs.iter().flat_map(|i| &i.results.errors) {
        let key = (row.class.clone(), row.phase.clone(), row.code);
        let merged = rows.entry(key).or_insert_with(|| ErrorRow {
            count: 0,
            sample: None,
            samples: Vec::new(),
            ..row.clone()
        });
        merged.count += row.count;
        for s in row.samples.iter().chain(row.sample.iter()) {
            if merged.samples.len() < 3 && !merged.samples.contains(s) {
                merged.samples.push(s.clone());
            }
        }
        merged.sample = merged.samples.first().cloned();
    }
    rows.into_values().collect()
}

/// A sink file's runs (`extra.runs`).
fn sink_runs(i: &Input) -> Result<BTreeMap<String, RunReport>, String> {
    match i.results.extra.get("runs") {
        None => Ok(BTreeMap::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| format!("{}: extra.runs is not a sink's run list: {e}", i.name)),
    }
}

/// The sinks' summary, from the summed counters and histograms, the sums of what the
/// sinks counted apart, and the united runs.
fn sink_summary(
    inputs: &[Input],
    total: &Recorder,
    runs: &BTreeMap<String, RunReport>,
    duration_s: f64,
) -> SinkSummary {
    let parts: Vec<&SinkSummary> = inputs
        .iter()
        .filter_map(|i| match &i.results.summary {
            Summary::Sink(s) => Some(s),
            _ => None,
        })
        .collect();
    let sum = |f: fn(&SinkSummary) -> u64| parts.iter().map(|s| f(s)).sum::<u64>();
    let mut faults = BTreeMap::new();
    for s in &parts {
        for (k, v) in &s.faults {
            *faults.entry(k.clone()).or_insert(0) += v;
        }
    }
    let bounces = parts.iter().filter_map(|s| s.bounces.as_ref()).fold(
        None,
        |acc: Option<BouncesSent>, b| {
            let mut a = acc.unwrap_or_default();
            a.sent += b.sent;
            a.failed += b.failed;
            a.dropped += b.dropped;
            Some(a)
        },
    );
    let tallies = SinkTallies {
        refused: sum(|s| s.refused),
        sessions_refused: sum(|s| s.sessions_refused),
        abandoned: sum(|s| s.abandoned),
        unconfirmed: sum(|s| s.unconfirmed),
        null_sender: sum(|s| s.null_sender),
        untracked: sum(|s| s.untracked),
        duplicates: runs.values().map(|r| r.duplicates).sum(),
        missing: runs.values().map(|r| r.missing_count).sum(),
        damaged: sum(|s| s.damaged),
        faults,
        bounces,
    };
    // The sinks ran side by side: the longest active span (files written before sinks
    // kept one say 0: then the run's length).
    let active = parts.iter().map(|s| s.active_s).fold(0.0, f64::max);
    let active_s = if active > 0.0 { active } else { duration_s };
    SinkSummary::derive(total, tallies, duration_s, active_s)
}

#[cfg(test)]
mod tests;
