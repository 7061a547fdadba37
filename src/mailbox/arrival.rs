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

use super::bench::{MailboxError, StoreSetup};
use crate::imap::conn::{ImapConn, Login};
use crate::imap::proto::{Code, Command, Data};
use crate::imap::steps::{STEPS, metric};
use crate::lab::{LabError, LabOptions, Mta, MtaLab, QueueKind, StoreLab, StoreUser};
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
    let store_lab: Option<Arc<dyn StoreLab>> = match store {
        Some(s) => Some(super::bench::store(s, None, &shutdown).await?.0),
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
            return Err(MailboxError::Usage(
                "no way in: give --lab dovecot (with --mta postfix or lmtp) or --smtp".into(),
            ));
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
    };
    let delivery = Arc::new(Delivery::tracking(run_id));
    let open = open_all(&imap, watched, &connect, &delivery).await?;
    let watch = watchers(open);
    let (s, m, extra) = (store_lab.clone(), mta.clone(), plan.sut_pids.clone());
    let sut_pids: Pids = Arc::new(move || {
        let mut pids = crate::stats::sut::descendants(&extra);
        pids.extend(s.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids.extend(m.as_ref().map(|l| l.pids()).unwrap_or_default());
        pids
    });
    let r = RelayRun {
        send: plan.send,
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
    };
    let mut results = crate::relay::run::run(r, mta.clone(), shutdown)
        .await
        .map_err(|e| match e {
            crate::relay::RelayError::Usage(e) => MailboxError::Usage(e),
            crate::relay::RelayError::Failed(e) => MailboxError::Failed(e),
        })?;
    results.command = "arrival".into();
    if let Some(l) = &store_lab {
        let limits: serde_json::Map<String, serde_json::Value> =
            l.limits().into_iter().map(|(k, v)| (k, v.into())).collect();
        results.extra.insert("store_limits".into(), limits.into());
    }
    Ok(results)
}

/// Starts a lab Postfix (off the runtime); a setting it refuses is the user's input.
pub async fn start_mta(opts: LabOptions) -> Result<Arc<dyn MtaLab>, MailboxError> {
    Mta::Postfix.check().map_err(MailboxError::Usage)?;
    match tokio::task::spawn_blocking(move || Mta::Postfix.start(&opts)).await {
        Ok(Ok(lab)) => Ok(Arc::from(lab)),
        Ok(Err(e @ LabError::Setting(_))) => Err(MailboxError::Usage(e.to_string())),
        Ok(Err(e)) => Err(MailboxError::Failed(e.to_string())),
        Err(e) => Err(MailboxError::Failed(e.to_string())),
    }
}

fn tcp(addr: std::net::SocketAddr) -> Target {
    Target::Tcp {
        addr,
        host: addr.ip().to_string(),
    }
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

/// The receiver: the watchers, each in IDLE; its results are their IMAP sessions'.
fn watchers(open: Vec<(Watcher, ImapConn)>) -> crate::relay::run::ReceiverRun {
    Box::new(move |delivery, stop, start| {
        Box::pin(async move {
            let rec = Arc::new(Mutex::new(Recorder::new()));
            let began = Instant::now();
            let cpu0 = crate::stats::cpu::CpuTimes::of_self();
            let mut tasks = tokio::task::JoinSet::new();
            for (w, conn) in open {
                let seen = Seen {
                    delivery: delivery.clone(),
                    start,
                    rec: rec.clone(),
                };
                tasks.spawn(w.run(conn, seen, stop.clone()));
            }
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
    })
}

/// Where a watcher reports: the run's delivery record, its time zero, and the watchers'
/// own statistics.
struct Seen {
    delivery: Arc<Delivery>,
    start: Instant,
    rec: Arc<Mutex<Recorder>>,
}

impl Seen {
    fn record(&self, f: impl FnOnce(&mut Recorder)) {
        let mut r = self.rec.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut r);
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
    async fn run(mut self, conn: ImapConn, seen: Seen, stop: Shutdown) {
        let mut conn = Some(conn);
        while !stop.stop.is_cancelled() {
            let result = match conn.take() {
                Some(c) => self.watch(c, &seen, &stop).await,
                None => match self.open(false).await {
                    Ok(c) => self.watch(c, &seen, &stop).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = result {
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

    /// IDLE; on EXISTS, the trace headers of what arrived, each arrival confirmed.
    async fn watch(
        &mut self,
        mut conn: ImapConn,
        seen: &Seen,
        stop: &Shutdown,
    ) -> Result<(), crate::imap::conn::ConnError> {
        seen.record(|r| r.counters.connections += 1);
        // EXISTS that came with a FETCH's answer (mail that arrived meanwhile) is not
        // announced again in the next IDLE: fetch again first. The first round fetches
        // whatever came before this session.
        let mut more = true;
        loop {
            if !more {
                // Re-entered every 25 minutes at most (RFC 2177 asks for less than 30).
                let wake = async {
                    tokio::select! {
                        _ = stop.stop.cancelled() => {}
                        _ = tokio::time::sleep(Duration::from_secs(25 * 60)) => {}
                    }
                };
                let pushed = conn.idle(wake, |d| matches!(d, Data::Exists(_))).await?;
                if stop.stop.is_cancelled() && !pushed.iter().any(|d| matches!(d, Data::Exists(_)))
                {
                    break;
                }
            }
            let fetch = Command::FetchHeader {
                first_uid: self.next_uid,
                field: HEADER_NAME,
            };
            let r = conn.run(&fetch).await?;
            more = r.data.iter().any(|d| matches!(d, Data::Exists(_)));
            let now_us = crate::stats::clock::unix_us();
            let now_ms = seen.start.elapsed().as_millis() as u64;
            for d in &r.data {
                let Data::Fetch(f) = d else { continue };
                let Some(uid) = f.uid.filter(|u| *u >= self.next_uid) else {
                    continue;
                };
                self.next_uid = self.next_uid.max(uid + 1);
                let trace = f.body.as_ref().and_then(|b| Trace::find(&b.kept));
                let keys = [self.key];
                let c = Confirmed {
                    trace,
                    bounced: 0,
                    keys: &keys,
                    null_sender: false,
                };
                seen.delivery.confirm(&c, now_us, now_ms);
            }
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
