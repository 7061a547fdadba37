//! The load's shape (`-c`, `--rate`, `-n`, `-z`, ...) → a `LoadPlan`, for every command
//! that generates load; and the closed-loop shape a command picks itself (filling a
//! store), built from typed values rather than from made-up flags.

use std::time::Duration;

use crate::cli::args::{ArrivalsArg, ShapeArgs};
use crate::load::LoadPlan;
use crate::load::schedule::{Arrivals, Pacing};
use crate::run::Progress;
use crate::stats::summary::Vocabulary;
use crate::units;

use super::flagged;

/// The defaults that differ between the commands that generate load: each states its
/// own, and the help's `[default: …]` says the same (the examples test checks it).
pub struct Defaults {
    /// Connections when `-c` is not given.
    pub concurrency: &'static str,
    /// Message size when `--size` is not given.
    pub size: &'static str,
    /// Units (messages, sessions, commands) when neither -n nor -z is given.
    pub messages: u64,
    /// What `--threshold` may name (the command's summary and metrics).
    pub thresholds: Vocabulary,
}

/// Load values a command sets itself, as if their flags were given: the relay's sweep
/// runs the first level of a `-c` list, its `--list-server` one message over one
/// connection unless `-n`/`-c` say otherwise.
#[derive(Debug, Default)]
pub struct Implied {
    /// Connections, in place of `-c`.
    pub concurrency: Option<u64>,
    /// Units to run, in place of `-n`.
    pub messages: Option<u64>,
}

/// Most connections one process opens: each holds a task, a socket and its buffers, a
/// few KiB set aside before it connects, so extra digits in `-c` took all the machine's
/// memory (`-c 999999999`: 24 GB, then the kernel's OOM killer). More load comes from
/// more processes.
pub const MAX_CONCURRENCY: usize = 100_000;

/// The load's shape from its flags, and its part of the configuration record.
pub fn shape(
    a: &ShapeArgs,
    defaults: &Defaults,
    progress: Progress,
) -> Result<(LoadPlan, serde_json::Value), String> {
    shape_implied(a, defaults, &Implied::default(), progress)
}

/// `shape`, with the values the command implies taking the place of their flags.
pub fn shape_implied(
    a: &ShapeArgs,
    defaults: &Defaults,
    implied: &Implied,
    progress: Progress,
) -> Result<(LoadPlan, serde_json::Value), String> {
    let concurrency = match implied.concurrency {
        Some(n) => n as usize,
        None => units::count(a.concurrency.as_deref().unwrap_or(defaults.concurrency))
            .map_err(flagged("--concurrency"))? as usize,
    };
    if concurrency == 0 {
        return Err("-c/--concurrency must be at least 1".into());
    }
    if concurrency > MAX_CONCURRENCY {
        return Err(format!(
            "-c/--concurrency {concurrency}: at most {MAX_CONCURRENCY} connections per process; \
             for more, run several agents (send --shard, README: Scale-out)"
        ));
    }
    let pacing = match &a.rate {
        None => {
            if a.ramp.is_some() {
                return Err("--ramp needs --rate (the rate to ramp up to)".into());
            }
            Pacing::Closed
        }
        Some(r) => {
            let rate = units::rate(r).map_err(flagged("--rate"))?;
            let (ramp_from, ramp_over) = match &a.ramp {
                Some(d) => (
                    Some(units::rate(&a.ramp_from).map_err(flagged("--ramp-from"))?),
                    Some(units::duration(d).map_err(flagged("--ramp"))?),
                ),
                None => (None, None),
            };
            Pacing::Open {
                rate,
                arrivals: match a.arrivals {
                    ArrivalsArg::Constant => Arrivals::Constant,
                    ArrivalsArg::Poisson => Arrivals::Poisson,
                },
                ramp_from,
                ramp_over,
            }
        }
    };
    let duration = a
        .duration
        .as_deref()
        .map(units::duration)
        .transpose()
        .map_err(flagged("--duration"))?;
    let count = match (implied.messages, &a.messages, duration) {
        (Some(n), _, _) => n,
        (None, Some(n), _) => {
            let n = units::count(n).map_err(flagged("--messages"))?;
            if n == 0 {
                return Err("-n/--messages must be at least 1".into());
            }
            n
        }
        (None, None, Some(_)) => u64::MAX,
        (None, None, None) => defaults.messages,
    };
    let per_conn = if a.per_conn.trim() == "0" {
        (0, 0)
    } else {
        units::count_range(&a.per_conn).map_err(|e| format!("--per-conn: {e}"))?
    };
    let max_errors = a
        .max_errors
        .as_deref()
        .map(units::count)
        .transpose()
        .map_err(flagged("--max-errors"))?;
    let grace = units::duration(&a.grace).map_err(flagged("--grace"))?;
    Ok(assemble(Shape {
        pacing,
        concurrency,
        count,
        duration,
        per_conn,
        grace,
        max_errors,
        progress,
    }))
}

/// A closed loop of `count` units over `concurrency` connections, every connection kept
/// for the whole run: the shape a command chooses for its own work (filling a store).
pub fn closed(concurrency: usize, count: u64, progress: Progress) -> (LoadPlan, serde_json::Value) {
    assemble(Shape {
        pacing: Pacing::Closed,
        concurrency,
        count,
        duration: None,
        per_conn: (0, 0),
        grace: Duration::from_secs(5),
        max_errors: None,
        progress,
    })
}

/// A load's shape once its values are checked.
struct Shape {
    pacing: Pacing,
    concurrency: usize,
    count: u64,
    duration: Option<Duration>,
    per_conn: (u64, u64),
    grace: Duration,
    max_errors: Option<u64>,
    progress: Progress,
}

/// The plan and its part of the configuration record.
fn assemble(s: Shape) -> (LoadPlan, serde_json::Value) {
    let json = serde_json::json!({
        "pacing": s.pacing,
        "concurrency": s.concurrency,
        "messages": if s.count == u64::MAX { None } else { Some(s.count) },
        "duration_s": s.duration.map(|d| d.as_secs_f64()),
        "per_conn": [s.per_conn.0, s.per_conn.1],
    });
    let plan = LoadPlan {
        pacing: s.pacing,
        concurrency: s.concurrency,
        count: s.count,
        duration: s.duration,
        per_conn: s.per_conn,
        grace: s.grace,
        max_errors: s.max_errors,
        progress: s.progress,
        run_id: None,
        live_extra: None,
        units: crate::run::live::MESSAGES,
        shard: crate::load::shard::Shard::WHOLE,
        start_at: None,
        outage: None,
    };
    (plan, json)
}
