//! IMAP as the load engine drives it (imaptest's job, measured): a session logs in as the
//! next user and selects the mailbox; each unit of work is then one command drawn from the
//! mix, on a sequence number the session knows exists, timed from its write to its
//! completion, with every response checked against the session's model of the mailbox and
//! against what other sessions saw of the same messages (`imap::state`; `overlap` knows
//! which users have two sessions open, whose flags may change under a check). With
//! `--pipeline N`, `pipelined` keeps up to N commands in flight per session.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::plan::{ImapLogin, ImapPlan};
use crate::error::ErrorClass;
use crate::imap::conn::{ConnError, ImapConn, Login, Reply, SetUp};
use crate::imap::proto::{Code, Command, Cond, DELETED, Data, FetchItems, FlagOp, Phase, Section};
use crate::imap::state::{Model, Recalls, Shared, Violation};
use crate::imap::steps::metric;
use crate::load::{Driver, Failure, Next, SetUpFailed, SetUpMeasures};
use crate::message::trace::Trace;
use crate::stats::{Metric, Recorder};

mod overlap;
mod pipelined;

/// Flags that STORE sets and clears (system flags every server has, and a keyword).
const FLAGS: [&str; 4] = ["\\Seen", "\\Flagged", "\\Answered", "$MailbenchLabel"];

/// Where `move` puts messages (created when the server says it is missing).
const MOVE_TO: &str = "Archive";

/// The IMAP driver of one run.
pub struct ImapDriver {
    plan: Arc<ImapPlan>,
    /// What all sessions learnt of the messages (when checking state).
    shared: Option<Shared>,
    /// What each user's last session checked clean against `shared`, for its next one.
    recalls: Recalls,
    /// Sessions open per user: overlapping ones race each other's STOREs.
    live: overlap::Live,
    /// The run id, for appended messages' trace headers and Message-IDs.
    run_id: u64,
}

/// An open session: the connection and its model of the selected mailbox.
pub struct Session {
    conn: ImapConn,
    model: Model,
    /// The user's index in the plan's users.
    user: usize,
    /// The command the unit in flight runs.
    next: Phase,
    /// Pipelining: the units on this connection not handed back to the engine yet, the
    /// current one first.
    units: std::collections::VecDeque<pipelined::Unit>,
    /// Counts this session among its user's: a STORE's flags are checked only alone.
    lease: overlap::Lease,
}

/// What one command did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The command's phase.
    pub phase: Option<Phase>,
    /// NO or BAD, with the server's text.
    pub refused: Option<String>,
    /// State violations found in its responses.
    pub violations: Vec<Violation>,
    /// Whole messages downloaded.
    pub fetched: u64,
    /// Sections of messages downloaded that are not the whole message.
    pub parts: u64,
    /// Octets of message content downloaded (whole messages and sections).
    pub octets: u64,
    /// Messages appended.
    pub appended: u64,
    /// Messages copied (COPY into the mailbox).
    pub copied: u64,
    /// Messages expunged by EXPUNGE (its EXPUNGE responses).
    pub expunged: u64,
    /// An EXPUNGE answered while another session of the same user was open: its EXPUNGE
    /// responses may report that session's expunges too.
    pub expunge_shared: bool,
    /// Messages moved out of the mailbox: 1 for a MOVE answered OK (of the one message it
    /// names; its EXPUNGE responses may also report other sessions' expunges).
    pub moved: u64,
    /// Pipelined: the command's own time, from its write to its tagged completion (the
    /// engine's clock would start it where the unit before it on the wire completed).
    pub took: Option<std::time::Duration>,
}

impl ImapDriver {
    /// The driver for `plan` (its target and users set), for run `run_id`.
    pub fn new(plan: Arc<ImapPlan>, run_id: u64) -> ImapDriver {
        ImapDriver {
            shared: plan.check_state.then(Shared::default),
            recalls: Recalls::default(),
            live: overlap::Live::new(plan.sessions.users.len()),
            plan,
            run_id,
        }
    }

    /// A message to append of exactly `--append-size` octets (the headers alone when they
    /// are longer): headers with a unique Message-ID and the trace header, then text.
    fn message(&self, seq: u64, user: &str) -> Bytes {
        use std::fmt::Write as _;
        let mut m = String::with_capacity(self.plan.append_size + 300);
        let now = crate::stats::clock::unix_us();
        let _ = write!(
            m,
            "From: appender@mailbench.test\r\nTo: {user}\r\nSubject: mailbench append {seq}\r\n\
             Message-ID: <{:016x}.{seq}@mailbench.test>\r\n",
            self.run_id
        );
        Trace {
            run: self.run_id,
            seq,
            sent_us: now,
        }
        .write(&mut m);
        m.push_str("\r\n");
        let mut b = m.into_bytes();
        super::append::pad(&mut b, self.plan.append_size);
        Bytes::from(b)
    }

    /// The command for `phase` in the session's state; one that needs a message falls
    /// back to APPEND in an empty mailbox.
    fn command(&self, s: &Session, phase: Phase, seq: u64, rng: &mut fastrand::Rng) -> Command {
        let p = &self.plan;
        let exists = s.model.exists();
        let needs_message = matches!(
            phase,
            Phase::Fetch
                | Phase::FetchBody
                | Phase::FetchPart
                | Phase::Store
                | Phase::Delete
                | Phase::Copy
                | Phase::Move
        );
        let phase = if needs_message && exists == 0 {
            Phase::Append
        } else {
            phase
        };
        let pick = |rng: &mut fastrand::Rng| rng.u32(1..=exists.max(1));
        match phase {
            Phase::Select => Command::Select {
                mailbox: p.mailbox.clone(),
                read_only: false,
            },
            Phase::List => Command::List,
            Phase::Status => Command::Status(p.mailbox.clone()),
            Phase::Fetch => {
                let first = pick(rng);
                let last = first.saturating_add(p.fetch_range - 1).min(exists);
                Command::Fetch {
                    first,
                    last,
                    items: FetchItems::Meta,
                }
            }
            Phase::FetchBody => {
                let seq = pick(rng);
                Command::Fetch {
                    first: seq,
                    last: seq,
                    items: FetchItems::Body,
                }
            }
            Phase::FetchPart => {
                let seq = pick(rng);
                let section = Section::ALL[rng.usize(..Section::ALL.len())];
                Command::Fetch {
                    first: seq,
                    last: seq,
                    items: FetchItems::Part(section),
                }
            }
            Phase::Search => Command::Search("ALL"),
            Phase::Store => Command::Store {
                seq: pick(rng),
                op: if rng.bool() {
                    FlagOp::Add
                } else {
                    FlagOp::Remove
                },
                flag: FLAGS[rng.usize(..FLAGS.len())],
            },
            Phase::Delete => Command::Store {
                seq: pick(rng),
                op: FlagOp::Add,
                flag: DELETED,
            },
            Phase::Expunge => Command::Expunge,
            Phase::Move => Command::Move {
                seq: pick(rng),
                mailbox: MOVE_TO.into(),
            },
            Phase::Copy => Command::Copy {
                seq: pick(rng),
                mailbox: p.mailbox.clone(),
            },
            Phase::Noop => Command::Noop,
            Phase::Capability => Command::Capability,
            Phase::Idle => Command::Idle,
            _ => Command::Append {
                mailbox: p.mailbox.clone(),
                flags: "\\Seen",
                message: self.message(seq, &p.sessions.users[s.user].address),
                literal_plus: p.literal_plus && s.conn.offers("LITERAL+"),
            },
        }
    }

    /// Opens a session: connection, set-up, login and SELECT. What a failed one had
    /// measured is left in `set_up`.
    async fn open_session(
        &self,
        n: u64,
        rng: &mut fastrand::Rng,
        set_up: &mut SetUp,
    ) -> Result<Session, ConnError> {
        let p = &self.plan;
        // In turn, a user has one session at a time while users last (see `claim`); drawn
        // at random, as drawn.
        let turn = p.sessions.user_for(n, rng);
        let lease = match p.sessions.random_users {
            true => self.live.lease(turn),
            false => self.live.claim(turn),
        };
        let Some(start) = p.sessions.start_as(lease.user(), rng) else {
            return Err(ConnError::Refused {
                phase: Phase::Connect,
                text: "no IMAP server to connect to".into(),
            });
        };
        let (user, pass) = (start.user.address.clone(), start.user.password.clone());
        let login = match p.login {
            ImapLogin::Login => Login::Login { user, pass },
            ImapLogin::Plain => Login::Plain { user, pass },
        };
        let i = start.index;
        let conn =
            ImapConn::open_timed(start.target, &start.opts, start.starttls, &login, set_up).await?;
        let mut s = Session {
            conn,
            model: Model::new(i as u32, 0),
            user: i,
            next: Phase::Noop,
            units: std::collections::VecDeque::new(),
            lease,
        };
        let select = Command::Select {
            mailbox: p.mailbox.clone(),
            read_only: false,
        };
        let r = match s.conn.required(&select).await {
            Ok(r) => r,
            Err(e) => {
                // Logged in, then lost: what the session had measured still counts.
                set_up.timings.append(&mut s.conn.timings);
                set_up.logins += std::mem::take(&mut s.conn.logins);
                set_up.bytes_out += std::mem::take(&mut s.conn.bytes_out);
                return Err(e);
            }
        };
        if self.shared.is_some() {
            s.model.resume(self.recalls.take(i));
        }
        let mut ignored = Vec::new();
        for d in &r.data {
            s.model.apply(d, None, &mut ignored);
        }
        Ok(s)
    }

    /// Applies a reply's data to the model and checks what the command itself promises.
    fn check(&self, s: &mut Session, cmd: &Command, r: &Reply, o: &mut Outcome) {
        let shared = self.shared.as_ref().filter(|_| !expunge_issued(r));
        let out = &mut o.violations;
        // UID SEARCH ALL is compared with the model where its answer arrives: an EXISTS
        // after it announces what another session added since (Dovecot: `* SEARCH` of 324,
        // then `* 325 EXISTS`, in one reply).
        let mut searched = Vec::new();
        // Only an EXPUNGE counts what it expunged: the EXPUNGE responses another command
        // gets report another session's (of the same user), counted there.
        let expunges = matches!(cmd, Command::Expunge);
        o.expunge_shared = expunges && !s.lease.alone();
        for d in &r.data {
            match d {
                Data::Expunge(_) if expunges => o.expunged += 1,
                Data::Fetch(f) => {
                    if let Some(b) = &f.body {
                        o.fetched += u64::from(b.whole);
                        o.parts += u64::from(!b.whole);
                        o.octets += b.len;
                    }
                }
                _ => {}
            }
            if !self.plan.check_state {
                // The model still follows EXISTS and EXPUNGE: commands need real numbers.
                if matches!(d, Data::Exists(_) | Data::Expunge(_)) {
                    s.model.apply(d, None, &mut Vec::new());
                }
                continue;
            }
            s.model.apply(d, shared, out);
            match (cmd, d) {
                (Command::Store { seq, op, flag }, Data::Fetch(f))
                    if f.seq == *seq && s.lease.alone() =>
                {
                    s.model.stored(f, *op, flag, out);
                }
                (Command::Search("ALL"), Data::Search(found)) => {
                    searched.clear();
                    s.model.searched(found, &mut searched);
                }
                _ => {}
            }
        }
        if r.done.cond != Cond::Ok || !self.plan.check_state {
            return;
        }
        match (cmd, &r.done.code) {
            (Command::Search("ALL"), _)
                if !r.data.iter().any(|d| matches!(d, Data::Expunge(_))) =>
            {
                if !r.data.iter().any(|d| matches!(d, Data::Search(_))) {
                    s.model.searched(&[], out);
                }
                out.append(&mut searched);
            }
            (Command::Append { .. }, Some(Code::AppendUid(v, uid))) => {
                s.model.appended(*v, *uid, out);
            }
            _ => {}
        }
    }

    /// Runs `cmd` alone on the wire (waiting for its completion), checks it and says what
    /// it did: every command without pipelining, and with it the ones that must be alone.
    async fn one(&self, s: &mut Session, cmd: &Command) -> Result<Outcome, ConnError> {
        let mut o = Outcome {
            phase: Some(cmd.phase()),
            ..Outcome::default()
        };
        if let Command::Select { .. } = cmd {
            s.model.reset();
        }
        let r = if matches!(cmd, Command::Idle) {
            // Into IDLE, waiting `--idle-for` (0: straight out again, what a client pays
            // to start waiting) for what the server pushes.
            let wake = tokio::time::sleep(self.plan.idle_for);
            let data = s.conn.idle(wake, |_| false).await?;
            Reply {
                done: crate::imap::proto::Completion {
                    tag: 0,
                    phase: Phase::Idle,
                    cond: Cond::Ok,
                    code: None,
                    text: String::new(),
                },
                data,
            }
        } else {
            let r = s.conn.run(cmd).await?;
            match (cmd, &r.done.code) {
                // The folder is missing the first time: create it, again. Any other NO
                // (another session expunged the message) is the answer. What the three
                // replies announced (another session's EXPUNGE, EXISTS) all goes to the
                // model, or it loses track of the mailbox.
                (Command::Move { .. }, Some(Code::TryCreate)) => {
                    let mut data = r.data;
                    data.extend(s.conn.run(&Command::Create(MOVE_TO.into())).await?.data);
                    let again = s.conn.run(cmd).await?;
                    data.extend(again.data);
                    Reply {
                        done: again.done,
                        data,
                    }
                }
                _ => r,
            }
        };
        match cmd {
            Command::Append { .. } if r.done.cond == Cond::Ok => o.appended = 1,
            Command::Copy { .. } if r.done.cond == Cond::Ok => o.copied = 1,
            Command::Move { .. } if r.done.cond == Cond::Ok && !expunge_issued(&r) => o.moved = 1,
            _ => {}
        }
        self.check(s, cmd, &r, &mut o);
        if r.done.cond != Cond::Ok {
            o.refused = Some(r.said());
        }
        s.conn.recycle(r.data);
        Ok(o)
    }
}

/// A session's failure, with what its set-up measured when it failed to open.
pub type Failed = SetUpFailed<ConnError, SetUp>;

impl SetUpMeasures for SetUp {
    fn record(&self, rec: &mut Recorder) {
        for (phase, d) in &self.timings {
            rec.record(metric(*phase), *d);
        }
        rec.counters.mailbox.logins += self.logins;
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
            ConnError::Link(e) => e.unreachable("IMAP server"),
            // The server, not one session: nothing will ever work against it.
            ConnError::NotImap4 { .. } => Some(format!(
                "the server is {self}; give the address of an IMAP server"
            )),
            ConnError::OtherProtocol { .. } => Some(self.to_string()),
            _ => None,
        }
    }

    fn login_refused(&self) -> bool {
        matches!(
            self,
            ConnError::Refused {
                phase: Phase::Login,
                ..
            }
        )
    }
}

impl Driver for ImapDriver {
    type Conn = Session;
    type Failure = Failed;
    type Outcome = Outcome;
    const STEPS: crate::stats::Steps = crate::imap::steps::STEPS;

    async fn open(&self, n: u64, rng: &mut fastrand::Rng) -> Result<Session, Failed> {
        let mut set_up = SetUp::default();
        self.open_session(n, rng, &mut set_up)
            .await
            .map_err(|error| Failed {
                error,
                set_up: Some(set_up),
            })
    }

    fn tls(s: &Session) -> bool {
        s.conn.tls_active()
    }

    fn idle(_s: &Session) -> bool {
        true
    }

    fn begin(&self, s: &mut Session, _seq: u64, rng: &mut fastrand::Rng) -> Result<(), Failed> {
        s.next = self.plan.mix.draw(rng);
        if self.plan.pipeline > 1 {
            s.units.push_back(pipelined::Unit::new(s.next));
        }
        Ok(())
    }

    async fn complete(
        &self,
        s: &mut Session,
        next: &mut (dyn FnMut() -> Next + Send),
        rng: &mut fastrand::Rng,
    ) -> Result<Outcome, Failed> {
        if self.plan.pipeline > 1 {
            return Ok(self.pipelined(s, next, rng).await?);
        }
        let seq = rng.u64(..);
        let cmd = self.command(s, s.next, seq, rng);
        Ok(self.one(s, &cmd).await?)
    }

    fn took(&self, o: &Outcome) -> Option<std::time::Duration> {
        o.took
    }

    fn record(&self, rec: &mut Recorder, s: &mut Session, _seq: u64, o: Option<&Outcome>) -> bool {
        for (phase, d) in s.conn.timings.drain(..) {
            rec.record(metric(phase), d);
        }
        rec.counters.bytes_out += std::mem::take(&mut s.conn.bytes_out);
        rec.counters.mailbox.logins += std::mem::take(&mut s.conn.logins);
        let Some(o) = o else {
            return false;
        };
        let m = &mut rec.counters.mailbox;
        m.retrieved += o.fetched;
        m.parts += o.parts;
        m.deleted += o.expunged;
        m.expunges_shared += u64::from(o.expunge_shared);
        m.moved += o.moved;
        m.appended += o.appended;
        m.copied += o.copied;
        rec.counters.bytes += o.octets;
        let step = metric(o.phase.unwrap_or(Phase::Noop));
        for v in &o.violations {
            rec.counters.mailbox.violations.add(v.name());
            rec.error(ErrorClass::State, step, 0, || v.name().to_string());
        }
        match &o.refused {
            None => {
                rec.counters.accepted += 1;
                false
            }
            Some(said) => {
                rec.counters.rejected += 1;
                rec.error(ErrorClass::Rejected, step, 0, || said.clone());
                true
            }
        }
    }

    async fn close(&self, s: Session) -> Option<(Metric, Duration)> {
        self.close_counted(s).await.0
    }

    /// LOGOUT, with its octets (they were missing from `bytes_out`).
    async fn close_counted(&self, mut s: Session) -> (Option<(Metric, Duration)>, u64) {
        self.recalls.give(s.user, s.model.take_recall());
        let (took, bytes_out) = s.conn.logout_counted().await;
        (took.map(|d| (metric(Phase::Logout), d)), bytes_out)
    }
}

/// True when the reply's completion says it named messages another session expunged
/// ([`Code::ExpungeIssued`]): its FETCH data then says nothing true of those messages, so
/// it is not compared with (nor taught to) what other sessions saw.
pub(super) fn expunge_issued(r: &Reply) -> bool {
    r.done.code == Some(Code::ExpungeIssued)
}
