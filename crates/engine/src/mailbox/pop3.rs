//! POP3 as the load engine drives it (rabid's job, measured): each unit of work is one
//! session on its own connection — log in as the next user, STAT (LIST, UIDL when asked),
//! download a share of the messages (RETR, or TOP), delete a share, QUIT (the deletions
//! are made then) — with every command timed, pipelined when the server offers PIPELINING.

use std::sync::Arc;
use std::time::Duration;

use super::plan::{Pop3Login, Pop3Plan, share_of};
use crate::error::ErrorClass;
use crate::load::{Driver, Failure, Next, SetUpFailed, SetUpMeasures};
use crate::pop3::conn::{ConnError, Login, Pop3Conn, SetUp};
use crate::pop3::proto::{Command, Phase, stat_count};
use crate::pop3::steps::metric;
use crate::stats::{Metric, Recorder};

/// The POP3 driver of one run.
pub struct Pop3Driver {
    plan: Arc<Pop3Plan>,
}

/// What one session did.
#[derive(Debug, Default)]
pub struct Session {
    /// Messages downloaded.
    pub retrieved: u64,
    /// Octets downloaded.
    pub octets: u64,
    /// Messages deleted (marked with DELE and committed by QUIT).
    pub deleted: u64,
    /// The first command the server refused, and what it said.
    pub refused: Option<(Phase, String)>,
}

impl Pop3Driver {
    /// The driver for `plan` (its target and users set).
    pub fn new(plan: Arc<Pop3Plan>) -> Pop3Driver {
        Pop3Driver { plan }
    }
}

/// A session's failure, with what its set-up measured when it failed to open.
pub type Failed = SetUpFailed<ConnError, SetUp>;

impl SetUpMeasures for SetUp {
    fn record(&self, rec: &mut Recorder) {
        for (phase, d) in &self.timings {
            rec.record(metric(*phase), *d);
        }
        rec.counters.bytes_out += self.bytes_out;
    }
}

impl Failure for ConnError {
    fn class(&self) -> ErrorClass {
        ConnError::class(self)
    }

    fn step(&self) -> Metric {
        metric(self.phase())
    }

    fn code(&self) -> u16 {
        0
    }

    fn reached(&self) -> bool {
        match self {
            ConnError::Link(e) => e.connected(),
            _ => true,
        }
    }

    fn unreachable(&self) -> Option<String> {
        match self {
            ConnError::Link(e) => e.unreachable("POP3 server"),
            // The server, not one session: nothing will ever work against it.
            ConnError::OtherProtocol { .. } => Some(self.to_string()),
            _ => None,
        }
    }

    fn login_refused(&self) -> bool {
        matches!(
            self,
            ConnError::Refused {
                phase: Phase::Auth,
                ..
            }
        )
    }
}

impl Driver for Pop3Driver {
    type Conn = Pop3Conn;
    type Failure = Failed;
    type Outcome = Session;
    const STEPS: crate::stats::Steps = crate::pop3::steps::STEPS;

    async fn open(&self, n: u64, rng: &mut fastrand::Rng) -> Result<Pop3Conn, Failed> {
        let p = &self.plan;
        let Some(start) = p.sessions.start(n, rng) else {
            return Err(ConnError::Refused {
                phase: Phase::Connect,
                text: "no POP3 server to connect to".into(),
            }
            .into());
        };
        let (user, pass) = (start.user.address.clone(), start.user.password.clone());
        let login = match p.login {
            Pop3Login::User => Login::UserPass { user, pass },
            Pop3Login::Plain => Login::Plain { user, pass },
            Pop3Login::Apop => Login::Apop { user, pass },
        };
        let mut set_up = SetUp::default();
        let opened = Pop3Conn::open_timed(
            start.target,
            &start.opts,
            start.starttls,
            &login,
            &mut set_up,
        );
        let mut conn = opened.await.map_err(|error| Failed {
            error,
            set_up: Some(set_up),
        })?;
        conn.pipelining &= p.pipelining;
        Ok(conn)
    }

    fn tls(conn: &Pop3Conn) -> bool {
        conn.tls_active()
    }

    fn idle(_conn: &Pop3Conn) -> bool {
        true
    }

    fn begin(
        &self,
        _conn: &mut Pop3Conn,
        _seq: u64,
        _rng: &mut fastrand::Rng,
    ) -> Result<(), Failed> {
        Ok(())
    }

    /// The whole session after the login: STAT, the downloads and deletions, and QUIT in
    /// the same batch (a POP3 session ends with its connection, and its deletions count
    /// only once QUIT commits them).
    async fn complete(
        &self,
        conn: &mut Pop3Conn,
        _next: &mut (dyn FnMut() -> Next + Send),
        _rng: &mut fastrand::Rng,
    ) -> Result<Session, Failed> {
        let mut s = Session::default();
        let stat = conn.batch(&[Command::Stat]).await?;
        let count = match stat.into_iter().next() {
            Some(r) if r.ok => stat_count(&r),
            Some(r) => {
                s.refused = Some((Phase::Stat, r.text));
                None
            }
            None => None,
        };
        let p = &self.plan;
        let count = count.unwrap_or(0);
        let mut cmds: Vec<Command> = [(p.list, Command::List), (p.uidl, Command::Uidl)]
            .into_iter()
            .filter_map(|(asked, c)| asked.then_some(c))
            .collect();
        let downloads = share_of(count, p.download).min(p.max_download.unwrap_or(u32::MAX));
        cmds.extend((1..=downloads).map(|i| match p.top_lines {
            Some(lines) => Command::Top(i, lines),
            None => Command::Retr(i),
        }));
        cmds.extend((1..=share_of(count, p.delete)).map(Command::Dele));
        cmds.push(Command::Quit);
        let mut marked = 0;
        for (cmd, r) in cmds.iter().zip(conn.batch(&cmds).await?) {
            if !r.ok {
                s.refused.get_or_insert((cmd.phase(), r.text));
                continue;
            }
            match cmd {
                Command::Dele(_) => marked += 1,
                Command::Quit => s.deleted = marked,
                Command::Retr(_) | Command::Top(..) => {
                    s.retrieved += 1;
                    s.octets += r.body.map_or(0, |b| b.octets);
                }
                _ => {}
            }
        }
        Ok(s)
    }

    fn record(
        &self,
        rec: &mut Recorder,
        conn: &mut Pop3Conn,
        _seq: u64,
        outcome: Option<&Session>,
    ) -> bool {
        for (phase, d) in conn.timings.drain(..) {
            rec.record(metric(phase), d);
        }
        rec.counters.bytes_out += std::mem::take(&mut conn.bytes_out);
        rec.counters.mailbox.logins += std::mem::take(&mut conn.logins);
        let Some(s) = outcome else {
            return false;
        };
        rec.counters.mailbox.retrieved += s.retrieved;
        rec.counters.mailbox.deleted += s.deleted;
        rec.counters.bytes += s.octets;
        match &s.refused {
            None => {
                rec.counters.accepted += 1;
                false
            }
            Some((phase, text)) => {
                rec.counters.rejected += 1;
                rec.error(ErrorClass::Rejected, metric(*phase), 0, || {
                    format!("-ERR {text}")
                });
                true
            }
        }
    }

    async fn close(&self, conn: Pop3Conn) -> Option<(Metric, Duration)> {
        conn.quit().await.map(|d| (metric(Phase::Quit), d))
    }
}
