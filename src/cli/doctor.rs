//! `mailbench doctor`, and the preflight lines every `send` and `relay` run prints first:
//! the run's plan turned into what it needs of the machine (`crate::doctor` checks it).

use super::args::DoctorArgs;
use super::exit::{EXIT_OK, EXIT_USAGE};
use crate::doctor::{Needs, examine, preflight};
use crate::load::LoadPlan;
use crate::load::schedule::Pacing;
use crate::transport::target::Target;
use crate::units;

/// Runs `doctor`: every check, one line each; exit 0 (warnings only).
pub fn doctor(a: &DoctorArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let rate = a
        .new_per_sec
        .as_deref()
        .map(units::rate)
        .transpose()
        .map_err(|e| usage(format!("--new-per-sec: {e}")))?;
    let steal_over =
        units::duration(&a.steal_over).map_err(|e| usage(format!("--steal-over: {e}")))?;
    let needs = Needs {
        connections: a.connections,
        sides: if a.relay { 2 } else { 1 },
        new_conns_per_s: rate,
        loopback: !a.remote,
        lab: true,
    };
    let mut findings = examine(&needs, Some(steal_over));
    findings.push(crate::doctor::checks::leftover_labs(
        &crate::lab::leftovers::sweep(),
    ));
    println!(
        "mailbench doctor: this machine for {} connections{}{}",
        a.connections,
        rate.map_or(String::new(), |r| format!(", {r} new a second")),
        if a.relay {
            " (a relay holds both ends)"
        } else {
            ""
        }
    );
    for f in &findings {
        println!("  {}", f.line());
    }
    let warned = findings.iter().filter(|f| !f.ok).count();
    println!(
        "  {warned} of {} checks warn{}",
        findings.len(),
        if warned > 0 {
            "; results may measure this machine, not the server"
        } else {
            ""
        }
    );
    Ok(EXIT_OK)
}

/// The preflight of a run: its warnings, printed now (`who` names the command) and kept
/// for the results file. `lab`: the run starts a lab.
pub fn preflight_run(
    who: &str,
    load: &LoadPlan,
    targets: &[Target],
    sides: u64,
    lab: bool,
) -> Vec<String> {
    let lines = preflight(&Needs {
        lab,
        ..needs(load, targets, sides)
    });
    for l in &lines {
        crate::run::live::say(&format!("mailbench {who}: preflight: {l}"));
    }
    lines
}

/// What a run's plan asks of the machine: its connections, and in open loop the new
/// connections a second its rate and connection reuse make.
fn needs(load: &LoadPlan, targets: &[Target], sides: u64) -> Needs {
    let per_conn = match load.per_conn {
        (0, _) => None,
        (lo, hi) => Some((lo + hi) as f64 / 2.0),
    };
    let new_conns_per_s = match (&load.pacing, per_conn) {
        (Pacing::Open { rate, .. }, Some(n)) => Some(rate / n.max(1.0)),
        _ => None,
    };
    Needs {
        connections: load.concurrency as u64,
        sides,
        new_conns_per_s,
        loopback: targets.iter().all(|t| match t {
            Target::Tcp { addr, .. } => addr.ip().is_loopback(),
            _ => true,
        }),
        lab: false,
    }
}
