//! `mailbench report` and `mailbench compare`: read results files, hand them to the
//! output stage, write what it makes.

use std::path::PathBuf;

use super::args::{CompareArgs, MergeArgs, ReportArgs};
use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE};
use crate::report::compare::{self, Side};

/// Runs `report`. Errors carry their exit code.
pub fn report(a: &ReportArgs) -> Result<u8, (u8, String)> {
    super::plan::output::writable("--output", &a.output).map_err(|e| (EXIT_USAGE, e))?;
    let runs = crate::report::load(&a.files, &a.label).map_err(|e| (EXIT_USAGE, e))?;
    if let Some((label, r)) = runs.iter().find(|(_, r)| r.series.is_empty()) {
        // APPEND population keeps totals only (each user's session is merged whole), so
        // "ended within one --interval" would send its user after the wrong fix.
        let why = if r.command == crate::stats::kind::imap::POPULATE_IMAP.name {
            "populate --via imap records totals, not a per-interval series; nothing to chart \
             (mailbench compare reads it)"
        } else {
            "its series is empty (the run ended within one --interval); nothing to chart"
        };
        return Err((EXIT_USAGE, format!("results file of {label}: {why}")));
    }
    let refs: Vec<(String, &crate::stats::results::Results)> =
        runs.iter().map(|(l, r)| (l.clone(), r)).collect();
    let page = crate::report::html::render(&refs);
    std::fs::write(&a.output, &page).map_err(|e| {
        (
            EXIT_FAILED,
            format!("cannot write the report to {}: {e}", a.output.display()),
        )
    })?;
    crate::report::print(&format!(
        "mailbench report: {} ({} KiB, {} run{})\n",
        a.output.display(),
        page.len().div_ceil(1024),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    ));
    Ok(EXIT_OK)
}

/// Runs `merge`: reads the files, merges them, checks the run's thresholds again on the
/// merged figures, writes the result and prints its summary. Errors carry their exit code.
pub fn merge(a: &MergeArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let inputs = a
        .files
        .iter()
        .map(|f| {
            crate::stats::Results::read(f).map(|results| crate::stats::merge::Input {
                name: f.display().to_string(),
                results,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    let steps = inputs
        .first()
        .and_then(|i| crate::stats::kind::find(&i.results.command))
        .map_or(crate::stats::Steps::NONE, |k| k.steps);
    let mut merged = crate::stats::merge::merge(&inputs, steps, a.force).map_err(usage)?;
    crate::report::capacity::judge_merged(&inputs, &mut merged).map_err(usage)?;
    let vocabulary = crate::stats::kind::find(&merged.command)
        .unwrap_or(&crate::stats::kind::send::SEND)
        .thresholds;
    let thresholds = merged.config["thresholds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str())
        .map(|t| crate::report::threshold::Threshold::parse(t, &vocabulary))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    let outputs = super::plan::output::OutputPlan {
        files: crate::report::Outputs {
            json: Some(a.output.clone()),
            csv: None,
            postal_csv: None,
            report: a.report.clone(),
        },
        thresholds,
    };
    let agents = merged.extra["agents"].as_array().map_or(0, |a| a.len());
    let missing: Vec<&str> = merged.extra["merge"]["missing_shards"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
        .collect();
    // What --force overrode heads the summary: figures merged despite it are not one
    // run's unless the reader knows why they were merged anyway.
    let forced: Vec<&str> = merged.extra["merge"]["forced"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
        .collect();
    let more = match forced.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more: extra.merge.forced)", n - 1),
    };
    let partial = match (missing.is_empty(), forced.first()) {
        (false, _) => format!(" — PARTIAL, forced: shard {} missing", missing.join(", ")),
        (true, Some(why)) => format!("\nFORCED (--force): {why}{more}"),
        (true, None) => String::new(),
    };
    let headline = format!(
        "mailbench merge: {} files, {agents} agents of run {} over {:.2} s{partial}",
        inputs.len(),
        merged.run_id,
        merged.duration_s
    );
    super::finish::deliver(merged, &outputs, |r| {
        crate::report::text::summary(r, &headline)
    })
}

/// Runs `compare`. Errors carry their exit code.
pub fn compare(a: &CompareArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    if let [one] = a.files.as_slice()
        && a.baseline.is_empty()
    {
        // A comparison of several servers kept in one file (relay --lab a,b,…).
        let runs = crate::report::load(std::slice::from_ref(one), &[]).map_err(usage)?;
        if runs.len() > 1 {
            let sides = runs
                .into_iter()
                .map(|(label, r)| Side::of(label, &r).map_err(|e| (EXIT_FAILED, e)))
                .collect::<Result<Vec<_>, _>>()?;
            return finish_compare(a, &sides);
        }
    }
    let groups: Vec<(String, Vec<PathBuf>)> = if a.baseline.is_empty() {
        a.files
            .iter()
            .map(|f| {
                let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned());
                (stem.unwrap_or_default(), vec![f.clone()])
            })
            .collect()
    } else {
        vec![
            ("baseline".into(), a.baseline.clone()),
            ("candidate".into(), a.candidate.clone()),
        ]
    };
    if groups.len() < 2 {
        return Err(usage(
            "compare needs a baseline and at least one candidate: two results files or more, or --baseline FILES --candidate FILES".into(),
        ));
    }
    if !a.label.is_empty() && a.label.len() != groups.len() {
        return Err(usage(format!(
            "--label given {} times for {} sides; give one per side, in order, or none",
            a.label.len(),
            groups.len()
        )));
    }
    if let Some(p) = a.fail_if_slower.filter(|p| !(p.is_finite() && *p >= 0.0)) {
        return Err(usage(format!(
            "--fail-if-slower {p}: give a percentage of 0 or more, e.g. 5"
        )));
    }
    let mut sides = Vec::new();
    for (i, (stem, files)) in groups.into_iter().enumerate() {
        let docs = crate::report::load(&files, &[])
            .map_err(usage)?
            .into_iter()
            .map(|(_, r)| serde_json::to_value(&r).map_err(|e| (EXIT_FAILED, e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let label = a.label.get(i).cloned().unwrap_or(stem);
        sides.push(Side { label, docs });
    }
    finish_compare(a, &sides)
}

/// Compares the sides, prints (and writes) the table, applies --fail-if-slower.
fn finish_compare(a: &CompareArgs, sides: &[Side]) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    if let Some(p) = &a.output {
        super::plan::output::writable("--output", p).map_err(usage)?;
    }
    let c = compare::compare(sides, a.force).map_err(usage)?;
    let text = compare::render::render(&c, a.format);
    crate::report::print(&text);
    if let Some(p) = &a.output {
        std::fs::write(p, &text)
            .map_err(|e| (EXIT_FAILED, format!("cannot write {}: {e}", p.display())))?;
    }
    if let Some(pct) = a.fail_if_slower {
        let slower = c.slower_than(pct);
        if !slower.is_empty() {
            crate::run::live::say(&format!(
                "mailbench compare: {} slower than {} by more than {pct}%",
                slower.join(", "),
                c.sides[0]
            ));
            return Ok(EXIT_THRESHOLD);
        }
    }
    Ok(EXIT_OK)
}
