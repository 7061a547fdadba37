//! The only place where the IMAP client touches sockets: `ImapConn` drives a sans-IO
//! [`ImapClient`] over TCP, a unix socket or TLS, applies timeouts, and times every
//! command from its write to its tagged completion.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::proto::{
    Code, Command, Completion, Cond, Data, Event, ImapClient, ImapError, Phase, Words,
};
use crate::error::ErrorClass;
use crate::transport::connect::ConnectOptions;
use crate::transport::greeting::{self, Protocol};
use crate::transport::inbox::Inbox;
use crate::transport::link::{self, LinkError};
use crate::transport::patience::Patience;
use crate::transport::stream::Stream;
use crate::transport::target::Target;

/// Read buffer growth step: message bodies stream through it.
const READ_CHUNK: usize = 16384;

/// Read buffer growth step with several commands in flight: their responses queue in the
/// socket, and one read takes several (a quarter of the syscalls at depth 10 and 10 KiB
/// bodies). One command at a time keeps [`READ_CHUNK`]: ten thousand idle sessions hold
/// their buffers.
const PIPELINED_CHUNK: usize = 4 * READ_CHUNK;

/// The most one pipelined read asks for. A read that fills all the room it was given
/// doubles the next one's, from [`PIPELINED_CHUNK`] up to this: at depth 10 and 10 KiB
/// bodies ten responses wait in the socket (106 KB), and reading them in one go instead
/// of two makes one write of ten freed commands instead of two of five (an eighth fewer
/// syscalls). Beyond it, copying the octets costs far more than the syscall.
const PIPELINED_CHUNK_MAX: usize = 16 * READ_CHUNK;

/// How to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// LOGIN user password.
    Login {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
    /// AUTHENTICATE PLAIN with an initial response (RFC 4959).
    Plain {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
}

/// A failure that ends an IMAP connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The link failed: connect, timeout, lost connection, TLS.
    #[error(transparent)]
    Link(#[from] LinkError<Phase>),
    /// The server refused a step without which the session cannot go on (greeting,
    /// STARTTLS, login, the first SELECT), or is not an IMAP4rev1 server.
    #[error("{phase} refused: {text}")]
    Refused {
        /// The step refused, which the statistics charge and the message names.
        phase: Phase,
        /// What the server said.
        text: String,
    },
    /// The server greeted in another mail protocol (a POP3 or SMTP port).
    #[error("{}", Protocol::Imap.mismatch(target, *speaks))]
    OtherProtocol {
        /// The address that answered.
        target: String,
        /// What it speaks.
        speaks: Protocol,
    },
    /// The server does not speak IMAP4rev1 (nor IMAP4rev2).
    #[error("not an IMAP4rev1 server (it offers: {offers})")]
    NotImap4 {
        /// Its capabilities.
        offers: String,
    },
    /// The server broke the protocol.
    #[error("{phase}: {source}")]
    Protocol {
        /// The step at which the server broke the protocol, charged with the failure.
        phase: Phase,
        /// What the server did wrong, for the error table's sample.
        source: ImapError,
    },
}

/// Where the link charges connecting and the TLS handshake.
impl link::LinkPhase for Phase {
    const CONNECT: Phase = Phase::Connect;
    const TLS_HANDSHAKE: Phase = Phase::TlsHandshake;
}

impl ConnError {
    /// The statistics class of this failure.
    pub fn class(&self) -> ErrorClass {
        match self {
            ConnError::Link(e) => e.class(),
            ConnError::Refused { .. } => ErrorClass::Rejected,
            ConnError::NotImap4 { .. }
            | ConnError::OtherProtocol { .. }
            | ConnError::Protocol { .. } => ErrorClass::Protocol,
        }
    }

    /// The phase where it happened.
    pub fn phase(&self) -> Phase {
        match self {
            ConnError::Link(e) => e.phase(),
            ConnError::Refused { phase, .. } | ConnError::Protocol { phase, .. } => *phase,
            ConnError::NotImap4 { .. } => Phase::Capability,
            ConnError::OtherProtocol { .. } => Phase::Banner,
        }
    }
}

/// What a connection's set-up had measured when it failed: the steps it timed, the login
/// the server had accepted (a later step failing), and the octets it wrote.
#[derive(Debug, Default)]
pub struct SetUp {
    /// The steps finished, with their times.
    pub timings: Vec<(Phase, Duration)>,
    /// 1 when the server had accepted the login.
    pub logins: u64,
    /// Octets written.
    pub bytes_out: u64,
}

/// A completed command and the untagged data that came with it.
#[derive(Debug)]
pub struct Reply {
    /// The tagged completion.
    pub done: Completion,
    /// Untagged data received since the previous completion.
    pub data: Vec<Data>,
}

impl Reply {
    /// The completion's text as the server said it (`NO text`).
    pub fn said(&self) -> String {
        let cond = match self.done.cond {
            Cond::Ok => "OK",
            Cond::No => "NO",
            _ => "BAD",
        };
        format!("{cond} {}", self.done.text)
    }
}

/// One IMAP connection with its session.
pub struct ImapConn {
    stream: Stream,
    rbuf: Inbox,
    client: ImapClient,
    command_timeout: Duration,
    /// How long a wait for the server may last: `command_timeout` from the last command
    /// written or completed.
    patience: Patience,
    /// Per-phase latencies of the commands completed since the caller last cleared it.
    pub timings: Vec<(Phase, Duration)>,
    /// Octets written to the network since the caller last took them.
    pub bytes_out: u64,
    /// Logins the server accepted since the caller last took them (the set-up's one).
    pub logins: u64,
    /// The server's capabilities (after login, when it said them again).
    pub caps: Words,
    tls_active: bool,
    /// LOGOUT was sent.
    ended: bool,
    /// In IDLE: the server's continuation came and DONE was not said yet.
    idling: bool,
    /// Pipelined commands pushed and not written yet (tags).
    unwritten: Vec<u32>,
    /// Pipelined commands written, by tag, with when: each one's latency counts from its
    /// own write.
    written: Vec<(u32, Instant)>,
    /// What the next read asks for while several commands are in flight (see
    /// [`PIPELINED_CHUNK_MAX`]).
    burst: usize,
    /// A reply's data vector handed back by the caller ([`ImapConn::recycle`]): the next
    /// reply fills it instead of growing a new one (a metadata FETCH's reply holds up to
    /// `--fetch-range` responses of ~150 octets each, copied at every doubling).
    spare: Vec<Data>,
    /// When kept (`Some`): the count of every untagged EXISTS read, with the wall-clock µs
    /// it was read at — when each message became visible, for a caller that times
    /// arrivals. An EXPUNGE lowers the counts it renumbers (RFC 3501 §7.4.1).
    pub exists_log: Option<Vec<(u32, u64)>>,
}

impl ImapConn {
    /// Opens a connection and runs the set-up: greeting, capabilities, STARTTLS when
    /// `starttls` (implicit TLS when the options say so), login. The time of each step is
    /// left in `timings`.
    pub async fn open(
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
    ) -> Result<ImapConn, ConnError> {
        Self::open_timed(target, opts, starttls, login, &mut SetUp::default()).await
    }

    /// [`ImapConn::open`], leaving in `failed` what a set-up that fails had measured: the
    /// steps it finished, and whether the server had accepted the login.
    pub async fn open_timed(
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
        failed: &mut SetUp,
    ) -> Result<ImapConn, ConnError> {
        let started = Instant::now();
        let stream = link::open(target, opts).await?;
        let connected = Instant::now();
        let mut c = ImapConn {
            stream,
            rbuf: Inbox::with_capacity(READ_CHUNK),
            client: ImapClient::new(),
            command_timeout: opts.command_timeout,
            patience: Patience::new(opts.command_timeout),
            timings: Vec::with_capacity(8),
            spare: Vec::new(),
            bytes_out: 0,
            logins: 0,
            caps: Words::default(),
            tls_active: false,
            ended: false,
            idling: false,
            unwritten: Vec::new(),
            written: Vec::new(),
            burst: PIPELINED_CHUNK,
            exists_log: None,
        };
        c.timings.push((Phase::Connect, connected - started));
        c.patience.restart(connected);
        match c.set_up(target, opts, starttls, login, connected).await {
            Ok(()) => Ok(c),
            Err(e) => {
                failed.timings.append(&mut c.timings);
                failed.logins += c.logins;
                failed.bytes_out += c.bytes_out;
                Err(e)
            }
        }
    }

    /// The set-up after the connection: TLS, greeting, STARTTLS, login.
    async fn set_up(
        &mut self,
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
        connected: Instant,
    ) -> Result<(), ConnError> {
        let tls = opts.tls.clone();
        if opts.implicit_tls
            && let Some(cfg) = &tls
        {
            Box::pin(self.upgrade(cfg.clone(), target.server_name())).await?;
        }
        let greeted = greeting::other_protocol(
            &mut self.stream,
            &mut self.rbuf,
            &mut self.patience,
            Phase::Banner,
            Protocol::Imap,
        );
        if let Some(speaks) = greeted.await? {
            let target = target.to_string();
            return Err(ConnError::OtherProtocol { target, speaks });
        }
        self.greeting(connected).await?;
        if starttls && !self.tls_active {
            let Some(cfg) = tls else {
                let why = io::Error::other("STARTTLS without a TLS configuration");
                return Err(LinkError::Tls(why).into());
            };
            self.required(&Command::Starttls).await?;
            Box::pin(self.upgrade(cfg, target.server_name())).await?;
            self.capabilities().await?;
        }
        self.login(login).await
    }

    /// True when TLS is active.
    pub fn tls_active(&self) -> bool {
        self.tls_active
    }

    /// True when the server offers `cap`.
    pub fn offers(&self, cap: &str) -> bool {
        self.caps.has(cap)
    }

    /// Sends `cmd` and reads until its completion, timing it under its phase. A NO or BAD
    /// is a reply, not an error. In IDLE, DONE is said first (RFC 2177: no command before
    /// it); what the server pushed meanwhile comes first in the reply's data.
    pub async fn run(&mut self, cmd: &Command) -> Result<Reply, ConnError> {
        // Not in IDLE (nearly always): no DONE to say, and no future to build for it.
        let mut data = if self.idling {
            self.idle_end().await?
        } else {
            std::mem::take(&mut self.spare)
        };
        let phase = cmd.phase();
        self.ended |= matches!(cmd, Command::Logout);
        self.client.send(cmd);
        let start = Instant::now();
        self.patience.restart(start);
        self.flush(phase).await?;
        loop {
            match self.event(phase).await? {
                Event::Data(d) => data.push(d),
                Event::Continue => self.go_on(phase).await?,
                Event::Done(done) => {
                    let now = Instant::now();
                    self.patience.restart(now);
                    self.timings.push((phase, now - start));
                    return Ok(Reply { done, data });
                }
            }
        }
    }

    /// Queues `cmd` behind those in flight (pipelining; the caller obeys
    /// [`crate::imap::proto::pipeline::may_send`]) and returns its tag: it is written with
    /// the others pushed when the connection next has to wait for the server (or by
    /// `ImapConn::write_pushed`), in one write. Responses already read are handled
    /// first: each frees a slot that is refilled before the write, so a batch carries
    /// every command freed by one read, not one command per completion.
    pub fn push(&mut self, cmd: &Command) -> u32 {
        self.ended |= matches!(cmd, Command::Logout);
        let tag = self.client.send(cmd);
        self.unwritten.push(tag);
        tag
    }

    /// Reads until the next tagged completion of a pushed command, whichever it is (writing
    /// what was pushed before waiting for the server), timing it from its own write under
    /// its phase. The data is what came since the previous completion.
    pub async fn reply(&mut self) -> Result<Reply, ConnError> {
        let phase = self.client.awaiting().unwrap_or(Phase::Noop);
        let mut data = std::mem::take(&mut self.spare);
        loop {
            match self.event(phase).await? {
                Event::Data(d) => data.push(d),
                Event::Continue => self.go_on(phase).await?,
                Event::Done(done) => {
                    if let Some(i) = self.written.iter().position(|(t, _)| *t == done.tag) {
                        let (_, start) = self.written.swap_remove(i);
                        let now = Instant::now();
                        self.patience.restart(now);
                        self.timings.push((done.phase, now - start));
                    }
                    return Ok(Reply { done, data });
                }
            }
        }
    }

    /// Takes back a reply's data once the caller is done with it, for the next reply to
    /// fill (see `spare`).
    pub fn recycle(&mut self, mut data: Vec<Data>) {
        data.clear();
        if data.capacity() > self.spare.capacity() {
            self.spare = data;
        }
    }

    /// Writes what was pushed, in one write; each command's latency counts from here.
    async fn write_pushed(&mut self) -> Result<(), ConnError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let phase = self.client.awaiting().unwrap_or(Phase::Noop);
        let now = Instant::now();
        self.patience.restart(now);
        self.written
            .extend(self.unwritten.drain(..).map(|tag| (tag, now)));
        self.flush(phase).await
    }

    /// IDLE until `wake` resolves or the server pushes data that `enough` accepts, then
    /// DONE: returns what the server pushed. The time to the server's continuation is the
    /// `idle` step.
    pub async fn idle(
        &mut self,
        wake: impl std::future::Future<Output = ()>,
        enough: impl Fn(&Data) -> bool,
    ) -> Result<Vec<Data>, ConnError> {
        let mut data = self.idle_wait(wake, enough).await?;
        data.extend(self.idle_end().await?);
        Ok(data)
    }

    /// True while in IDLE (confirmed by the server, DONE not said).
    pub fn idling(&self) -> bool {
        self.idling
    }

    /// Enters IDLE and returns once the server confirms it (its `+ idling` continuation):
    /// from then on it pushes what changes. Returns what came before the continuation; the
    /// time to it is the `idle` step. Nothing is done when already in IDLE.
    pub async fn idle_begin(&mut self) -> Result<Vec<Data>, ConnError> {
        let mut data = Vec::new();
        if self.idling {
            return Ok(data);
        }
        let phase = Phase::Idle;
        self.client.send(&Command::Idle);
        let start = Instant::now();
        self.patience.restart(start);
        self.flush(phase).await?;
        loop {
            match self.event(phase).await? {
                Event::Data(d) => data.push(d),
                Event::Continue => break,
                Event::Done(d) => {
                    return Err(ConnError::Refused {
                        phase,
                        text: d.text,
                    });
                }
            }
        }
        self.timings.push((phase, start.elapsed()));
        self.idling = true;
        Ok(data)
    }

    /// Waits in IDLE (entering it first when not in it) until `wake` resolves or the server
    /// pushes data that `enough` accepts, and stays in IDLE: returns what was pushed. DONE
    /// is [`ImapConn::idle_end`], or the next command's.
    pub async fn idle_wait(
        &mut self,
        wake: impl std::future::Future<Output = ()>,
        enough: impl Fn(&Data) -> bool,
    ) -> Result<Vec<Data>, ConnError> {
        let phase = Phase::Idle;
        let mut data = self.idle_begin().await?;
        tokio::pin!(wake);
        loop {
            // What has arrived (some may have come with the continuation) may be enough.
            while let Some(e) = self.parse_one(phase)? {
                if let Event::Data(d) = e {
                    data.push(d);
                }
            }
            if data.iter().any(&enough) {
                return Ok(data);
            }
            let read = async {
                // An idle connection waits as long as it must: no command is timed.
                let room = self.rbuf.room(READ_CHUNK);
                tokio::io::AsyncReadExt::read_buf(&mut self.stream, room).await
            };
            tokio::select! {
                _ = &mut wake => return Ok(data),
                n = read => match n {
                    Ok(0) => {
                        let source = io::Error::new(io::ErrorKind::UnexpectedEof, "closed by the server");
                        return Err(LinkError::Io { phase, source }.into());
                    }
                    Err(source) => return Err(LinkError::Io { phase, source }.into()),
                    Ok(_) => {}
                }
            }
        }
    }

    /// Ends IDLE: DONE, then what the server pushed until its completion. Nothing is done
    /// when not in IDLE.
    pub async fn idle_end(&mut self) -> Result<Vec<Data>, ConnError> {
        let mut data = Vec::new();
        if !self.idling {
            return Ok(data);
        }
        self.idling = false;
        let phase = Phase::Idle;
        self.client.done();
        self.patience.restart(Instant::now());
        self.flush(phase).await?;
        loop {
            match self.event(phase).await? {
                Event::Data(d) => data.push(d),
                Event::Done(_) => return Ok(data),
                Event::Continue => {}
            }
        }
    }

    /// Says LOGOUT and returns how long it took, or `None` when it failed or was said.
    pub async fn logout(self) -> Option<Duration> {
        self.logout_counted().await.0
    }

    /// [`ImapConn::logout`], with the octets written since the caller last took them
    /// (the LOGOUT's among them).
    pub async fn logout_counted(mut self) -> (Option<Duration>, u64) {
        if self.ended {
            return (None, self.bytes_out);
        }
        self.timings.clear();
        let r = self.run(&Command::Logout).await;
        let took = r
            .ok()
            .filter(|r| r.done.cond == Cond::Ok)
            .and_then(|_| self.timings.iter().find(|(p, _)| *p == Phase::Logout))
            .map(|(_, d)| *d);
        (took, self.bytes_out)
    }

    async fn greeting(&mut self, connected: Instant) -> Result<(), ConnError> {
        let greeting = loop {
            match self.event(Phase::Banner).await? {
                Event::Data(Data::Status { cond, code, text }) => break (cond, code, text),
                Event::Data(_) => continue,
                _ => {
                    return Err(ConnError::Protocol {
                        phase: Phase::Banner,
                        source: ImapError::UnknownTag,
                    });
                }
            }
        };
        self.timings.push((Phase::Banner, connected.elapsed()));
        match greeting {
            (Cond::Ok | Cond::Preauth, Some(Code::Capability(caps)), _) => {
                self.caps = caps;
                self.require_imap4()
            }
            (Cond::Ok | Cond::Preauth, _, _) => self.capabilities().await,
            (_, _, text) => Err(ConnError::Refused {
                phase: Phase::Banner,
                text,
            }),
        }
    }

    /// CAPABILITY: what the server offers.
    async fn capabilities(&mut self) -> Result<(), ConnError> {
        let r = self.required(&Command::Capability).await?;
        for d in r.data {
            if let Data::Capability(caps) = d {
                self.caps = caps;
            }
        }
        self.require_imap4()
    }

    fn require_imap4(&self) -> Result<(), ConnError> {
        if self.offers("IMAP4rev1") || self.offers("IMAP4rev2") {
            return Ok(());
        }
        Err(ConnError::NotImap4 {
            offers: self.caps.as_str().to_string(),
        })
    }

    async fn login(&mut self, login: &Login) -> Result<(), ConnError> {
        let cmd = match login {
            Login::Login { user, pass } => Command::Login {
                user: user.clone(),
                pass: pass.clone(),
            },
            Login::Plain { user, pass } => {
                Command::AuthPlain(crate::sasl::plain_response(user, pass))
            }
        };
        let r = self.required(&cmd).await?;
        self.logins += 1;
        match r.done.code {
            Some(Code::Capability(caps)) => self.caps = caps,
            _ => self.capabilities().await?,
        }
        Ok(())
    }

    /// Runs a command that must succeed.
    pub async fn required(&mut self, cmd: &Command) -> Result<Reply, ConnError> {
        let r = self.run(cmd).await?;
        if r.done.cond == Cond::Ok {
            Ok(r)
        } else {
            Err(ConnError::Refused {
                phase: cmd.phase(),
                text: r.said(),
            })
        }
    }

    async fn flush(&mut self, phase: Phase) -> Result<(), ConnError> {
        let out = self.client.output();
        if out.is_empty() {
            return Ok(());
        }
        self.bytes_out += out.len() as u64;
        let write = async {
            self.stream.write_all(out).await?;
            self.stream.flush().await
        };
        self.patience.bound(write, phase).await?;
        self.client.clear_output();
        Ok(())
    }

    /// Writes what follows the server's continuation (a literal's octets): the server
    /// answered, so the wait is counted anew.
    async fn go_on(&mut self, phase: Phase) -> Result<(), ConnError> {
        self.patience.restart(Instant::now());
        self.flush(phase).await
    }

    /// A complete response from what has been read, if any.
    fn parse_one(&mut self, phase: Phase) -> Result<Option<Event>, ConnError> {
        match self.client.feed(self.rbuf.unread()) {
            Ok(Some((used, e))) => {
                self.rbuf.consume(used);
                if let Some(log) = &mut self.exists_log {
                    match &e {
                        Event::Data(Data::Exists(n)) => {
                            log.push((*n, crate::stats::clock::unix_us()));
                        }
                        Event::Data(Data::Expunge(n)) => {
                            for (count, _) in log.iter_mut().filter(|(c, _)| *n <= *c) {
                                *count -= 1;
                            }
                        }
                        _ => {}
                    }
                }
                Ok(Some(e))
            }
            Ok(None) => Ok(None),
            Err(source) => Err(ConnError::Protocol { phase, source }),
        }
    }

    /// Reads the next response; what was pushed is written before waiting for it.
    async fn event(&mut self, phase: Phase) -> Result<Event, ConnError> {
        loop {
            if !self.rbuf.is_empty()
                && let Some(e) = self.parse_one(phase)?
            {
                return Ok(e);
            }
            self.write_pushed().await?;
            let pipelined = self.written.len() > 1;
            let chunk = if pipelined { self.burst } else { READ_CHUNK };
            self.patience
                .read(&mut self.stream, self.rbuf.room(chunk), phase)
                .await?;
            if pipelined && self.rbuf.is_full() {
                // More is likely waiting in the socket: the next read takes more.
                self.burst = (2 * self.burst).min(PIPELINED_CHUNK_MAX);
            }
        }
    }

    async fn upgrade(
        &mut self,
        config: std::sync::Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<(), ConnError> {
        let started = Instant::now();
        let now = link::upgrade(&mut self.stream, config, name, self.command_timeout).await?;
        self.timings.push((Phase::TlsHandshake, now - started));
        self.patience.restart(now);
        self.tls_active = true;
        Ok(())
    }
}
