//! `mailbox profile`: virtual users of a scenario, at once or ramped up to the store's
//! capacity.

use std::sync::Arc;

use crate::cli::args::ProfileArgs;
use crate::cli::plan::{client, fill, lab, output, store};
use crate::lab::{Mta, Store};
use crate::mailbox::bench::Workload;
use crate::mailbox::profile::scenario::Scenario;
use crate::mailbox::profile::{Population, ProfilePlan};
use crate::report::threshold::Threshold;
use crate::transport::target::parse_target;
use crate::transport::tls::TlsPlan;
use crate::units;

/// Parses `START:STEP/PERIOD` (`--ramp-users 100:50/30s`).
fn ramp_users(spec: &str, max: u64) -> Result<Population, String> {
    let bad = || {
        format!(
            "--ramp-users {spec:?}: expected START:STEP/PERIOD, e.g. 100:50/30s (100 users, 50 more every 30 s)"
        )
    };
    let (start, rest) = spec.split_once(':').ok_or_else(bad)?;
    let (step, period) = rest.split_once('/').ok_or_else(bad)?;
    let start = units::count(start).map_err(|_| bad())?;
    let step = units::count(step).map_err(|_| bad())?;
    let period = units::duration(period).map_err(|_| bad())?;
    if start == 0 || step == 0 || period.is_zero() {
        return Err(format!(
            "--ramp-users {spec:?}: START, STEP and PERIOD must be above zero"
        ));
    }
    if start > max {
        return Err(format!(
            "--ramp-users starts at {start} users, above --max-users {max} (at most one virtual user per mailbox)"
        ));
    }
    Ok(Population::Ramp {
        start,
        step,
        period,
        max,
    })
}

/// Validates `mailbox profile`'s flags; `env` looks up the launcher's index variables
/// (`--shard auto/N`).
pub(super) fn profile_plan(
    a: &ProfileArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<store::Planned, String> {
    let (outputs, progress) = output::plan(&a.out, None, &crate::mailbox::profile::THRESHOLDS)?;
    let scenario = Scenario::load(&a.scenario)?;
    let setup = lab::store_setup(&a.server, false)?;
    let lab = setup.is_some();
    let fill = fill::lab_fill(&a.lab_fill, lab)?;
    let users = match &a.server.users_file {
        Some(f) => store::users_file(f)?,
        None => Vec::new(),
    };
    if !lab && a.imap.is_none() && a.pop3.is_none() {
        return Err(format!(
            "give --lab {}, or the store's --imap (and --pop3, --lmtp as the scenario needs) with --users-file",
            Store::names()
        ));
    }
    let target = |flag: &str, v: &Option<String>, port: u16| {
        v.as_deref()
            .map(|t| parse_target(t, port).map_err(|e| format!("--{flag}: {e}")))
            .transpose()
    };
    // Each virtual user needs a mailbox of its own: two on one would take each other's
    // messages and POP3 lock, failures that say nothing of the server's capacity.
    let mailboxes = match &setup {
        Some(s) => u64::from(s.options.users),
        None => users.len() as u64,
    };
    let too_many = |flag: &str, n: u64| {
        format!(
            "{flag} {n} is more than the {mailboxes} mailboxes{}: each virtual user needs its own (two on one mailbox take each other's messages); {}",
            if lab {
                " (--users)"
            } else {
                " of --users-file"
            },
            if lab {
                format!("give --users {n} or more")
            } else {
                format!("list {n} users or more in --users-file")
            }
        )
    };
    let max = match &a.max_users {
        Some(m) => {
            let m = units::count(m).map_err(|e| format!("--max-users: {e}"))?;
            if m > mailboxes && mailboxes > 0 {
                return Err(too_many("--max-users", m));
            }
            m
        }
        None => mailboxes,
    };
    let population = match &a.ramp_users {
        Some(spec) => ramp_users(spec, max)?,
        None => {
            let run_for = units::duration(a.duration.as_deref().unwrap_or("60s"))
                .map_err(|e| format!("--duration: {e}"))?;
            if run_for.is_zero() {
                return Err("--duration must be above zero".into());
            }
            let users = match &a.virtual_users {
                Some(v) => units::count(v).map_err(|e| format!("--virtual-users: {e}"))?,
                None => mailboxes,
            };
            if users == 0 {
                return Err("--virtual-users must be at least 1".into());
            }
            if users > mailboxes && mailboxes > 0 {
                return Err(too_many("--virtual-users", users));
            }
            Population::Fixed { users, run_for }
        }
    };
    // With a ramp, -z (when given) ends the whole run, cutting the step it falls in.
    let run_limit = match (&a.ramp_users, &a.duration) {
        (Some(_), Some(z)) => {
            let z = units::duration(z).map_err(|e| format!("--duration: {e}"))?;
            if z.is_zero() {
                return Err("--duration must be above zero".into());
            }
            Some(z)
        }
        _ => None,
    };
    // Each step's settle: kept out of its figures, so shorter than the step.
    let settle = super::super::plan::settle(a.settle.as_deref())?;
    if let Some(d) = settle {
        let (step, which) = match population {
            Population::Ramp { period, .. } => (period, "each step (--ramp-users' PERIOD)"),
            Population::Fixed { run_for, .. } => (run_for, "the run (--duration)"),
        };
        if d >= step {
            return Err(format!(
                "--settle {d:?}: not shorter than {which}, {step:?}: nothing of the step would be measured; give a shorter --settle or longer steps"
            ));
        }
    }
    let time_scale: f64 = a
        .time_scale
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x <= 1e6)
        .ok_or_else(|| {
            format!(
                "--time-scale {:?}: give a number above 0, e.g. 60",
                a.time_scale
            )
        })?;
    let rules = a
        .capacity_rule
        .iter()
        .map(|r| Threshold::parse_as(r, &crate::mailbox::profile::THRESHOLDS, "--capacity-rule"))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(m) = a.mta.filter(|m| !m.features().lmtp_onward) {
        return Err(format!(
            "--mta {}: this lab does not deliver into the store (over LMTP); use {}",
            m.name(),
            Mta::having_as("--mta", |f| f.lmtp_onward)
        ));
    }
    let first_step = match population {
        Population::Fixed { users, .. } => users,
        Population::Ramp { start, .. } => start,
    };
    let split = super::shard::profile(&a.scale, lab, first_step, env)?;
    let timeouts = client::Timeouts::plan(&a.client)?;
    let mut config_json = serde_json::json!({
        "protocol": "imap",
        "scenario": scenario.name,
        "time_scale": time_scale,
        "population": match population {
            Population::Fixed { users, run_for } => serde_json::json!({"users": users, "duration_s": run_for.as_secs_f64()}),
            Population::Ramp { start, step, period, max } => serde_json::json!({"ramp_start": start, "ramp_step": step, "step_s": period.as_secs_f64(), "max_users": max}),
        },
        "capacity_rules": a.capacity_rule,
        "run_limit_s": run_limit.map(|d| d.as_secs_f64()),
        "settle_s": settle.map(|d| d.as_secs_f64()),
        "send_via": match (a.mta, &a.smtp) { (Some(m), _) => format!("lab {}", m.name()), (None, Some(_)) => "smtp".into(), (None, None) => "lmtp".into() },
        "thresholds": a.out.threshold,
        "interval_s": progress.interval.as_secs_f64(),
        "seed": a.seed,
    });
    let w = store::Where {
        setup,
        target: None,
        users: Vec::new(),
        fill,
        tls: TlsPlan::NONE,
    };
    w.describe(&mut config_json, &a.server);
    if !lab {
        // Ask for exactly the servers the scenario's users talk to (after the flags' own
        // checks, which name a flag).
        let needs = scenario.needs(a.smtp.is_some());
        for (flag, needed, given) in [
            ("imap", needs.imap, a.imap.is_some()),
            ("pop3", needs.pop3, a.pop3.is_some()),
            ("lmtp", needs.lmtp, a.lmtp.is_some()),
        ] {
            if needed && !given {
                return Err(format!(
                    "--scenario {}: its users need a {flag} server; give --{flag} HOST:PORT",
                    scenario.name
                ));
            }
        }
    }
    let plan = ProfilePlan {
        scenario,
        population,
        time_scale,
        rules,
        imap: target("imap", &a.imap, 143)?,
        pop3: target("pop3", &a.pop3, 110)?,
        lmtp: target("lmtp", &a.lmtp, 24)?,
        smtp: target("smtp", &a.smtp, 25)?,
        lab_mta: a.mta.is_some(),
        users: Arc::new(users),
        connect: crate::mailbox::profile::user::connect_options(timeouts.connect, timeouts.command),
        quiet: progress.quiet,
        interval: progress.interval,
        run_limit,
        settle: settle.unwrap_or_default(),
        config_json,
        seed: a.seed,
        shard: split.shard,
        start_at: split.start_at,
        run_id: split.run_id,
    };
    Ok(w.planned(Workload::Profile(Box::new(plan)), &a.sut_pid, outputs))
}

/// Runs `mailbox profile`. Errors carry their exit code.
pub(super) async fn profile(a: ProfileArgs) -> Result<u8, (u8, String)> {
    if let Some(n) = a.rounds.filter(|n| *n != 1) {
        return Err((
            crate::cli::exit::EXIT_USAGE,
            format!(
                "--rounds {n} compares: give --lab {} (several) or --compare-store-conf KEY=A,B",
                Store::names()
            ),
        ));
    }
    let nothing_judged = std::cell::Cell::new(false);
    let code = super::run(profile_plan(&a, |v| std::env::var(v).ok()), |r| {
        nothing_judged.set(judged_nothing(r));
        let headline = format!(
            "mailbench mailbox profile: scenario {} against {} in {:.2} s",
            r.config["scenario"].as_str().unwrap_or("?"),
            r.config["lab"]
                .as_str()
                .and_then(Store::named)
                .map_or("your store".into(), |s| format!("the lab's {}", s.title())),
            r.duration_s
        );
        crate::report::text::summary(r, &headline)
    })
    .await?;
    // A search that judged no step found nothing: not a result a script may take for one.
    if code == crate::cli::exit::EXIT_OK && nothing_judged.get() {
        crate::run::live::say(
            "mailbench: no step of the profile was judged (no action fell due in any); the capacity line above says what to change",
        );
        return Ok(crate::cli::exit::EXIT_FAILED);
    }
    Ok(code)
}

/// True when the run ran steps and judged none (no action fell due in any), so that
/// it found no capacity and no breaking point.
fn judged_nothing(r: &crate::stats::Results) -> bool {
    let Some(c) = r.extra.get("capacity") else {
        return false;
    };
    !r.interrupted
        && c["capacity_users"].is_null()
        && c["broke_at_users"].is_null()
        && c["cut_short_at_users"].is_null()
        && c["unjudged_users"]
            .as_array()
            .is_some_and(|u| !u.is_empty())
}
