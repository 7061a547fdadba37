//! After the engine: write the result files, print the summary, pick the exit code.

use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE};
use super::plan::output::OutputPlan;
use crate::report::{csv, text, threshold};
use crate::send::{self, SendPlan};
use crate::shutdown::Shutdown;
use crate::sink::plan::SinkPlan;
use crate::stats::Results;
use crate::stats::summary::Summary;

/// Runs `send` (`rounds` times) and reports. Errors carry their exit code.
pub async fn send(plan: SendPlan, outputs: OutputPlan, rounds: u32) -> Result<u8, (u8, String)> {
    crate::limits::raise_nofile();
    let preflight =
        super::doctor::preflight_run("send", &plan.load, &plan.client.targets, 1, false);
    let shutdown = Shutdown::install();
    let mut results = in_rounds(rounds, &shutdown, |_| {
        let (plan, shutdown) = (plan.clone(), shutdown.clone());
        async move { send::run(plan, shutdown).await.map_err(|e| (EXIT_USAGE, e)) }
    })
    .await?;
    keep_preflight(&mut results, preflight);
    note_short_run(&mut results, plan.warmup);
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench send: {} messages to {} in {:.2} s",
            r.counters.sent,
            r.config["targets"]
                .as_array()
                .map(|t| t
                    .iter()
                    .filter_map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default(),
            r.duration_s
        );
        text::summary(r, &headline)
    })
}

/// Runs `sink` and reports.
pub async fn sink(plan: SinkPlan, outputs: OutputPlan) -> Result<u8, (u8, String)> {
    crate::limits::raise_nofile();
    // An address that cannot be had is bad input: the fix is another --listen.
    let listeners = crate::transport::listen::bind(&plan.listen)
        .await
        .map_err(|e| (EXIT_USAGE, format!("--listen: {e}")))?;
    let addrs = crate::transport::listen::local_addrs(&listeners).join(", ");
    // Tests and scripts wait for this line (the port may have been 0).
    crate::run::live::say(&format!("mailbench sink: listening on {addrs}"));
    let shutdown = Shutdown::install();
    let start = std::time::Instant::now();
    let results = crate::sink::run(plan, listeners, shutdown, Default::default(), start).await;
    deliver(results, &outputs, |r| {
        let headline = match &r.summary {
            Summary::Sink(s) => format!(
                "mailbench sink: {} messages to {} recipients in {} sessions on {addrs} over {:.2} s; lost {}, duplicates {}",
                s.messages, s.recipients, s.sessions, r.duration_s, s.lost, s.duplicates
            ),
            _ => String::new(),
        };
        text::summary(r, &headline)
    })
}

/// Keeps a run's preflight warnings in its results (`extra.preflight`), when it had any.
pub fn keep_preflight(results: &mut Results, lines: Vec<String>) {
    if !lines.is_empty() {
        results.extra.insert("preflight".into(), lines.into());
    }
}

/// How long seed 002 found mail servers need under sustained load before their full
/// performance shows (MStone likewise resets its statistics after the ramp-up).
pub const SETTLED_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// Notes in the results (`extra.notes`, printed under the summary) that the run was too
/// short to mean much: shorter than [`SETTLED_AFTER`], without a warm-up that long. Not
/// when a signal cut the run (the user chose its length) or nothing was accepted (no load
/// reached the server: the errors say why, and a longer run would not help).
pub fn note_short_run(results: &mut Results, warmup: Option<std::time::Duration>) {
    let warmed = warmup.unwrap_or_default();
    if results.duration_s >= SETTLED_AFTER.as_secs_f64()
        || warmed >= SETTLED_AFTER
        || results.interrupted
        || results.counters.accepted == 0
    {
        return;
    }
    let note = format!(
        "the measured load lasted {:.1} s{}: mail servers take {} s or more of sustained load to show their full performance (seed 002); for figures that hold, use --duration 2m or more, or --warmup 2m",
        results.duration_s,
        if warmed.is_zero() {
            String::new()
        } else {
            format!(" after a {:.1} s warm-up", warmed.as_secs_f64())
        },
        SETTLED_AFTER.as_secs()
    );
    results.extra.insert("notes".into(), vec![note].into());
}

/// Runs a benchmark `rounds` times and keeps the rounds as one results document (the
/// engine's `run::rounds::repeat`, combined by `report::rounds`); errors carry their exit
/// code.
pub async fn in_rounds<F, Fut>(
    rounds: u32,
    shutdown: &Shutdown,
    run: F,
) -> Result<Results, (u8, String)>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<Results, (u8, String)>>,
{
    crate::run::rounds::repeat(rounds, shutdown, crate::report::rounds::combine, run)
        .await
        .map_err(|e| e.or(|why| (EXIT_FAILED, why)))
}

/// The line a summary ends with when a signal cut the run short: the figures cover only
/// what ran, and the exit code says so too.
fn interrupted_line(r: &Results) -> String {
    if !r.interrupted {
        return String::new();
    }
    if r.extra.get("interrupted_during").and_then(|v| v.as_str()) == Some("drain") {
        return format!(
            "  interrupted by a signal during the drain, after the whole injection: the delivery figures cover what arrived until then (exit {EXIT_FAILED})\n"
        );
    }
    format!(
        "  interrupted by a signal after {:.2} s: the figures cover only what ran until then (exit {EXIT_FAILED})\n",
        r.duration_s
    )
}

/// The common end of every command: checks the thresholds, writes the result files,
/// prints the summary `render` makes, names the results file, and picks the exit code.
pub fn deliver(
    mut r: Results,
    outputs: &OutputPlan,
    render: impl FnOnce(&Results) -> String,
) -> Result<u8, (u8, String)> {
    threshold::check(&mut r, &outputs.thresholds);
    write_outputs(&r, &outputs.files)?;
    crate::run::exporter::publish_results(&r);
    crate::report::print(&(render(&r) + &crate::report::rounds::text(&r)));
    if ends_by_signal(&r) {
        crate::report::print(&interrupted_line(&r));
    }
    if let Some(p) = &outputs.files.json {
        crate::report::print(&format!("  results    {}\n", p.display()));
    }
    Ok(exit_code(&r))
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
    if let Some(p) = &outputs.report {
        crate::report::html::write(&[(r.command.clone(), r)], p).map_err(|e| (EXIT_FAILED, e))?;
    }
    Ok(())
}

/// True when a signal cut short a run that has an end of its own (a `sink` or `dns`
/// server runs until it is stopped: a signal is how it ends).
fn ends_by_signal(r: &Results) -> bool {
    r.interrupted && !crate::stats::kind::find(&r.command).is_some_and(|k| k.serves)
}

/// When every failure of an SMTP or LMTP run was its greeting command refused as unknown
/// (500 or 502), the likely cause and its fix: the two greet alike, and an LMTP server
/// answers only LHLO, an SMTP server only EHLO (Dovecot's LMTP: `500 5.5.1 Unknown
/// command`; Postfix: `502 5.5.2 Error: command not recognized`).
fn other_greeting_protocol(r: &Results) -> Option<String> {
    let lmtp = r.config["protocol"].as_str()? == "lmtp";
    let unknown =
        |e: &crate::stats::results::ErrorRow| e.phase == "ehlo" && matches!(e.code, 500 | 502);
    if r.errors.is_empty() || !r.errors.iter().all(unknown) {
        return None;
    }
    let reply = r.errors[0].sample.as_deref().unwrap_or_default();
    Some(match lmtp {
        true => format!(
            "every LHLO was refused ({reply}): an SMTP server answers EHLO, not LHLO; drop --lmtp, or give the address of its LMTP port"
        ),
        false => format!(
            "every EHLO was refused ({reply}): an LMTP server answers LHLO, not EHLO; add --lmtp, or give the address of its SMTP port"
        ),
    })
}

/// 2 when a signal cut the run short (its results are partial: a script must not take
/// them for a finished run's, nor judge thresholds on them) or when a generator sent
/// messages and none was accepted (the run measured nothing but failures), 3 when a
/// threshold was breached, else 0.
fn exit_code(r: &Results) -> u8 {
    if ends_by_signal(r) {
        EXIT_FAILED
    } else if !crate::stats::kind::find(&r.command).is_some_and(|k| k.serves)
        && r.counters.sent > 0
        && r.counters.accepted == 0
    {
        let units = crate::stats::kind::find(&r.command)
            .map_or(crate::stats::kind::units::MESSAGES, |k| k.units);
        let why = other_greeting_protocol(r)
            .unwrap_or_else(|| "the error table above says why".to_string());
        crate::run::live::say(&format!(
            "mailbench: 0 {} {}; {why}",
            units.noun, units.done
        ));
        EXIT_FAILED
    } else if r.thresholds.iter().any(|t| !t.ok) {
        EXIT_THRESHOLD
    } else {
        EXIT_OK
    }
}
