//! The only place where the POP3 client touches sockets: `Pop3Conn` drives a sans-IO
//! [`Pop3Client`] over TCP, a unix socket or TLS, applies timeouts, and stamps every
//! response with the time it took (from the later of the last write and the previous
//! response, so pipelined responses are charged only their own time).

use std::io;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::proto::{Command, Phase, Pop3Client, Pop3Error, Response, apop_digest, capabilities};
use crate::error::ErrorClass;
use crate::transport::connect::ConnectOptions;
use crate::transport::greeting;
use crate::transport::inbox::Inbox;
use crate::transport::link::{self, LinkError};
use crate::transport::patience::Patience;
use crate::transport::stream::Stream;
use crate::transport::target::Target;

/// Read buffer growth step: message bodies stream through it, so it is sized for the
/// reads the kernel has ready under load rather than for a status line (fewer reads and
/// wake-ups per message).
const READ_CHUNK: usize = 16384;

/// How to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// USER and PASS (RFC 1939).
    UserPass {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
    /// AUTH PLAIN with an initial response (RFC 5034).
    Plain {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
    /// APOP with a digest of the greeting's timestamp (RFC 1939 §7): the password never
    /// crosses the wire.
    Apop {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
}

/// A failure that ends a POP3 connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The link failed: connect, timeout, lost connection, TLS.
    #[error(transparent)]
    Link(#[from] LinkError<Phase>),
    /// The server refused a step without which the session cannot go on (greeting, STLS,
    /// login).
    #[error("{phase} refused: -ERR {text}")]
    Refused {
        /// The step refused, which the statistics charge and the message names.
        phase: Phase,
        /// What the server said.
        text: String,
    },
    /// The server broke the protocol.
    #[error(transparent)]
    Protocol(#[from] Pop3Error),
    /// The server greeted in another mail protocol (an IMAP or SMTP port).
    #[error("{}", greeting::Protocol::Pop3.mismatch(target, *speaks))]
    OtherProtocol {
        /// The address that answered.
        target: String,
        /// What it speaks.
        speaks: greeting::Protocol,
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
            ConnError::Protocol(_) | ConnError::OtherProtocol { .. } => ErrorClass::Protocol,
        }
    }

    /// The phase where it happened.
    pub fn phase(&self) -> Phase {
        match self {
            ConnError::Link(e) => e.phase(),
            ConnError::Refused { phase, .. } => *phase,
            ConnError::Protocol(Pop3Error::Reply { phase, .. }) => *phase,
            // Data after the last response awaited: the session's end.
            ConnError::Protocol(Pop3Error::Unexpected) => Phase::Quit,
            ConnError::OtherProtocol { .. } => Phase::Banner,
        }
    }
}

/// What a connection's set-up had measured when it failed: the steps it timed and the
/// octets it wrote.
#[derive(Debug, Default)]
pub struct SetUp {
    /// The steps finished, with their times.
    pub timings: Vec<(Phase, Duration)>,
    /// Octets written.
    pub bytes_out: u64,
}

/// One POP3 connection with its session.
pub struct Pop3Conn {
    stream: Stream,
    rbuf: Inbox,
    client: Pop3Client,
    command_timeout: Duration,
    /// The wait for the server, limited to `command_timeout`; its mark (the last write or
    /// response) is also where each response is timed from.
    patience: Patience,
    /// Per-phase latencies of the responses read since the caller last cleared it.
    pub timings: Vec<(Phase, Duration)>,
    /// The server offers PIPELINING: commands go out in one write.
    pub pipelining: bool,
    /// Octets written to the network since the caller last took them.
    pub bytes_out: u64,
    /// Logins the server accepted since the caller last took them (the set-up's one).
    pub logins: u64,
    tls_active: bool,
    /// QUIT went out in a batch: the session is over.
    ended: bool,
}

impl Pop3Conn {
    /// Opens a connection and runs the set-up: greeting, CAPA, STLS when `starttls`
    /// (implicit TLS when the options say so), login. The time of each step is left in
    /// `timings`.
    pub async fn open(
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
    ) -> Result<Pop3Conn, ConnError> {
        Self::open_timed(target, opts, starttls, login, &mut SetUp::default()).await
    }

    /// [`Pop3Conn::open`], leaving in `failed` what a set-up that fails had measured: the
    /// steps it finished, and the octets it wrote.
    pub async fn open_timed(
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
        failed: &mut SetUp,
    ) -> Result<Pop3Conn, ConnError> {
        let started = Instant::now();
        let stream = link::open(target, opts).await?;
        let connected = Instant::now();
        let mut c = Pop3Conn {
            stream,
            rbuf: Inbox::with_capacity(READ_CHUNK),
            client: Pop3Client::new(),
            command_timeout: opts.command_timeout,
            patience: Patience::new(opts.command_timeout),
            timings: Vec::with_capacity(16),
            pipelining: false,
            bytes_out: 0,
            logins: 0,
            tls_active: false,
            ended: false,
        };
        c.timings.push((Phase::Connect, connected - started));
        c.patience.restart(connected);
        match c.set_up(target, opts, starttls, login).await {
            Ok(()) => Ok(c),
            Err(e) => {
                failed.timings.append(&mut c.timings);
                failed.bytes_out += c.bytes_out;
                Err(e)
            }
        }
    }

    /// The set-up after the connection: TLS, greeting, CAPA, STLS, login.
    async fn set_up(
        &mut self,
        target: &Target,
        opts: &ConnectOptions,
        starttls: bool,
        login: &Login,
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
            greeting::Protocol::Pop3,
        );
        if let Some(speaks) = greeted.await? {
            let target = target.to_string();
            return Err(ConnError::OtherProtocol { target, speaks });
        }
        let greeting = self.required(Phase::Banner).await?.text;
        self.capa().await?;
        if starttls && !self.tls_active {
            let Some(cfg) = tls else {
                let why = io::Error::other("STLS without a TLS configuration");
                return Err(LinkError::Tls(why).into());
            };
            self.client.send(&Command::Stls);
            self.flush(Phase::Stls).await?;
            self.required(Phase::Stls).await?;
            Box::pin(self.upgrade(cfg, target.server_name())).await?;
            self.capa().await?;
        }
        self.login(login, &greeting).await?;
        self.logins += 1;
        Ok(())
    }

    /// True when TLS is active.
    pub fn tls_active(&self) -> bool {
        self.tls_active
    }

    /// Sends `cmds` — in one write when the server pipelines, else one at a time — and
    /// returns their responses in order. A `-ERR` is a response, not an error.
    pub async fn batch(&mut self, cmds: &[Command]) -> Result<Vec<Response>, ConnError> {
        let mut out = Vec::with_capacity(cmds.len());
        self.ended |= cmds.contains(&Command::Quit);
        if self.pipelining {
            for c in cmds {
                self.client.send(c);
            }
            if let Some(first) = cmds.first() {
                self.flush(first.phase()).await?;
            }
            for _ in cmds {
                out.push(self.response().await?.1);
            }
        } else {
            for c in cmds {
                self.client.send(c);
                self.flush(c.phase()).await?;
                out.push(self.response().await?.1);
            }
        }
        Ok(out)
    }

    /// Says QUIT (the server commits the deletions then) and returns how long it took, or
    /// `None` when it failed or a batch already said it.
    pub async fn quit(mut self) -> Option<Duration> {
        if self.ended {
            return None;
        }
        self.timings.clear();
        let r = self.batch(&[Command::Quit]).await.ok()?;
        r.first()
            .filter(|r| r.ok)
            .and_then(|_| self.timings.iter().find(|(p, _)| *p == Phase::Quit))
            .map(|(_, d)| *d)
    }

    /// CAPA: learns whether the server pipelines (a server without CAPA does not).
    async fn capa(&mut self) -> Result<(), ConnError> {
        let r = self.batch(&[Command::Capa]).await?;
        self.pipelining = r
            .first()
            .is_some_and(|r| r.ok && capabilities(r).iter().any(|c| c == "PIPELINING"));
        Ok(())
    }

    /// Logs in; `greeting` is the server's first line (APOP's timestamp is in it).
    async fn login(&mut self, login: &Login, greeting: &str) -> Result<(), ConnError> {
        let cmds = match login {
            Login::UserPass { user, pass } => {
                vec![Command::User(user.clone()), Command::Pass(pass.clone())]
            }
            Login::Plain { user, pass } => {
                vec![Command::AuthPlain(crate::sasl::plain_response(user, pass))]
            }
            Login::Apop { user, pass } => {
                let Some(digest) = apop_digest(greeting, pass) else {
                    return Err(ConnError::Refused {
                        phase: Phase::Auth,
                        text: "no APOP: the greeting has no <timestamp>".into(),
                    });
                };
                let user = user.clone();
                vec![Command::Apop { user, digest }]
            }
        };
        // USER and PASS go one at a time: a server may refuse USER alone.
        let pipelining = std::mem::replace(&mut self.pipelining, false);
        let result = self.batch(&cmds).await;
        self.pipelining = pipelining;
        // The login is one step, however many commands it takes.
        if cmds.len() > 1 && result.is_ok() {
            let from = self.timings.len().saturating_sub(cmds.len());
            let spent: Duration = self.timings.drain(from..).map(|(_, d)| d).sum();
            self.timings.push((Phase::Auth, spent));
        }
        match result?.into_iter().find(|r| !r.ok || r.continuation) {
            None => Ok(()),
            Some(r) => Err(ConnError::Refused {
                phase: Phase::Auth,
                text: r.text,
            }),
        }
    }

    /// Reads a response that must be `+OK`.
    async fn required(&mut self, phase: Phase) -> Result<Response, ConnError> {
        let (_, r) = self.response().await?;
        if r.ok {
            Ok(r)
        } else {
            Err(ConnError::Refused {
                phase,
                text: r.text,
            })
        }
    }

    async fn flush(&mut self, phase: Phase) -> Result<(), ConnError> {
        let out = self.client.take_output();
        self.bytes_out += out.len() as u64;
        let write = async {
            self.stream.write_all(&out).await?;
            self.stream.flush().await
        };
        let result = self.patience.bound(write, phase).await;
        self.patience.restart(Instant::now());
        Ok(result?)
    }

    /// Reads the next response and times it.
    async fn response(&mut self) -> Result<(Phase, Response), ConnError> {
        loop {
            if !self.rbuf.is_empty() {
                let (used, done) = self.client.feed(self.rbuf.unread())?;
                self.rbuf.consume(used);
                if let Some((phase, r)) = done {
                    let now = Instant::now();
                    self.timings.push((phase, now - self.patience.since()));
                    self.patience.restart(now);
                    return Ok((phase, r));
                }
            }
            let phase = self.client.awaiting().unwrap_or(Phase::Quit);
            self.patience
                .read(&mut self.stream, self.rbuf.room(READ_CHUNK), phase)
                .await?;
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
