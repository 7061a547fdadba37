//! The labs a mailbox benchmark stands on, shared by the workloads (`bench`) and by
//! `arrival`: a lab store started (and filled over LMTP when asked), a lab Postfix that
//! delivers into it, and why a mailbox run produced no results.

use std::sync::Arc;

use super::populate::aim;
use crate::lab::{LabError, LabOptions, Mta, MtaLab, Store, StoreLab, StoreOptions};
use crate::run::live::say;
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::stats::Results;
use crate::transport::target::Target;

/// The lab store to start.
pub struct StoreSetup {
    /// Which store.
    pub store: Store,
    /// Its users, mail format and placement, TLS and settings, as the store flags gave
    /// them.
    pub options: StoreOptions,
    /// The results file the store's log (and a lab MTA's in front of it) is kept beside
    /// (`FILE.storelog.0`, `FILE.maillog.0`), when there is one.
    pub keep_logs: Option<std::path::PathBuf>,
}

/// Filling the mailboxes first.
pub struct Fill {
    /// The generator's plan (content, concurrency); aimed at the store when it starts.
    pub send: SendPlan,
    /// Messages per user.
    pub per_user: u64,
    /// Folders per user, INBOX included.
    pub folders: u32,
}

/// Why a mailbox benchmark produced no results.
#[derive(Debug)]
pub enum MailboxError {
    /// The user's input: a setting the store refused, a server that never answered (exit 1).
    Usage(String),
    /// The run broke down (exit 2).
    Failed(String),
}

/// Starts a lab store and fills it when asked: what `lab dovecot` hands over and every
/// lab workload starts from. The store is stopped and removed when the returned lab drops.
pub async fn store(
    setup: StoreSetup,
    fill: Option<Fill>,
    shutdown: &Shutdown,
) -> Result<(Arc<dyn StoreLab>, Option<Results>), MailboxError> {
    setup.store.check().map_err(MailboxError::Usage)?;
    let lab = start(setup).await?;
    for n in lab.notices() {
        say(&format!("mailbench mailbox: notice: {n}"));
    }
    let filled = match fill {
        Some(f) => Some(fill_store(&lab, f, shutdown).await?),
        None => None,
    };
    Ok((lab, filled))
}

/// Fills a running lab store's mailboxes over LMTP as `f` says (its folders made first).
pub async fn fill_store(
    lab: &Arc<dyn StoreLab>,
    mut f: Fill,
    shutdown: &Shutdown,
) -> Result<Results, MailboxError> {
    prepare(lab, f.folders).await?;
    aim(
        &mut f.send,
        tcp(lab.endpoints().lmtp),
        lab.users(),
        f.per_user,
        f.folders,
    );
    let r = crate::send::run(f.send, shutdown.clone())
        .await
        .map_err(MailboxError::Failed)?;
    say(&format!(
        "mailbench mailbox: filled {} users with {} messages in {:.2} s",
        lab.users().len(),
        r.counters.accepted,
        r.duration_s
    ));
    Ok(r)
}

/// Starts the store off the runtime (it waits for the store to greet); a setting the store
/// refuses is the user's input, anything else a failure.
/// Has the store make the fill's folders (off the runtime: it may run an admin session).
async fn prepare(lab: &Arc<dyn StoreLab>, folders: u32) -> Result<(), MailboxError> {
    let lab = lab.clone();
    match tokio::task::spawn_blocking(move || lab.prepare_folders(folders)).await {
        Ok(r) => r.map_err(|e| MailboxError::Failed(e.to_string())),
        Err(e) => Err(MailboxError::Failed(e.to_string())),
    }
}

async fn start(s: StoreSetup) -> Result<Arc<dyn StoreLab>, MailboxError> {
    match tokio::task::spawn_blocking(move || s.store.start(&s.options)).await {
        Ok(Ok(lab)) => Ok(Arc::from(lab)),
        Ok(Err(e @ LabError::Setting(_))) => Err(MailboxError::Usage(e.to_string())),
        Ok(Err(e)) => Err(MailboxError::Failed(e.to_string())),
        Err(e) => Err(MailboxError::Failed(e.to_string())),
    }
}

/// The lab MTA that injects into a store: the first in the registry that delivers over
/// LMTP.
pub fn store_mta() -> Option<Mta> {
    Mta::first_having(|f| f.lmtp_onward)
}

/// Starts the lab MTA that delivers into a store ([`store_mta`]) off the runtime; a
/// setting it refuses is the user's input.
pub async fn start_mta(opts: LabOptions) -> Result<Arc<dyn MtaLab>, MailboxError> {
    let mta = store_mta()
        .ok_or_else(|| MailboxError::Usage("no lab MTA delivers over LMTP yet".into()))?;
    mta.check().map_err(MailboxError::Usage)?;
    match tokio::task::spawn_blocking(move || mta.start(&opts)).await {
        Ok(Ok(lab)) => Ok(Arc::from(lab)),
        Ok(Err(e @ LabError::Setting(_))) => Err(MailboxError::Usage(e.to_string())),
        Ok(Err(e)) => Err(MailboxError::Failed(e.to_string())),
        Err(e) => Err(MailboxError::Failed(e.to_string())),
    }
}

/// The TCP target of a lab's listening address (its name is its address).
pub(super) fn tcp(addr: std::net::SocketAddr) -> Target {
    Target::Tcp {
        addr,
        host: addr.ip().to_string(),
    }
}
