//! `--shard`, `--start-at` and `--run-id` for `mailbox pop3`, `imap` and `profile`:
//! `send`'s split (`plan::scale`: the run id, the shared start, every N-th unit of the
//! schedule, 1/N of -c) plus the users dealt to agents disjointly, so that no two agents
//! log in as one user and each agent's state checks stay exact; a profile's virtual users
//! dealt the same way, its steps on the shared clock.

use std::sync::Arc;

use crate::cli::args::ScaleArgs;
use crate::load::LoadPlan;
use crate::load::shard::Shard;
use crate::mailbox::plan::Sessions;

/// Applies the scale-out flags to a session workload's plan; `env` looks up the
/// launcher's index variables (`--shard auto/N`). A split run records the run's users in
/// `config.users` (every agent's agrees); the agent's own are in its `extra.shard`.
pub(super) fn apply(
    load: &mut LoadPlan,
    config: &mut serde_json::Value,
    sessions: &mut Sessions,
    a: &ScaleArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    crate::cli::plan::scale::apply_load(load, config, a, 1, env)?;
    let shard = load.shard;
    if shard.is_whole() {
        return Ok(());
    }
    let spec = a.shard.as_deref().unwrap_or_default();
    if sessions.target.is_none() {
        return Err(format!(
            "--shard {spec}: every agent would start a lab store of its own; split a run against one store: give every agent --target and --users-file (mailbench lab dovecot starts one)"
        ));
    }
    let total = sessions.users.len() as u64;
    if total < shard.count {
        return Err(format!(
            "--shard {spec}: {total} user(s) in --users-file cannot be dealt to {} agents without two logging in as one user; give {} users or more",
            shard.count, shard.count
        ));
    }
    sessions.users = Arc::new(shard.split(&sessions.users));
    config["users"] = total.into();
    Ok(())
}

/// A split profile's part: this agent, the shared start and the run id.
pub(super) struct ProfileSplit {
    /// This agent.
    pub shard: Shard,
    /// The shared start.
    pub start_at: Option<std::time::SystemTime>,
    /// The shared run id.
    pub run_id: Option<u64>,
}

/// `mailbox profile`'s scale-out flags: refused with `--lab` (each agent would start a
/// store of its own), without one --run-id and one absolute --start-at (the steps must
/// open at the same instants on every agent), and when the first step has fewer users
/// than agents (some agent would judge a step of none). `first_step` is the run's first
/// step's users.
pub(super) fn profile(
    a: &ScaleArgs,
    lab: bool,
    first_step: u64,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ProfileSplit, String> {
    use crate::cli::plan::scale;
    let run_id = a
        .run_id
        .as_deref()
        .map(|id| scale::run_id(id, "--run-id"))
        .transpose()?;
    let start_at = a
        .start_at
        .as_deref()
        .map(|t| scale::start_at(t, std::time::SystemTime::now()))
        .transpose()?;
    let shard = match &a.shard {
        Some(spec) => Shard::parse(spec, env)?,
        None => Shard::WHOLE,
    };
    let split = ProfileSplit {
        shard,
        start_at,
        run_id,
    };
    if shard.is_whole() {
        return Ok(split);
    }
    let spec = a.shard.as_deref().unwrap_or_default();
    let absolute = "$(date -u -d '+30 seconds' +%Y-%m-%dT%H:%M:%SZ)";
    if lab {
        return Err(format!(
            "--shard {spec}: every agent would start a lab store of its own; split a profile against one store: give every agent --imap (and --pop3, --lmtp) and --users-file (mailbench lab dovecot starts one)"
        ));
    }
    if run_id.is_none() {
        return Err(format!(
            "--shard {spec}: give every agent the same --run-id (e.g. --run-id $(openssl rand -hex 8)), so that merge sees one run"
        ));
    }
    match a.start_at.as_deref().map(str::trim) {
        None => {
            return Err(format!(
                "--shard {spec}: give every agent the same --start-at (a UTC time, e.g. --start-at {absolute}), so that each step opens at the same instant on every agent"
            ));
        }
        Some(rel) if rel.starts_with('+') => {
            return Err(format!(
                "--start-at {rel}: counted from each agent's own start, so agents started apart would not open their steps together; give every agent of --shard {spec} one UTC time, e.g. --start-at {absolute}"
            ));
        }
        _ => {}
    }
    if first_step < shard.count {
        return Err(format!(
            "--shard {spec}: the first step has {first_step} virtual user(s), fewer than the {} agents (an agent would run a step of none); start with {} users or more",
            shard.count, shard.count
        ));
    }
    crate::run::exporter::label_shard(shard.label());
    Ok(split)
}
