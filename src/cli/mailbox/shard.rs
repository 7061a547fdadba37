//! `--shard`, `--start-at` and `--run-id` for `mailbox pop3` and `imap`: `send`'s split
//! (`plan::scale`: the run id, the shared start, every N-th unit of the schedule, 1/N of
//! -c) plus the users dealt to agents disjointly, so that no two agents log in as one
//! user and each agent's state checks stay exact.

use std::sync::Arc;

use crate::cli::args::ScaleArgs;
use crate::load::LoadPlan;
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
