//! SMTP's client as the load engine drives it: each connection goes to the next target
//! (and source address), with TLS on its share and AUTH as asked; each unit of work is one
//! transaction, pipelined with the next in closed loop; its phases, recipients and
//! refusals are recorded with the reason the server gave.

use std::sync::Arc;
use std::time::Duration;

use super::plan::{Addresses, Auth, SendPlan};
use super::workload::Workload;
use crate::error::ErrorClass;
use crate::load::{Driver, Failure, Next};
use crate::smtp::conn::{ClientConn, ConnError, Follow};
use crate::smtp::proto::{ClientConfig, Credentials, Phase, TxnOutcome};
use crate::smtp::steps::PhaseMetric;
use crate::stats::timelog::TimeLog;
use crate::stats::{Metric, Recorder};
use crate::transport::connect::ConnectOptions;
use crate::transport::tls::TlsMode;

/// The SMTP driver of one run.
pub struct SmtpDriver {
    plan: Arc<SendPlan>,
    workload: Workload,
    accept_log: Option<Arc<TimeLog>>,
    data_end_log: Option<Arc<TimeLog>>,
}

/// One SMTP connection, with the sizes of the transactions on the wire.
pub struct SmtpConn {
    conn: ClientConn,
    /// The reverse-path of every message on this connection (a `--senders` login).
    sender: Option<String>,
    /// Size of the transaction in flight.
    size: u64,
    /// Size of the follow-on sent with it, if any.
    next_size: u64,
}

impl SmtpDriver {
    /// The driver for `plan`'s run `run_id`.
    pub fn new(plan: Arc<SendPlan>, run_id: u64) -> SmtpDriver {
        SmtpDriver {
            workload: Workload::new(&plan.message, run_id),
            accept_log: plan.accept_log.clone(),
            data_end_log: plan.data_end_log.clone(),
            plan,
        }
    }
}

impl Failure for ConnError {
    fn class(&self) -> ErrorClass {
        ConnError::class(self)
    }

    fn step(&self) -> Metric {
        self.phase().metric()
    }

    fn code(&self) -> u16 {
        ConnError::code(self)
    }

    fn reached(&self) -> bool {
        match self {
            ConnError::Link(e) => e.connected(),
            _ => true,
        }
    }

    fn unreachable(&self) -> Option<String> {
        match self {
            ConnError::Link(e) => e.unreachable("target"),
            // The server, not one session: nothing will ever work against it.
            ConnError::OtherProtocol { .. } => Some(self.to_string()),
            _ => None,
        }
    }
}

impl Driver for SmtpDriver {
    type Conn = SmtpConn;
    type Failure = ConnError;
    type Outcome = TxnOutcome;
    const STEPS: crate::stats::Steps = crate::smtp::steps::STEPS;

    async fn open(&self, n: u64, rng: &mut fastrand::Rng) -> Result<SmtpConn, ConnError> {
        let c = &self.plan.client;
        let target = &c.targets[(n % c.targets.len() as u64) as usize];
        let use_tls = c.tls.draw(rng);
        let (creds, sender) = match &c.auth {
            Auth::None => (None, None),
            Auth::Fixed(cr) => (Some(cr.clone()), None),
            Auth::Senders => match &self.plan.message.from {
                Addresses::List(users) => {
                    let u = &users[(n % users.len() as u64) as usize];
                    (
                        Some(Credentials {
                            user: u.address.clone(),
                            pass: u.password.clone().unwrap_or_default(),
                        }),
                        Some(u.address.clone()),
                    )
                }
                Addresses::Template(_) => (None, None),
            },
        };
        let opts = ConnectOptions {
            connect_timeout: c.connect_timeout,
            command_timeout: c.command_timeout,
            source_ip: (!c.source_ips.is_empty())
                .then(|| c.source_ips[(n % c.source_ips.len() as u64) as usize]),
            tls: if use_tls { c.tls.config.clone() } else { None },
            implicit_tls: c.tls.mode == TlsMode::Implicit,
            count: c.count.clone(),
        };
        let cfg = ClientConfig {
            lmtp: c.lmtp,
            helo_name: c.helo.clone(),
            pipelining: c.pipelining,
            chunking: c.chunking,
            starttls: use_tls && c.tls.mode == TlsMode::Starttls,
            auth: creds,
        };
        let conn = ClientConn::open(target, &opts, cfg).await?;
        Ok(SmtpConn {
            conn,
            sender,
            size: 0,
            next_size: 0,
        })
    }

    fn tls(conn: &SmtpConn) -> bool {
        conn.conn.tls_active()
    }

    fn idle(conn: &SmtpConn) -> bool {
        conn.conn.is_idle()
    }

    fn begin(
        &self,
        conn: &mut SmtpConn,
        seq: u64,
        rng: &mut fastrand::Rng,
    ) -> Result<(), ConnError> {
        let txn = self.workload.transaction(seq, conn.sender.as_deref(), rng);
        conn.size = txn.size() as u64;
        conn.conn.begin(txn)
    }

    async fn complete(
        &self,
        conn: &mut SmtpConn,
        next: &mut (dyn FnMut() -> Next + Send),
        rng: &mut fastrand::Rng,
    ) -> Result<TxnOutcome, ConnError> {
        conn.next_size = 0;
        let (workload, sender, next_size) =
            (&self.workload, conn.sender.clone(), &mut conn.next_size);
        let mut follow = || match next() {
            Next::Unit(seq) => {
                let txn = workload.transaction(seq, sender.as_deref(), rng);
                *next_size = txn.size() as u64;
                Follow::Txn(txn)
            }
            Next::Last => Follow::Quit,
            Next::Wait => Follow::Nothing,
        };
        let result = conn.conn.complete(&mut follow).await;
        // What went out with this transaction is the connection's transaction now.
        if result.is_ok() && conn.next_size > 0 {
            conn.size = std::mem::take(&mut conn.next_size);
        }
        result
    }

    fn record(
        &self,
        rec: &mut Recorder,
        conn: &mut SmtpConn,
        seq: u64,
        outcome: Option<&TxnOutcome>,
    ) -> bool {
        for (phase, d) in conn.conn.timings.drain(..) {
            rec.record(phase.metric(), d);
        }
        rec.counters.bytes_out += std::mem::take(&mut conn.conn.bytes_out);
        let data_end = conn.conn.data_end.take();
        let Some(o) = outcome else {
            return false;
        };
        let failed = record_outcome(rec, o, conn.size);
        if !failed && let Some(log) = &self.accept_log {
            log.record(seq);
        }
        if !failed && let (Some(log), Some(at)) = (&self.data_end_log, data_end) {
            // The same wall clock as the acceptance: now, less how long ago the data ended.
            let ago = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            log.record_at(seq, crate::stats::clock::unix_us().saturating_sub(ago));
        }
        failed
    }

    async fn close(&self, mut conn: SmtpConn) -> Option<(Metric, Duration)> {
        conn.conn.timings.clear();
        let quit = conn.conn.quit_timed().await;
        quit.map(|d| (Phase::Quit.metric(), d))
    }
}

/// Counts a transaction's outcome; true when it failed.
fn record_outcome(rec: &mut Recorder, o: &TxnOutcome, size: u64) -> bool {
    rec.counters.rcpts.accepted += u64::from(o.rcpts_accepted);
    rec.counters.rcpts.refused += u64::from(o.rcpts_refused);
    rec.counters.rcpts.delivered += u64::from(o.rcpts_delivered);
    for (phase, code) in &o.rcpt_failures {
        rec.error(ErrorClass::of_code(*code), phase.metric(), *code, || {
            o.rcpt_failure_text.clone().unwrap_or_default()
        });
    }
    if o.accepted {
        rec.counters.accepted += 1;
        rec.counters.bytes += size;
        false
    } else {
        rec.counters.rejected += 1;
        if let Some((phase, code)) = o.failure
            && phase != Phase::Rcpt
        {
            // RCPT refusals are already in the table, one per recipient.
            rec.error(ErrorClass::of_code(code), phase.metric(), code, || {
                o.failure_text.clone().unwrap_or_default()
            });
        }
        true
    }
}
