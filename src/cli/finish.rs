//! After the engine: write the result files, print the summary, pick the exit code.

use super::{EXIT_FAILED, EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE};
use crate::report::{csv, text};
use crate::send::{self, SendPlan};
use crate::shutdown::Shutdown;
use crate::stats::Results;

/// Runs `send` and reports. Errors carry their exit code.
pub async fn send(plan: SendPlan) -> Result<u8, (u8, String)> {
    crate::limits::raise_nofile();
    let outputs = plan.outputs.clone();
    let headline_target = plan
        .targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let shutdown = Shutdown::install();
    let results = send::run(plan, shutdown)
        .await
        .map_err(|e| (EXIT_USAGE, e))?;
    let headline = format!(
        "mailbench send: {} messages to {} in {:.2} s",
        results.counters.sent, headline_target, results.duration_s
    );
    deliver(&results, &outputs, &text::render(&results, &headline))
}

/// Runs `sink` and reports.
pub async fn sink(plan: crate::sink::plan::SinkPlan) -> Result<u8, (u8, String)> {
    crate::limits::raise_nofile();
    let listeners = crate::sink::bind(&plan.listen)
        .await
        .map_err(|e| (EXIT_FAILED, e))?;
    let addrs = crate::sink::local_addrs(&listeners).join(", ");
    // Tests and scripts wait for this line (the port may have been 0).
    crate::report::live::say(&format!("mailbench sink: listening on {addrs}"));
    let outputs = plan.outputs.clone();
    let shutdown = Shutdown::install();
    let start = std::time::Instant::now();
    let results = crate::sink::run(plan, listeners, shutdown, Default::default(), start).await;
    let s = &results.summary;
    let headline = format!(
        "mailbench sink: {} messages to {} recipients in {} sessions on {addrs} over {:.2} s; lost {}, duplicates {}",
        s["messages"],
        s["recipients"],
        s["sessions"],
        results.duration_s,
        s["lost"],
        s["duplicates"]
    );
    deliver(&results, &outputs, &text::render_sink(&results, &headline))
}

/// Writes the result files, prints `summary`, names the results file, and picks the exit
/// code: the common end of every command.
pub fn deliver(
    r: &Results,
    outputs: &crate::report::Outputs,
    summary: &str,
) -> Result<u8, (u8, String)> {
    write_outputs(r, outputs)?;
    crate::report::print(summary);
    if let Some(p) = &outputs.json {
        crate::report::print(&format!("  results    {}\n", p.display()));
    }
    Ok(exit_code(r))
}

/// Writes the files asked for.
fn write_outputs(r: &Results, outputs: &crate::report::Outputs) -> Result<(), (u8, String)> {
    let (json, csv_path, postal) = (
        outputs.json.as_deref(),
        outputs.csv.as_deref(),
        outputs.postal_csv.as_deref(),
    );
    if let Some(p) = json {
        r.write(p).map_err(|e| (EXIT_FAILED, e))?;
    }
    let write = |p: &std::path::Path, text: String| {
        std::fs::write(p, text)
            .map_err(|e| (EXIT_FAILED, format!("cannot write {}: {e}", p.display())))
    };
    if let Some(p) = csv_path {
        write(p, csv::interval_csv(&r.series))?;
    }
    if let Some(p) = postal {
        write(
            p,
            csv::postal_csv(&r.series, r.started_at_us, csv::local_hh_mm),
        )?;
    }
    Ok(())
}

/// 2 when a generator sent messages and none was accepted (the run measured nothing but
/// failures), 3 when a threshold was breached, else 0.
fn exit_code(r: &Results) -> u8 {
    if r.command != "sink" && r.counters.sent > 0 && r.counters.accepted == 0 {
        crate::report::live::say(
            "mailbench: no message was accepted; the error table above says why",
        );
        EXIT_FAILED
    } else if r.thresholds.iter().any(|t| !t.ok) {
        EXIT_THRESHOLD
    } else {
        EXIT_OK
    }
}
