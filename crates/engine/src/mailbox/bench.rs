//! A mailbox benchmark as a whole: a lab store when asked (started first, removed when this
//! returns, however it returns), its mailboxes filled, the workload run against it while
//! the store's processes are watched, and what the store's limits were.

use std::sync::Arc;

// The store a workload runs on is started by `labs` (shared with `arrival`); callers
// name it here, with the workload they hand it to.
pub use super::labs::{Fill, MailboxError, StoreSetup, store};

use super::fault::{Census, MessageId, census, record};
use super::labs::{fill_store, start_mta, tcp};
use super::plan::{ImapPlan, Pop3Plan};
use super::populate::aim;
use super::profile::ProfilePlan;
use crate::lab::{StoreLab, StoreUser};
use crate::relay::fault::{Armed, FaultPlan, Fired, arm};
use crate::run::sampler::{Pids, Sampler};
use crate::shutdown::Shutdown;
use crate::stats::Results;
use crate::stats::timelog::TimeLog;
use crate::transport::count::NetTally;
use crate::transport::target::Target;
use std::time::Instant;

/// A fill that left mailboxes short is no ground for a workload: its numbers would be
/// taken on other mailboxes than the ones asked for.
fn complete(filled: &Results) -> Result<(), MailboxError> {
    let c = &filled.counters;
    if c.accepted == c.sent && !filled.interrupted {
        return Ok(());
    }
    let first = filled
        .errors
        .first()
        .and_then(|e| e.sample.as_deref())
        .map_or(String::new(), |s| format!(" (first error: {s})"));
    let cut = if filled.interrupted {
        "interrupted while "
    } else {
        ""
    };
    Err(MailboxError::Failed(format!(
        "{cut}filling the mailboxes: {} of {} messages delivered{first}; nothing was measured",
        c.accepted, c.sent
    )))
}

/// A mailbox workload, planned.
pub enum Workload {
    /// `mailbox pop3`.
    Pop3(Pop3Plan),
    /// `mailbox imap`.
    Imap(ImapPlan),
    /// `mailbox profile`.
    Profile(Box<ProfilePlan>),
}

impl Workload {
    fn progress(&self) -> crate::run::Progress {
        match self {
            Workload::Pop3(p) => p.load.progress,
            Workload::Imap(p) => p.load.progress,
            Workload::Profile(p) => crate::run::Progress {
                interval: p.interval,
                quiet: p.quiet,
            },
        }
    }

    /// Aims the workload at a lab store: its POP3 or IMAP port (the implicit-TLS one with
    /// `--tls implicit`) and its users.
    fn aim(&mut self, lab: &dyn StoreLab) {
        let e = lab.endpoints();
        let users = Arc::new(lab.users().to_vec());
        let implicit = |tls: &crate::transport::tls::TlsPlan| {
            tls.mode == crate::transport::tls::TlsMode::Implicit
        };
        match self {
            Workload::Pop3(p) => {
                let s = &mut p.sessions;
                let port = e.pop3s.filter(|_| implicit(&s.tls)).unwrap_or(e.pop3);
                s.target = Some(tcp(port));
                s.users = users;
            }
            Workload::Imap(p) => {
                let s = &mut p.sessions;
                let port = e.imaps.filter(|_| implicit(&s.tls)).unwrap_or(e.imap);
                s.target = Some(tcp(port));
                s.users = users;
            }
            Workload::Profile(p) => {
                p.imap = Some(tcp(e.imap));
                p.pop3 = Some(tcp(e.pop3));
                p.lmtp = Some(tcp(e.lmtp));
                p.users = users;
            }
        }
    }

    /// Counts the bytes of the workload's connections in `tally`.
    fn count(&mut self, tally: &NetTally) {
        let count = Some(tally.clone());
        match self {
            Workload::Pop3(p) => p.sessions.count = count,
            Workload::Imap(p) => p.sessions.count = count,
            Workload::Profile(p) => p.connect.count = count,
        }
    }

    async fn run(self, shutdown: Shutdown, sut: Pids) -> Result<Results, String> {
        match self {
            Workload::Pop3(p) => super::run_pop3(p, shutdown).await,
            Workload::Imap(p) => super::run_imap(p, shutdown).await,
            Workload::Profile(p) => super::profile::run(*p, shutdown, sut).await,
        }
    }
}

/// Runs a mailbox workload (`mailbox pop3`, `mailbox imap`) against a lab store when
/// asked, filled first, with the store's processes (or `sut_pids`) watched.
pub async fn workload(
    mut work: Workload,
    store: Option<StoreSetup>,
    fill: Option<Fill>,
    sut_pids: Vec<u32>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    crate::limits::raise_nofile();
    let keep = store.as_ref().and_then(|s| s.keep_logs.clone());
    let (lab, filled) = match store {
        Some(s) => {
            let (lab, filled) = self::store(s, fill, &shutdown).await?;
            filled.as_ref().map(complete).transpose()?;
            work.aim(lab.as_ref());
            (Some(lab), filled)
        }
        None => (None, None),
    };
    // A profile's users may send through a lab Postfix that delivers into the store.
    let mta = match (&mut work, &lab) {
        (Workload::Profile(p), Some(l)) if p.lab_mta => {
            let opts = crate::lab::LabOptions {
                hops: 1,
                queue: crate::lab::QueueKind::Tmpfs,
                settings: vec![("default_process_limit".into(), "100".into())],
                limits: Default::default(),
                relay: l.endpoints().lmtp,
                hold: false,
                dns: None,
                lookup: None,
                logging: crate::lab::MtaLogging::On,
                between: None,
                dkim: None,
                relay_lmtp: true,
                starttls: false,
            };
            let m = start_mta(opts).await?;
            p.smtp = Some(tcp(m.entry()));
            Some(m)
        }
        _ => None,
    };
    let start = std::time::Instant::now();
    // Without a lab or --sut-pid no store process is watched: nothing to report of it.
    let observing = lab.is_some() || !sut_pids.is_empty();
    // A profile reads the store itself on its own intervals (they end with its steps).
    let own_series = matches!(work, Workload::Profile(_));
    let (watched, watched_mta) = (lab.clone(), mta.clone());
    let pids: Pids = Arc::new(move || {
        let mut pids = crate::stats::sut::descendants(&sut_pids);
        pids.extend(watched.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids.extend(watched_mta.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids
    });
    // The store's network bytes, counted at the clients, when the store is watched.
    let net = observing.then(|| {
        let tally = NetTally::default();
        work.count(&tally);
        super::net::reader(&tally)
    });
    let interval = work.progress().interval;
    let sampler = Sampler::start(pids.clone(), net, None, None, interval, start);
    let result = work.run(shutdown, pids).await;
    let observed = sampler.finish().await;
    let mut r = result.map_err(MailboxError::Usage)?;
    if !own_series {
        observed.fill(&mut r.series, r.started_at_us);
    }
    if observing {
        let report = observed.report(&r.series);
        r.extra.insert("sut".into(), report);
    }
    r.forget_unobserved_sut();
    if let Some(f) = filled {
        r.extra.insert(
            "populate".into(),
            serde_json::to_value(&f.summary).unwrap_or_default(),
        );
    }
    if let Some(l) = &lab {
        let limits: serde_json::Map<String, serde_json::Value> =
            l.limits().into_iter().map(|(k, v)| (k, v.into())).collect();
        r.extra.insert("store_limits".into(), limits.into());
        lab_extras(l.as_ref(), keep.as_deref(), &mut r);
    }
    if let (Some(m), Some(base)) = (&mta, &keep) {
        r.extra
            .insert("mta_logs".into(), m.keep_logs(base, "maillog").into());
    }
    Ok(r)
}

/// Runs `mailbox populate` on a lab store: the LMTP delivery rate into a fresh store; with
/// `fault`, the store crashed (or its power cut) during the fill, restarted, and every
/// accepted message looked for afterwards. (Against a server of one's own, `populate_own`.)
pub async fn populate(
    setup: StoreSetup,
    fill: Fill,
    fault: Option<FaultPlan>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    crate::limits::raise_nofile();
    let keep = setup.keep_logs.clone();
    let (lab, _) = store(setup, None, &shutdown).await?;
    let mut r = populate_on(&lab, fill, fault, shutdown).await?;
    lab_extras(lab.as_ref(), keep.as_deref(), &mut r);
    Ok(r)
}

/// [`populate`] on a lab store already running (which outlives the run: what a test reads
/// afterwards with a client of its own).
pub async fn populate_on(
    lab: &Arc<dyn StoreLab>,
    mut fill: Fill,
    fault: Option<FaultPlan>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    let folders = fill.folders;
    let run = *fill
        .send
        .load
        .run_id
        .get_or_insert_with(crate::run::new_run_id);
    let accepts = Arc::new(TimeLog::default());
    fill.send.accept_log = Some(accepts.clone());
    let armed = fault.map(|f| {
        arm(
            f,
            lab.clone(),
            accepts.clone(),
            Instant::now(),
            shutdown.clone(),
            None,
        )
    });
    let filled = fill_store(lab, fill, &shutdown).await;
    let fault = settle(armed).await?;
    let mut r = filled?;
    r.command = "populate".into();
    if let Some((plan, fired)) = fault {
        let c = look(lab.as_ref(), folders, run).await?;
        // LMTP's generator writes `<RUN.SEQ@mailbench.test>`, the sequence in decimal.
        let id: MessageId = |run, seq| format!("<{run:016x}.{seq}@mailbench.test>");
        record(&mut r, plan, fired, &accepts, &c, id, run);
    }
    Ok(r)
}

/// Waits for an armed fault to have fired and the store to be up again (or to learn it
/// never will); a crash or restart that failed fails the run.
async fn settle(armed: Option<Armed>) -> Result<Option<(FaultPlan, Option<Fired>)>, MailboxError> {
    match armed {
        Some(a) => a.finish().await.map(Some).map_err(MailboxError::Failed),
        None => Ok(None),
    }
}

/// Reads every mailbox of the lab store over IMAP after a fault.
async fn look(lab: &dyn StoreLab, folders: u32, run: u64) -> Result<Census, MailboxError> {
    // A mailbox whose lock a power cut left behind empty stays locked until Dovecot takes
    // the lock for stale (2 minutes unchanged): a command may wait that long, and more.
    let connect =
        super::profile::user::connect_options(std::time::Duration::from_secs(10), LOOK_LIMIT);
    census(
        &tcp(lab.endpoints().imap),
        lab.users(),
        folders,
        run,
        &connect,
    )
    .await
    .map_err(MailboxError::Failed)
}

/// How long one IMAP command of the look after a fault may take.
const LOOK_LIMIT: std::time::Duration = std::time::Duration::from_secs(200);

/// Runs `mailbox populate` on a store of one's own: the fill, aimed at its LMTP `target`
/// and its `users`, is a `send` run recorded under the populate name.
pub async fn populate_own(
    mut fill: Fill,
    target: Target,
    users: &[StoreUser],
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    aim(&mut fill.send, target, users, fill.per_user, fill.folders);
    let mut r = crate::send::run(fill.send, shutdown)
        .await
        .map_err(MailboxError::Usage)?;
    r.command = "populate".into();
    Ok(r)
}

/// Runs `mailbox populate --via imap`: APPEND into a lab store (started, and removed when
/// this returns) or into the plan's own.
pub async fn append(
    mut plan: super::append::AppendPlan,
    setup: Option<StoreSetup>,
    fault: Option<FaultPlan>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    crate::limits::raise_nofile();
    let keep = setup.as_ref().and_then(|s| s.keep_logs.clone());
    let lab = match setup {
        Some(s) => Some(store(s, None, &shutdown).await?.0),
        None => None,
    };
    if let Some(l) = &lab {
        plan.imap = Some(tcp(l.endpoints().imap));
        plan.users = l.users().to_vec();
    }
    let mut r = append_on(plan, lab.as_ref(), fault, shutdown).await?;
    if let Some(l) = &lab {
        lab_extras(l.as_ref(), keep.as_deref(), &mut r);
    }
    Ok(r)
}

/// [`append`] into the plan's server, which is `lab` when given (a lab store already
/// running, which outlives the run; a fault needs one).
pub async fn append_on(
    mut plan: super::append::AppendPlan,
    lab: Option<&Arc<dyn StoreLab>>,
    fault: Option<FaultPlan>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    let accepts = Arc::new(TimeLog::default());
    plan.accept_log = Some(accepts.clone());
    let folders = plan.folders;
    let armed = match (fault, lab) {
        (Some(f), Some(l)) => Some(arm(
            f,
            l.clone(),
            accepts.clone(),
            Instant::now(),
            shutdown.clone(),
            None,
        )),
        (Some(f), None) => {
            return Err(MailboxError::Usage(format!(
                "--fault {}: a fault acts on a lab store started here; add --lab dovecot",
                f.label()
            )));
        }
        _ => None,
    };
    let filled = super::append::fill(plan, shutdown).await;
    let fault = settle(armed).await?;
    let mut r = filled.map_err(MailboxError::Usage)?;
    if let (Some(l), Some((plan, fired))) = (lab, fault) {
        let run = u64::from_str_radix(&r.run_id, 16)
            .map_err(|e| MailboxError::Failed(format!("run id {:?}: {e}", r.run_id)))?;
        let c = look(l.as_ref(), folders, run).await?;
        // APPEND's generator writes `<RUN.SEQ@mailbench.test>`, the sequence in hex.
        let id: MessageId = |run, seq| format!("<{run:016x}.{seq:x}@mailbench.test>");
        record(&mut r, plan, fired, &accepts, &c, id, run);
    }
    Ok(r)
}

/// What every lab run keeps of its store: the directories it made (kept in the results so
/// that a leftover can be traced), what it warned of at start (`lab_notices`), its log beside the results file (`keep`) and, when
/// asked for, the store's own statistics.
fn lab_extras(lab: &dyn StoreLab, keep: Option<&std::path::Path>, r: &mut Results) {
    let dirs: Vec<String> = lab.dirs().iter().map(|d| d.display().to_string()).collect();
    r.extra.insert("lab_dirs".into(), dirs.into());
    if !lab.notices().is_empty() {
        r.extra
            .insert("lab_notices".into(), lab.notices().to_vec().into());
    }
    if let Some(base) = keep {
        r.extra
            .insert("store_logs".into(), lab.keep_logs(base, "storelog").into());
    }
    let stats = lab.server_stats();
    if !stats.is_empty() {
        r.extra.insert(
            "store_stats".into(),
            serde_json::to_value(stats).unwrap_or_default(),
        );
    }
}
