//! `mailbox arrival`: mail injected over SMTP into an MTA that delivers into the mail store
//! (the lab's Postfix → LMTP → the lab's Dovecot, or one's own), and each message timed
//! until it is visible over IMAP — MStone's unbuilt "deliver over SMTP and see when it
//! arrives over IMAP", and SPECmail's delivery-time rule (`p95(e2e)<60s`) as a threshold.
//!
//! It is a relay run whose receiver is the store: one IMAP session per watched user sits
//! in IDLE, and on EXISTS fetches the new messages' trace headers, confirming each arrival
//! in the run's delivery record, so acceptance, delivery rate, end to end (from the MTA's
//! acceptance to visibility), loss and duplicates are the relay's own figures.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::labs::{self, MailboxError, StoreSetup, start_mta, tcp};
use crate::imap::conn::{ImapConn, Login};
use crate::imap::proto::{Code, Command, Data};
use crate::imap::steps::{STEPS, metric};
use crate::lab::{LabOptions, MtaLab, QueueKind, StoreLab, StoreUser};
use crate::message::trace::{HEADER_NAME, Trace};
use crate::relay::run::{Receiver, RelayRun};
use crate::run::sampler::Pids;
use crate::send::SendPlan;
use crate::send::plan::Addresses;
use crate::shutdown::Shutdown;
use crate::sink::delivery::{Confirmed, Delivery};
use crate::stats::results::{RunParts, SelfReport};
use crate::stats::summary::{ImapSummary, Summary};
use crate::stats::timelog::TimeLog;
use crate::stats::{Recorder, Results};
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;

/// How the mail gets into the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// Through a lab Postfix that delivers over LMTP.
    Postfix,
    /// Straight into the store's LMTP (the store's own share of the time).
    Lmtp,
    /// Through an MTA of one's own (`--smtp`).
    Smtp,
}

/// A validated `mailbox arrival` run.
pub struct ArrivalPlan {
    /// The generator's plan; its targets and recipients are set when the path is known.
    pub send: SendPlan,
    /// How the mail gets in.
    pub path: Path,
    /// The lab MTA's own settings.
    pub postconf: Vec<(String, String)>,
    /// An MTA of one's own.
    pub smtp: Option<Target>,
    /// The store's IMAP (one's own; the lab's is filled in).
    pub imap: Option<Target>,
    /// The users (one's own; the lab's are filled in).
    pub users: Vec<StoreUser>,
    /// How many users are watched (and mailed).
    pub watchers: usize,
    /// Longest wait for arrivals after the injection.
    pub drain_timeout: Duration,
    /// More processes to observe.
    pub sut_pids: Vec<u32>,
}

/// Runs it: the labs started and removed, the watchers in IDLE before the first message.
pub async fn run(
    mut plan: ArrivalPlan,
    store: Option<StoreSetup>,
    shutdown: Shutdown,
) -> Result<Results, MailboxError> {
    crate::limits::raise_nofile();
    let keep = store.as_ref().and_then(|s| s.keep_logs.clone());
    let store_lab: Option<Arc<dyn StoreLab>> = match store {
        Some(s) => Some(labs::store(s, None, &shutdown).await?.0),
        None => None,
    };
    if let Some(l) = &store_lab {
        plan.imap = Some(tcp(l.endpoints().imap));
        plan.users = l.users().to_vec();
    }
    let imap = plan
        .imap
        .clone()
        .ok_or_else(|| MailboxError::Usage("no IMAP server to watch: give --imap".into()))?;
    let watched: Vec<StoreUser> = plan.users.iter().take(plan.watchers).cloned().collect();
    if watched.is_empty() {
        return Err(MailboxError::Usage("no mailbox users to watch".into()));
    }
    let mta: Option<Arc<dyn MtaLab>> = match (plan.path, &store_lab) {
        (Path::Postfix, Some(l)) => {
            let opts = LabOptions {
                hops: 1,
                queue: QueueKind::Tmpfs,
                settings: plan.postconf.clone(),
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
            Some(start_mta(opts).await?)
        }
        _ => None,
    };
    let entry = match (plan.path, &mta, &store_lab, &plan.smtp) {
        (Path::Postfix, Some(m), _, _) => tcp(m.entry()),
        (Path::Lmtp, _, Some(l), _) => tcp(l.endpoints().lmtp),
        (Path::Smtp, _, _, Some(t)) => t.clone(),
        _ => {
            return Err(MailboxError::Usage(format!(
                "no way in: give --lab {} (with --mta postfix or lmtp) or --smtp",
                crate::lab::Store::names()
            )));
        }
    };
    plan.send.client.targets = vec![entry];
    plan.send.client.lmtp = plan.path == Path::Lmtp;
    let to = watched
        .iter()
        .map(|u| crate::message::users::User {
            address: u.address.clone(),
            password: None,
            flags: String::new(),
        })
        .collect();
    plan.send.message.to = Addresses::List(Arc::new(to));
    plan.send.message.rcpts = 1;
    let run_id = crate::run::new_run_id();
    let accepts = Arc::new(TimeLog::default());
    plan.send.load.run_id = Some(run_id);
    plan.send.accept_log = Some(accepts.clone());
    let connect = ConnectOptions {
        connect_timeout: plan.send.client.connect_timeout,
        command_timeout: plan.send.client.command_timeout,
        source_ip: None,
        tls: None,
        implicit_tls: false,
        count: None,
    };
    let delivery = Arc::new(Delivery::tracking(run_id));
    let open = open_all(&imap, watched, &connect, &delivery).await?;
    // The watchers start now, and the first message only once every one of them is in
    // IDLE (the server said so): injected earlier, a message is found when the IDLE
    // begins (or by a fetch), not announced, and its arrival is timed as no other is.
    let watch = Watching::start(open, delivery.clone());
    let watch = watch.ready(plan.send.client.command_timeout).await?;
    let (s, m, extra) = (store_lab.clone(), mta.clone(), plan.sut_pids.clone());
    let sut_pids: Pids = Arc::new(move || {
        let mut pids = crate::stats::sut::descendants(&extra);
        pids.extend(s.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids.extend(m.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids
    });
    // End to end starts where the relay's does, when the message's data was written: an
    // LMTP store can show a message over IMAP before its 250 reaches the client.
    let mut send = plan.send;
    send.data_end_log = Some(Arc::new(crate::stats::timelog::TimeLog::default()));
    let r = RelayRun {
        send,
        receiver: Receiver::Other(watch),
        drain_timeout: plan.drain_timeout,
        // Delivered into the store is not yet seen: Dovecot batches IDLE notifications
        // (half a second) and a busy watcher fetches late.
        settle: Duration::from_secs(10),
        sut_pids,
        accepts,
        delivery,
        queue_cmd: None,
        queue_device: mta
            .as_ref()
            .map(|l| crate::stats::host::Device::holding(&l.queue_dir())),
        flush: false,
        trace_io: false,
        mta: mta.as_ref().and_then(|_| labs::store_mta()),
        fault: None,
    };
    let mut results = crate::relay::run::run(r, mta.clone(), shutdown)
        .await
        .map_err(|e| match e {
            crate::relay::RelayError::Usage(e) => MailboxError::Usage(e),
            crate::relay::RelayError::Failed(e) => MailboxError::Failed(e),
        })?;
    results.command = "arrival".into();
    // One's own MTA and store, no --sut-pid: nothing of the system under test was seen.
    results.forget_unobserved_sut();
    if let Some(l) = &store_lab {
        let limits: serde_json::Map<String, serde_json::Value> =
            l.limits().into_iter().map(|(k, v)| (k, v.into())).collect();
        results.extra.insert("store_limits".into(), limits.into());
    }
    if let Some(base) = &keep {
        let logs = |l: Option<&dyn crate::lab::LabServer>, kind| l.map(|l| l.keep_logs(base, kind));
        if let Some(kept) = logs(store_lab.as_deref().map(|l| l as _), "storelog") {
            results.extra.insert("store_logs".into(), kept.into());
        }
        if let Some(kept) = logs(mta.as_deref().map(|l| l as _), "maillog") {
            results.extra.insert("mta_logs".into(), kept.into());
        }
    }
    Ok(results)
}

/// Logs every watcher in and selects its INBOX before the first message is sent: what
/// arrives from then on is above the UIDNEXT each one starts from.
async fn open_all(
    imap: &Target,
    users: Vec<StoreUser>,
    connect: &ConnectOptions,
    delivery: &Delivery,
) -> Result<Vec<(Watcher, ImapConn)>, MailboxError> {
    let mut opening = tokio::task::JoinSet::new();
    for user in users {
        let mut w = Watcher {
            imap: imap.clone(),
            connect: connect.clone(),
            key: delivery.correlator.key(&user.address),
            user,
            next_uid: 1,
        };
        opening.spawn(async move {
            let conn = w.open(true).await;
            (w, conn)
        });
    }
    let mut open = Vec::new();
    while let Some(joined) = opening.join_next().await {
        let (w, conn) = joined.map_err(|e| MailboxError::Failed(e.to_string()))?;
        let conn = conn.map_err(|e| match &e {
            // Nothing to watch at that address: the user's input.
            crate::imap::conn::ConnError::Link(l) if l.unreachable("").is_some() => {
                MailboxError::Usage(l.unreachable("IMAP server").unwrap_or_default())
            }
            _ => MailboxError::Failed(format!("watching {}: {e}", w.user.address)),
        })?;
        open.push((w, conn));
    }
    Ok(open)
}

/// The watchers, started before the run: each in IDLE, confirming arrivals in the run's
/// delivery record.
struct Watching {
    tasks: tokio::task::JoinSet<()>,
    /// One per watcher: its first IDLE confirmed, or why it was not.
    idle: Vec<(String, tokio::sync::oneshot::Receiver<Result<(), String>>)>,
    rec: Arc<Mutex<Recorder>>,
    /// The run's time zero, set when the relay run takes the watchers over.
    zero: Arc<std::sync::OnceLock<Instant>>,
    stop: Shutdown,
    began: Instant,
    cpu0: crate::stats::cpu::CpuTimes,
}

impl Watching {
    /// Starts every watcher on its open session.
    fn start(open: Vec<(Watcher, ImapConn)>, delivery: Arc<Delivery>) -> Watching {
        let rec = Arc::new(Mutex::new(Recorder::new()));
        let zero = Arc::new(std::sync::OnceLock::new());
        let stop = Shutdown::default();
        let (began, cpu0) = (Instant::now(), crate::stats::cpu::CpuTimes::of_self());
        let mut tasks = tokio::task::JoinSet::new();
        let mut idle = Vec::new();
        for (w, conn) in open {
            let (tx, rx) = tokio::sync::oneshot::channel();
            idle.push((w.user.address.clone(), rx));
            let seen = Seen {
                delivery: delivery.clone(),
                zero: zero.clone(),
                rec: rec.clone(),
                idle: Some(tx),
            };
            tasks.spawn(w.run(conn, seen, stop.clone()));
        }
        Watching {
            tasks,
            idle,
            rec,
            zero,
            stop,
            began,
            cpu0,
        }
    }

    /// Waits until every watcher is in IDLE (at most `limit` each), then hands over the
    /// receiver: its results are the watchers' IMAP sessions'.
    async fn ready(
        mut self,
        limit: Duration,
    ) -> Result<crate::relay::run::ReceiverRun, MailboxError> {
        for (user, rx) in std::mem::take(&mut self.idle) {
            let why = match tokio::time::timeout(limit, rx).await {
                Ok(Ok(Ok(()))) => continue,
                Ok(Ok(Err(e))) => e,
                Ok(Err(_)) => "the watcher ended".into(),
                Err(_) => format!("not in IDLE after {limit:?}"),
            };
            // Dropping the tasks ends the other watchers.
            return Err(MailboxError::Failed(format!("watching {user}: {why}")));
        }
        Ok(Box::new(move |delivery, stop, start| {
            let _ = self.zero.set(start);
            Box::pin(async move {
                let Watching {
                    mut tasks,
                    rec,
                    stop: mine,
                    began,
                    cpu0,
                    ..
                } = self;
                stop.stop.cancelled().await;
                mine.stop.cancel();
                while tasks.join_next().await.is_some() {}
                let total = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
                let secs = began.elapsed().as_secs_f64();
                let cpu = crate::stats::cpu::CpuTimes::of_self().since(&cpu0);
                let summary = ImapSummary::derive(&total, total.counters.sent, secs, secs);
                Results::assemble(RunParts {
                    command: "imap",
                    run_id: delivery.run.unwrap_or_default(),
                    started_us: crate::stats::clock::unix_us(),
                    duration_s: secs,
                    config: serde_json::json!({"watchers": true}),
                    summary: Summary::Imap(summary),
                    steps: STEPS,
                    self_report: SelfReport::new(cpu, secs, 0.0, Vec::new()),
                    total,
                    series: Vec::new(),
                })
            })
        }))
    }
}

/// Where a watcher reports: the run's delivery record, its time zero, the watchers' own
/// statistics, and (until its first IDLE) the run waiting for it.
struct Seen {
    delivery: Arc<Delivery>,
    zero: Arc<std::sync::OnceLock<Instant>>,
    rec: Arc<Mutex<Recorder>>,
    idle: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

impl Seen {
    fn record(&self, f: impl FnOnce(&mut Recorder)) {
        let mut r = self.rec.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut r);
    }

    /// Milliseconds since the run's time zero.
    fn now_ms(&self) -> u64 {
        self.zero
            .get()
            .map_or(0, |z| z.elapsed().as_millis() as u64)
    }

    /// Tells the run this watcher's first IDLE began, or why it did not.
    fn idle(&mut self, r: Result<(), String>) {
        if let Some(tx) = self.idle.take() {
            let _ = tx.send(r);
        }
    }
}

/// One watched mailbox.
struct Watcher {
    imap: Target,
    connect: ConnectOptions,
    user: StoreUser,
    /// The user's correlation key (what the generator's recipient counts under).
    key: u64,
    /// The first UID not seen yet.
    next_uid: u32,
}

impl Watcher {
    /// Logs in and examines INBOX; the first time, learns where new mail starts (UIDNEXT),
    /// after that goes on from what it has seen (nothing that arrived while it was away is
    /// skipped).
    async fn open(&mut self, first: bool) -> Result<ImapConn, crate::imap::conn::ConnError> {
        let login = Login::Login {
            user: self.user.address.clone(),
            pass: self.user.password.clone(),
        };
        let mut conn = ImapConn::open(&self.imap, &self.connect, false, &login).await?;
        let select = Command::Select {
            mailbox: "INBOX".into(),
            read_only: true,
        };
        let r = conn.required(&select).await?;
        if first {
            self.next_uid = r
                .data
                .iter()
                .find_map(|d| match d {
                    Data::Status {
                        code: Some(Code::UidNext(n)),
                        ..
                    } => Some(*n),
                    _ => None,
                })
                .unwrap_or(1);
        }
        Ok(conn)
    }

    /// Watches until `stop`, logging in again after a lost session.
    async fn run(mut self, conn: ImapConn, mut seen: Seen, stop: Shutdown) {
        let mut conn = Some(conn);
        while !stop.stop.is_cancelled() {
            let result = match conn.take() {
                Some(c) => self.watch(c, &mut seen, &stop).await,
                None => match self.open(false).await {
                    Ok(c) => self.watch(c, &mut seen, &stop).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = result {
                seen.idle(Err(e.to_string()));
                seen.record(|r| {
                    r.counters.errors += 1;
                    r.error(e.class(), metric(e.phase()), 0, || e.to_string());
                });
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = stop.stop.cancelled() => {}
                }
            }
        }
    }

    /// IDLE; on EXISTS, the trace headers of what arrived, each arrival confirmed at the
    /// moment its EXISTS was read (the DONE and the FETCH that follow are the watcher's
    /// work, not the message's way in).
    async fn watch(
        &mut self,
        mut conn: ImapConn,
        seen: &mut Seen,
        stop: &Shutdown,
    ) -> Result<(), crate::imap::conn::ConnError> {
        let logins = std::mem::take(&mut conn.logins);
        seen.record(|r| {
            r.counters.connections += 1;
            r.counters.mailbox.logins += logins;
        });
        conn.exists_log = Some(Vec::new());
        // EXISTS that came with a FETCH's answer (mail that arrived meanwhile) is not
        // announced again in the next IDLE: fetch again first. The first round fetches
        // whatever came before this session.
        let mut more = true;
        loop {
            if !more {
                conn.idle_begin().await?;
                seen.idle(Ok(()));
                // Re-entered every 25 minutes at most (RFC 2177 asks for less than 30).
                let wake = async {
                    tokio::select! {
                        _ = stop.stop.cancelled() => {}
                        _ = tokio::time::sleep(Duration::from_secs(25 * 60)) => {}
                    }
                };
                let exists = |d: &Data| matches!(d, Data::Exists(_));
                let pushed = conn.idle_wait(wake, exists).await?;
                if stop.stop.is_cancelled() && !pushed.iter().any(exists) {
                    break;
                }
            }
            let fetch = Command::FetchHeader {
                first_uid: self.next_uid,
                field: HEADER_NAME,
            };
            // The FETCH ends the IDLE first (DONE).
            let r = conn.run(&fetch).await?;
            more = r.data.iter().any(|d| matches!(d, Data::Exists(_)));
            let fetched_us = crate::stats::clock::unix_us();
            let now_ms = seen.now_ms();
            let log = conn.exists_log.get_or_insert_with(Vec::new);
            let mut last_seq = 0;
            for d in &r.data {
                let Data::Fetch(f) = d else { continue };
                let Some(uid) = f.uid.filter(|u| *u >= self.next_uid) else {
                    continue;
                };
                self.next_uid = self.next_uid.max(uid + 1);
                last_seq = last_seq.max(f.seq);
                // Visible since the first EXISTS that counted it.
                let at_us = log
                    .iter()
                    .find(|(count, _)| *count >= f.seq)
                    .map_or(fetched_us, |(_, t)| *t);
                let trace = f.body.as_ref().and_then(|b| Trace::find(&b.kept));
                let keys = [self.key];
                let c = Confirmed {
                    trace,
                    bounced: 0,
                    delayed: 0,
                    // Only the headers are fetched: the body is not checked here.
                    damaged: false,
                    keys: &keys,
                    null_sender: false,
                };
                seen.delivery.confirm(&c, at_us, now_ms);
            }
            // What is confirmed needs its EXISTS no more; later ones wait for their fetch.
            log.retain(|(count, _)| *count > last_seq);
            seen.record(|rec| {
                for (p, d) in conn.timings.drain(..) {
                    rec.record(metric(p), d);
                }
                rec.counters.sent += 1;
                rec.counters.accepted += 1;
            });
        }
        seen.record(|rec| {
            for (p, d) in conn.timings.drain(..) {
                rec.record(metric(p), d);
            }
        });
        conn.logout().await;
        Ok(())
    }
}
