//! `mailbench mailbox`: mail-store workloads, over POP3 and IMAP. `populate` fills
//! mailboxes over LMTP (with `send`), `append` over IMAP APPEND (with flags); `pop3` runs
//! rabid's job (sessions that download and delete a share of the messages) and `imap`
//! imaptest's (a mix of commands per session), both as drivers of the load engine;
//! `profile` runs virtual users of a scenario, each on its own schedule, up to a capacity;
//! `arrival` times mail injected over SMTP until it is visible over IMAP (a relay run whose
//! receiver is the store). `labs` starts the lab store (filled when asked) and a lab
//! Postfix they run on; `bench` runs a workload on them while the store's processes are
//! watched (`net` hands it the bytes the clients counted); `fault` crashes the lab store
//! during a fill (`populate --fault`) and looks for every accepted message afterwards.
//! `plan` holds what the command line validated.

pub mod append;
pub mod arrival;
pub mod bench;
pub mod fault;
pub mod imap;
pub mod labs;
pub mod net;
pub mod plan;
pub mod pop3;
pub mod populate;
pub mod profile;

use std::sync::Arc;

use crate::load;
use crate::shutdown::Shutdown;
use crate::stats::results::Results;
use crate::stats::summary::{ImapSummary, Pop3Summary, Summary, Vocabulary};

use imap::ImapDriver;
use plan::{ImapPlan, Pop3Plan};
use pop3::Pop3Driver;

/// What `mailbox pop3`'s `--threshold` may name (its kind of run holds it).
pub const POP3_THRESHOLDS: Vocabulary = crate::stats::kind::pop3::POP3.thresholds;

/// Runs a POP3 workload to completion (or until stopped) against the plan's server and
/// users. The error is the one line that says the server never accepted a connection.
pub async fn run_pop3(mut plan: Pop3Plan, shutdown: Shutdown) -> Result<Results, String> {
    if plan.sessions.users.is_empty() {
        return Err("no mailbox users to log in as".into());
    }
    // A POP3 session holds its mailbox until QUIT: one session per connection.
    plan.load.per_conn = (1, 1);
    plan.load.units = crate::stats::kind::pop3::POP3.units;
    let mut config = plan.config_json.clone();
    config["target"] = plan.sessions.target.as_ref().map(|t| t.to_string()).into();
    if plan.load.shard.is_whole() {
        config["users"] = plan.sessions.users.len().into();
    }
    let plan = Arc::new(plan);
    let loaded = load::run(plan.load.clone(), Pop3Driver::new(plan.clone()), shutdown).await?;
    let shard = shard_record(&plan.load, &plan.sessions, loaded.start_offset_s);
    let mut r = loaded.into_results(
        crate::stats::kind::pop3::POP3.name,
        config,
        |total, intended, duration_s, active_s| {
            Summary::Pop3(Pop3Summary::derive(total, intended, duration_s, active_s))
        },
    );
    r.extra.extend(shard.map(|s| ("shard".to_string(), s)));
    Ok(r)
}

/// What a session workload's results record of its agent's part (`extra.shard`): the
/// split as `send` records it and, when split, the users this agent logged in as (so
/// that `merge` can prove that no two agents shared a user).
fn shard_record(
    load: &load::LoadPlan,
    sessions: &plan::Sessions,
    start_offset_s: Option<f64>,
) -> Option<serde_json::Value> {
    let mut s = load::shard::record(load.shard, load.start_at, start_offset_s)?;
    if !load.shard.is_whole() {
        let users: Vec<&str> = sessions.users.iter().map(|u| u.address.as_str()).collect();
        s["users"] = users.into();
    }
    Some(s)
}

/// What `mailbox imap`'s `--threshold` may name (its kind of run holds it).
pub const IMAP_THRESHOLDS: Vocabulary = crate::stats::kind::imap::IMAP.thresholds;

/// Runs an IMAP workload to completion (or until stopped) against the plan's server and
/// users. The error is the one line that says the server never accepted a connection.
pub async fn run_imap(mut plan: ImapPlan, shutdown: Shutdown) -> Result<Results, String> {
    if plan.sessions.users.is_empty() {
        return Err("no mailbox users to log in as".into());
    }
    plan.load.units = crate::stats::kind::imap::IMAP.units;
    let run_id = *plan.load.run_id.get_or_insert_with(crate::run::new_run_id);
    let mut config = plan.config_json.clone();
    config["target"] = plan.sessions.target.as_ref().map(|t| t.to_string()).into();
    if plan.load.shard.is_whole() {
        config["users"] = plan.sessions.users.len().into();
    }
    let plan = Arc::new(plan);
    let driver = ImapDriver::new(plan.clone(), run_id);
    let loaded = load::run(plan.load.clone(), driver, shutdown).await?;
    let shard = shard_record(&plan.load, &plan.sessions, loaded.start_offset_s);
    let mut r = loaded.into_results(
        crate::stats::kind::imap::IMAP.name,
        config,
        |total, intended, duration_s, active_s| {
            Summary::Imap(ImapSummary::derive(total, intended, duration_s, active_s))
        },
    );
    r.extra.extend(shard.map(|s| ("shard".to_string(), s)));
    Ok(r)
}
