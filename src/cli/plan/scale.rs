//! `--shard`, `--start-at` and `--run-id` → this agent's part of a split run (`send`,
//! `mailbox pop3`, `mailbox imap`): its stripe of the schedule, its share of the
//! connections (and of `send`'s source addresses), the shared start and run id. Every rule that ties them together lives here.

use std::time::{Duration, SystemTime};

use crate::cli::args::ScaleArgs;
use crate::load::LoadPlan;
use crate::load::schedule::Pacing;
use crate::load::shard::Shard;
use crate::send::SendPlan;
use crate::units;

/// Applies the scale-out flags to a validated plan; `env` looks up the launcher's index
/// variables.
pub fn apply(
    plan: &mut SendPlan,
    a: &ScaleArgs,
    rounds: u32,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    apply_load(&mut plan.load, &mut plan.config_json, a, rounds, env)?;
    plan.client.source_ips = plan.load.shard.split(&plan.client.source_ips);
    Ok(())
}

/// The scale-out flags' part that every load-engine workload shares (`send`, `mailbox
/// pop3` and `imap`): the run id, the shared start and this agent's share of the
/// schedule and of the connections, recorded in `config` (`concurrency` this agent's,
/// `concurrency_total` the run's).
pub fn apply_load(
    load: &mut LoadPlan,
    config: &mut serde_json::Value,
    a: &ScaleArgs,
    rounds: u32,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let Some(id) = &a.run_id {
        load.run_id = Some(run_id(id, "--run-id")?);
    }
    if let Some(spec) = &a.start_at {
        if rounds > 1 {
            return Err(format!(
                "--start-at {spec}: a shared start holds for one round; drop --rounds or --start-at"
            ));
        }
        load.start_at = Some(start_at(spec, SystemTime::now())?);
    }
    let Some(spec) = &a.shard else {
        return Ok(());
    };
    let shard = Shard::parse(spec, env)?;
    if !shard.is_whole() && load.run_id.is_none() {
        return Err(format!(
            "--shard {spec}: give every agent the same --run-id (e.g. --run-id $(openssl rand -hex 8)), so that sinks and merge see one run and the agents share one schedule"
        ));
    }
    // Agents must count their schedules from one instant: a time from now is each
    // agent's own now, and without a start each agent's schedule starts when it does.
    let absolute = "$(date -u -d '+30 seconds' +%Y-%m-%dT%H:%M:%SZ)";
    match a.start_at.as_deref().map(str::trim) {
        Some(rel) if !shard.is_whole() && rel.starts_with('+') => {
            return Err(format!(
                "--start-at {rel}: counted from each agent's own start, so agents started apart would not begin together; give every agent of --shard {spec} one UTC time, e.g. --start-at {absolute}"
            ));
        }
        None if !shard.is_whole() && matches!(load.pacing, Pacing::Open { .. }) => {
            return Err(format!(
                "--shard {spec} with --rate: give every agent the same --start-at (a UTC time, e.g. --start-at {absolute}), so that their schedules count from one instant"
            ));
        }
        _ => {}
    }
    let total = load.concurrency as u64;
    if total < shard.count {
        // Whichever agent this is, some agent of the run would have no connection.
        return Err(format!(
            "--shard {spec}: -c {total} leaves agents of the {} without a connection; give -c {} or more",
            shard.count, shard.count
        ));
    }
    let mine = shard.share(total);
    load.concurrency = mine as usize;
    load.shard = shard;
    config["concurrency"] = mine.into();
    config["concurrency_total"] = total.into();
    crate::run::exporter::label_shard(shard.label());
    Ok(())
}

/// A run id as the flag gives it: 1 to 16 hex digits, not zero.
pub fn run_id(text: &str, flag: &str) -> Result<u64, String> {
    let t = text.trim().trim_start_matches("0x");
    match u64::from_str_radix(t, 16) {
        Ok(id) if id != 0 && t.len() <= 16 => Ok(id),
        _ => Err(format!(
            "{flag} {text}: write 1 to 16 hex digits, not all zero (e.g. 5eed00000000cafe)"
        )),
    }
}

/// When the load starts: RFC 3339 in UTC, or `+DURATION` from `now`.
pub fn start_at(text: &str, now: SystemTime) -> Result<SystemTime, String> {
    let t = text.trim();
    let at = match t.strip_prefix('+') {
        Some(d) => now + units::duration(d).map_err(|e| format!("--start-at {text}: {e}"))?,
        None => humantime::parse_rfc3339_weak(t).map_err(|_| {
            format!("--start-at {text}: write a UTC time such as 2026-11-25T17:00:00Z, or +30s")
        })?,
    };
    if let Ok(ago) = now.duration_since(at)
        && ago > Duration::from_secs(3600)
    {
        return Err(format!(
            "--start-at {text}: that was {:.0} minutes ago; give a time ahead (every agent would start late)",
            ago.as_secs_f64() / 60.0
        ));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_and_start_times_parse_or_say_how() {
        assert_eq!(run_id("cafe", "--run-id"), Ok(0xcafe));
        assert_eq!(
            run_id("0x5eed00000000cafe", "--run-id"),
            Ok(0x5eed_0000_0000_cafe)
        );
        for bad in ["0", "xyz", "12345678901234567"] {
            let err = run_id(bad, "--run-id").expect_err(bad);
            assert!(err.starts_with(&format!("--run-id {bad}: write")), "{err}");
        }
        let now = humantime::parse_rfc3339("2026-11-25T17:00:00Z").expect("time");
        assert_eq!(start_at("+30s", now), Ok(now + Duration::from_secs(30)));
        assert_eq!(
            start_at("2026-11-25T17:00:05Z", now),
            Ok(now + Duration::from_secs(5))
        );
        for (bad, says) in [
            ("tomorrow", "UTC time"),
            ("+soon", "--start-at +soon"),
            ("2026-11-25T15:00:00Z", "120 minutes ago"),
        ] {
            let err = start_at(bad, now).expect_err(bad);
            assert!(err.contains(says), "{bad}: expected {says:?} in {err:?}");
        }
    }
}
