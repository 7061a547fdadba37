//! One virtual user: its own open-loop schedule (Poisson, at its type's rate of actions),
//! and each action done the way its client does it, timed from the moment it was due. An
//! action that falls due while the user's previous one still runs waits for it (a user has
//! one client) and is counted late, never skipped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::scenario::{Action, Client, UserType};
use super::{Ctx, Server, metric};
use crate::error::ErrorClass;
use crate::imap::conn::{ConnError as ImapError, ImapConn, Login, Reply};
use crate::imap::proto::{Code, Command, Cond, DELETED, FetchItems, FlagOp};
use crate::imap::state::Model;
use crate::lab::StoreUser;
use crate::pop3::conn::{Login as Pop3Login, Pop3Conn};
use crate::pop3::proto::{Command as Pop3Command, stat_count};
use crate::smtp::conn::ClientConn;
use crate::smtp::proto::{ClientConfig, Transaction};
use crate::stats::Metric;
use crate::transport::connect::ConnectOptions;

/// Due times drawn ahead of the clock (per user).
const SCHEDULE_AHEAD: usize = 256;

/// How an action ended, for the counters and the error table.
enum Outcome {
    /// The action did what it was for (counted, and timed in its histogram).
    Ok,
    /// The server said no (NO, BAD, -ERR, a refused delivery): its words.
    Refused(String),
    /// The connection failed; the class and what happened.
    Failed(ErrorClass, String),
}

/// A caching client's open session and its model of the selected mailbox.
struct Session {
    conn: ImapConn,
    model: Model,
    selected: bool,
}

/// Runs virtual user `n` from `start` until the run stops.
pub async fn run(ctx: Arc<Ctx>, n: u64, start: Instant) {
    let t = ctx.scenario.type_of(n).clone();
    let user = ctx.users[(n % ctx.users.len() as u64) as usize].clone();
    let rate = t.rate(ctx.scenario.period, ctx.time_scale).max(1e-9);
    let total: f64 = t.actions.iter().map(|(_, w)| w).sum();
    // Two generators: `rng` draws only the schedule and each action, so a seed gives the
    // same sequence of actions whatever the store answers; `within` draws inside actions
    // (which message, whom to), where a failed action draws less.
    let mut rng = fastrand::Rng::with_seed(ctx.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut within = fastrand::Rng::with_seed(rng.u64(..));
    let gap = |rng: &mut fastrand::Rng| {
        // Exponential gaps: a Poisson process at `rate`.
        Duration::from_secs_f64((-(1.0 - rng.f64()).ln() / rate).min(86_400.0))
    };
    let shard = (n % ctx.shards_n as u64) as usize;
    // The schedule, drawn ahead: what is due and not done is visible to the step that
    // ends while it waits (a stuck user's backlog shows, not only its current action).
    let schedule = ctx.ledger.join();
    let mut drawn = start;
    let mut draw_ahead = |rng: &mut fastrand::Rng| {
        if let Ok(mut q) = schedule.lock() {
            while q.len() < SCHEDULE_AHEAD {
                drawn += gap(rng);
                q.push(drawn);
            }
            q.front()
        } else {
            None
        }
    };
    // The store begins an action once the connection it needs is set up.
    let begun = || ctx.ledger.started(&schedule);
    let mut session: Option<Session> = None;
    while let Some(due) = draw_ahead(&mut rng) {
        let wait = async {
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = ctx.stop.cancelled() => {}
            }
        };
        match session
            .as_mut()
            .filter(|s| s.selected && due > Instant::now())
        {
            // A caching client waits in IDLE, taking what the server pushes, and stays in
            // it: ending it (DONE) is part of the next IMAP action, as for a real client;
            // a delivery to the user (`receive`) or a POP3 action does not end it.
            Some(s) => {
                if wait_in_idle(s, wait).await.is_err() {
                    session = None;
                }
            }
            None => wait.await,
        }
        if ctx.stop.is_cancelled() {
            break;
        }
        let mut at = rng.f64() * total;
        let action = t
            .actions
            .iter()
            .find(|(_, w)| {
                let hit = at < *w;
                at -= w;
                hit
            })
            .map_or(t.actions[0].0, |(a, _)| *a);
        let began = Instant::now();
        let mut logins = Vec::new();
        let outcome = act(
            &ctx,
            &t,
            &user,
            n,
            action,
            &mut session,
            &mut logins,
            &mut within,
            &begun,
        )
        .await;
        // A profile times actions, not commands: the session's own per-command times
        // are dropped (kept, they would grow for as long as a caching session lives).
        if let Some(s) = session.as_mut() {
            s.conn.timings.clear();
        }
        let now = Instant::now();
        // Recorded twice: in the interval it finished in, and in the step it fell due in.
        ctx.ledger.finish(shard, &schedule, due, |rec| {
            let took = now.duration_since(due);
            rec.record(metric(Some(action)), took);
            rec.record(metric(None), took);
            rec.record(Metric::Lag, began.duration_since(due));
            for d in &logins {
                rec.record(super::LOGIN, *d);
            }
            let c = &mut rec.counters;
            c.sent += 1;
            if began.duration_since(due) > ctx.late_after {
                c.late_starts += 1;
            }
            match &outcome {
                Outcome::Ok => rec.counters.accepted += 1,
                Outcome::Refused(said) => {
                    rec.counters.rejected += 1;
                    rec.error(ErrorClass::Rejected, metric(Some(action)), 0, || {
                        said.clone()
                    });
                }
                Outcome::Failed(class, said) => {
                    rec.counters.errors += 1;
                    rec.error(*class, metric(Some(action)), 0, || said.clone());
                }
            }
        });
    }
    if let Some(s) = session {
        s.conn.logout().await;
    }
}

/// IDLE until `wait` ends, staying in IDLE after; what the server pushes (EXISTS of
/// deliveries) updates the session's model.
async fn wait_in_idle(
    s: &mut Session,
    wait: impl std::future::Future<Output = ()>,
) -> Result<(), ImapError> {
    let pushed = s.conn.idle_wait(wait, |_| false).await?;
    let mut ignored = Vec::new();
    for d in &pushed {
        s.model.apply(d, None, &mut ignored);
    }
    Ok(())
}

/// Says that the store has begun the action in progress (the connection it needs is set
/// up): until then it counts as not begun.
type Begun<'a> = &'a (dyn Fn() + Send + Sync);

/// Does one action; login times (of the sessions it opened) go to `logins`.
#[allow(clippy::too_many_arguments)]
async fn act(
    ctx: &Ctx,
    t: &UserType,
    user: &StoreUser,
    n: u64,
    action: Action,
    session: &mut Option<Session>,
    logins: &mut Vec<Duration>,
    rng: &mut fastrand::Rng,
    begun: Begun<'_>,
) -> Outcome {
    match action {
        Action::Receive => {
            let to = vec![user.address.clone()];
            let message = ctx.message(n, t.receive_size);
            return deliver_message(ctx, to, message, Via::Lmtp, begun).await;
        }
        Action::Check => return check(ctx, user, begun).await,
        Action::Send if t.client == Client::Pop3 => {
            let to = others(ctx, n, t.send_recipients, rng);
            let message = ctx.message(n, t.send_size);
            return deliver_message(ctx, to, message, Via::Submit, begun).await;
        }
        _ => {}
    }
    if session.is_none() || t.client == Client::LoginPerAction {
        // run() refuses a scenario with IMAP users and no IMAP server.
        let Some(imap) = ctx.imap.as_ref() else {
            return Outcome::Failed(ErrorClass::Protocol, "no imap server".into());
        };
        match open(ctx, imap, user, logins).await {
            Ok(s) => *session = Some(s),
            Err(e) => {
                *session = None;
                return Outcome::Failed(e.class(), e.to_string());
            }
        }
    }
    begun();
    let Some(s) = session.as_mut() else {
        return Outcome::Failed(ErrorClass::Protocol, "no session".into());
    };
    let result = imap_action(ctx, t, n, action, s, rng, begun).await;
    if t.client == Client::LoginPerAction
        && let Some(s) = session.take()
    {
        s.conn.logout().await;
    }
    match result {
        Ok(o) => o,
        Err(e) => {
            *session = None;
            Outcome::Failed(e.class(), e.to_string())
        }
    }
}

async fn open(
    ctx: &Ctx,
    imap: &crate::transport::target::Target,
    user: &StoreUser,
    logins: &mut Vec<Duration>,
) -> Result<Session, ImapError> {
    let started = Instant::now();
    let login = Login::Login {
        user: user.address.clone(),
        pass: user.password.clone(),
    };
    let conn = ctx.reached(
        Server::Imap,
        ImapConn::open(imap, &ctx.connect, false, &login).await,
    )?;
    logins.push(started.elapsed());
    Ok(Session {
        conn,
        model: Model::new(0, 0),
        selected: false,
    })
}

/// Runs `cmd`, applying its data to the model; NO or BAD becomes the outcome.
async fn step(s: &mut Session, cmd: &Command) -> Result<Result<Reply, Outcome>, ImapError> {
    let r = s.conn.run(cmd).await?;
    let mut ignored = Vec::new();
    for d in &r.data {
        s.model.apply(d, None, &mut ignored);
    }
    if r.done.cond == Cond::Ok {
        Ok(Ok(r))
    } else {
        Ok(Err(Outcome::Refused(format!(
            "{:?}: {}",
            cmd.phase(),
            r.said()
        ))))
    }
}

/// Where `move` puts messages (created when the server says it is missing).
const ARCHIVE: &str = "Archive";

/// `?` for a step: a refusal ends the action with it.
macro_rules! ok {
    ($e:expr) => {
        match $e? {
            Ok(r) => r,
            Err(refused) => return Ok(refused),
        }
    };
}

/// Marks message `seq` `\Deleted` and expunges it, as a client's delete does.
async fn delete(s: &mut Session, seq: u32) -> Result<Result<(), Outcome>, ImapError> {
    let flag = Command::Store {
        seq,
        op: FlagOp::Add,
        flag: DELETED,
    };
    if let Err(refused) = step(s, &flag).await? {
        return Ok(Err(refused));
    }
    Ok(step(s, &Command::Expunge).await?.map(|_| ()))
}

async fn select(s: &mut Session) -> Result<Result<(), Outcome>, ImapError> {
    s.model.reset();
    let cmd = Command::Select {
        mailbox: "INBOX".into(),
        read_only: false,
    };
    Ok(step(s, &cmd).await?.map(|_| {
        s.selected = true;
    }))
}

async fn imap_action(
    ctx: &Ctx,
    t: &UserType,
    n: u64,
    action: Action,
    s: &mut Session,
    rng: &mut fastrand::Rng,
    begun: Begun<'_>,
) -> Result<Outcome, ImapError> {
    // Out of IDLE first (DONE), taking what it pushed: the action sees the mailbox as it is.
    let pushed = s.conn.idle_end().await?;
    for d in &pushed {
        s.model.apply(d, None, &mut Vec::new());
    }
    if !s.selected || action == Action::OpenInbox {
        ok!(select(s).await);
        if action == Action::OpenInbox {
            let last = s.model.exists();
            if last > 0 {
                let cmd = Command::Fetch {
                    first: last.saturating_sub(19).max(1),
                    last,
                    items: FetchItems::Meta,
                };
                ok!(step(s, &cmd).await);
            }
            return Ok(Outcome::Ok);
        }
    }
    let exists = s.model.exists();
    let seq = rng.u32(1..=exists.max(1));
    let needs_message = matches!(
        action,
        Action::Read | Action::Delete | Action::Flag | Action::Move
    );
    if needs_message && exists == 0 {
        // Nothing to act on: the user looked and found an empty mailbox.
        return Ok(Outcome::Ok);
    }
    match action {
        Action::CloseInbox => {
            ok!(step(s, &Command::Close).await);
            s.selected = false;
        }
        Action::Read => {
            let cmd = Command::Fetch {
                first: seq,
                last: seq,
                items: FetchItems::Read,
            };
            ok!(step(s, &cmd).await);
        }
        Action::Delete => ok!(delete(s, seq).await),
        Action::Flag => {
            let op = if rng.bool() {
                FlagOp::Add
            } else {
                FlagOp::Remove
            };
            let cmd = Command::Store {
                seq,
                op,
                flag: "\\Flagged",
            };
            ok!(step(s, &cmd).await);
        }
        Action::Move if s.conn.offers("MOVE") => {
            let mailbox = ARCHIVE.into();
            ok!(into_folder(s, ARCHIVE, Command::Move { seq, mailbox }).await);
        }
        Action::Move => {
            let mailbox = ARCHIVE.into();
            ok!(into_folder(s, ARCHIVE, Command::Copy { seq, mailbox }).await);
            ok!(delete(s, seq).await);
        }
        Action::Search => {
            ok!(step(s, &Command::Search("UNSEEN")).await);
        }
        Action::Send => {
            let to = others(ctx, n, t.send_recipients, rng);
            let message = ctx.message(n, t.send_size);
            if let o @ (Outcome::Refused(_) | Outcome::Failed(..)) =
                deliver_message(ctx, to, message.clone(), Via::Submit, begun).await
            {
                return Ok(o);
            }
            let append = Command::Append {
                mailbox: "Sent".into(),
                flags: "\\Seen",
                message,
                literal_plus: s.conn.offers("LITERAL+"),
            };
            ok!(into_folder(s, "Sent", append).await);
        }
        Action::OpenInbox | Action::Receive | Action::Check => {}
    }
    Ok(Outcome::Ok)
}

/// Runs a command into `folder`, creating the folder when the server says it is missing
/// (`[TRYCREATE]`, or any NO to the first try).
async fn into_folder(
    s: &mut Session,
    folder: &str,
    cmd: Command,
) -> Result<Result<(), Outcome>, ImapError> {
    let mut r = s.conn.run(&cmd).await?;
    // MOVE expunges from the selected mailbox; COPY or APPEND into it adds; and any reply
    // may announce what other sessions did: every reply's data goes to the model.
    let mut data = std::mem::take(&mut r.data);
    if r.done.code == Some(Code::TryCreate) {
        // The folder is missing; if CREATE fails too, the retry says why.
        data.extend(s.conn.run(&Command::Create(folder.into())).await?.data);
        r = s.conn.run(&cmd).await?;
        data.append(&mut r.data);
    }
    for d in &data {
        s.model.apply(d, None, &mut Vec::new());
    }
    if r.done.cond == Cond::Ok {
        Ok(Ok(()))
    } else {
        Ok(Err(Outcome::Refused(format!(
            "{:?}: {}",
            cmd.phase(),
            r.said()
        ))))
    }
}

/// `k` other users than `n`, drawn at random (all of them when there are fewer).
fn others(ctx: &Ctx, n: u64, k: u32, rng: &mut fastrand::Rng) -> Vec<String> {
    let count = ctx.users.len();
    let me = (n % count as u64) as usize;
    let mut out = Vec::new();
    for _ in 0..k.min(count.saturating_sub(1) as u32).max(1) {
        let mut i = rng.usize(..count);
        if i == me && count > 1 {
            i = (i + 1) % count;
        }
        out.push(ctx.users[i].address.clone());
    }
    out
}

/// How a message gets to the store.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The store's LMTP (a delivery).
    Lmtp,
    /// The MTA's SMTP when there is one (a user sending), else the store's LMTP.
    Submit,
}

/// One LMTP or SMTP transaction: the message for `to`.
async fn deliver_message(
    ctx: &Ctx,
    to: Vec<String>,
    message: Bytes,
    via: Via,
    begun: Begun<'_>,
) -> Outcome {
    let (target, lmtp) = match (via, &ctx.smtp) {
        (Via::Submit, Some(mta)) => (mta, false),
        // run() refuses a scenario that delivers with no LMTP server.
        _ => match ctx.lmtp.as_ref() {
            Some(lmtp) => (lmtp, true),
            None => return Outcome::Failed(ErrorClass::Protocol, "no lmtp server".into()),
        },
    };
    let cfg = ClientConfig {
        lmtp,
        helo_name: "mailbench.test".into(),
        pipelining: true,
        chunking: false,
        starttls: false,
        auth: None,
    };
    let result = async {
        let server = if lmtp { Server::Lmtp } else { Server::Smtp };
        let mut c = ctx.reached(server, ClientConn::open(target, &ctx.connect, cfg).await)?;
        begun();
        let txn = Transaction {
            mail_from: "profile@mailbench.test".into(),
            rcpts: to,
            prefix: Bytes::new(),
            raw: message.clone(),
            stuffed: message,
            suffix: Bytes::new(),
            eight_bit: false,
        };
        let o = c.send(txn).await?;
        c.quit_timed().await;
        Ok::<_, crate::smtp::conn::ConnError>(o)
    }
    .await;
    match result {
        Ok(o) if o.accepted => Outcome::Ok,
        Ok(o) => Outcome::Refused(format!("the delivery was refused: {o:?}")),
        Err(e) => Outcome::Failed(e.class(), e.to_string()),
    }
}

/// A POP3 session that downloads and deletes everything.
async fn check(ctx: &Ctx, user: &StoreUser, begun: Begun<'_>) -> Outcome {
    let login = Pop3Login::UserPass {
        user: user.address.clone(),
        pass: user.password.clone(),
    };
    // run() refuses a scenario with POP3 users and no POP3 server.
    let Some(pop3) = ctx.pop3.as_ref() else {
        return Outcome::Failed(ErrorClass::Protocol, "no pop3 server".into());
    };
    let result = async {
        let opened = Pop3Conn::open(pop3, &ctx.connect, false, &login).await;
        let mut c = ctx.reached(Server::Pop3, opened)?;
        begun();
        let stat = c.batch(&[Pop3Command::Stat]).await?;
        let count = stat.first().and_then(stat_count).unwrap_or(0);
        let mut cmds: Vec<Pop3Command> = (1..=count).map(Pop3Command::Retr).collect();
        cmds.extend((1..=count).map(Pop3Command::Dele));
        cmds.push(Pop3Command::Quit);
        let replies = c.batch(&cmds).await?;
        Ok::<_, crate::pop3::conn::ConnError>(replies.into_iter().find(|r| !r.ok))
    }
    .await;
    match result {
        Ok(None) => Outcome::Ok,
        Ok(Some(r)) => Outcome::Refused(format!("-ERR {}", r.text)),
        Err(e) => Outcome::Failed(e.class(), e.to_string()),
    }
}

impl Ctx {
    /// A message of about `size` octets with a unique Message-ID and the trace header.
    fn message(&self, n: u64, size: usize) -> Bytes {
        use std::fmt::Write as _;
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut m = String::with_capacity(size + 300);
        let _ = write!(
            m,
            "From: user{n}@mailbench.test\r\nSubject: mailbench profile message {seq}\r\n\
             Message-ID: <{:016x}.p{seq}@mailbench.test>\r\n",
            self.run_id
        );
        crate::message::trace::Trace {
            run: self.run_id,
            seq,
            sent_us: crate::stats::clock::unix_us(),
        }
        .write(&mut m);
        m.push_str("\r\n");
        let line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\r\n";
        while m.len() + line.len() <= size.max(m.len() + line.len()) && m.len() < size {
            m.push_str(line);
        }
        Bytes::from(m)
    }
}

/// What every action's connection options are.
pub fn connect_options(connect: Duration, command: Duration) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: connect,
        command_timeout: command,
        source_ip: None,
        tls: None,
        implicit_tls: false,
        count: None,
    }
}
