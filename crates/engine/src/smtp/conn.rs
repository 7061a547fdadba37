//! The only place where the client touches sockets: `ClientConn` drives a sans-IO
//! [`ClientSession`] over TCP, a unix socket or TLS, applies timeouts, and stamps every reply
//! with the time it took (from the later of the last write and the previous reply, so
//! pipelined replies are charged only their own processing time).

use std::io::{self, IoSlice};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::proto::{
    ClientConfig, ClientSession, Decoded, Phase, Reply, ReplyDecoder, SessionError, Step,
    Transaction, TxnOutcome,
};
use crate::error::ErrorClass;
use crate::transport::connect::ConnectOptions;
use crate::transport::greeting::{self, Protocol};
use crate::transport::inbox::Inbox;
use crate::transport::link::{self, LinkError};
use crate::transport::patience::Patience;
use crate::transport::stream::Stream;
use crate::transport::target::Target;

/// Read buffer growth step. Replies are short, and with tens of thousands of connections
/// every kilobyte per connection counts.
const READ_CHUNK: usize = 256;

/// A failure that ends a connection; the transaction in flight (if any) is lost.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The link failed: connect, timeout, lost connection, TLS.
    #[error(transparent)]
    Link(#[from] LinkError<Phase>),
    /// The server refused set-up or broke the protocol.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A malformed reply.
    #[error("malformed reply at {phase}: {error}")]
    Reply {
        /// The step whose reply was malformed, charged with the failure.
        phase: Phase,
        /// What was wrong with the reply, for the error table's sample.
        error: super::proto::ReplyError,
    },
    /// The session was already closed (e.g. after a 421).
    #[error("session closed by the server")]
    Closed,
    /// The server greeted in another mail protocol (a POP3 or IMAP port).
    #[error("{}", expected.mismatch(target, *speaks))]
    OtherProtocol {
        /// The address that answered.
        target: String,
        /// What was asked for: SMTP or LMTP.
        expected: Protocol,
        /// What it speaks.
        speaks: Protocol,
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
            ConnError::Closed => ErrorClass::Disconnect,
            ConnError::Session(SessionError::Rejected { reply, .. }) => {
                ErrorClass::of_code(reply.code)
            }
            ConnError::Session(SessionError::Protocol { .. })
            | ConnError::Reply { .. }
            | ConnError::OtherProtocol { .. } => ErrorClass::Protocol,
        }
    }

    /// The phase where the failure happened.
    pub fn phase(&self) -> Phase {
        match self {
            ConnError::Link(e) => e.phase(),
            ConnError::Reply { phase, .. } => *phase,
            ConnError::Session(SessionError::Rejected { phase, .. })
            | ConnError::Session(SessionError::Protocol { phase, .. }) => *phase,
            ConnError::Closed => Phase::Mail,
            ConnError::OtherProtocol { .. } => Phase::Banner,
        }
    }

    /// The reply code involved, 0 when none.
    pub fn code(&self) -> u16 {
        match self {
            ConnError::Session(SessionError::Rejected { reply, .. }) => reply.code,
            _ => 0,
        }
    }
}

/// What may follow the content of the transaction in flight, in the same write
/// (RFC 2920 §3.1; see [`Step::OfferFollow`]).
pub enum Follow {
    /// The next transaction.
    Txn(Transaction),
    /// QUIT: this connection's last message.
    Quit,
    /// Nothing (the next message is not due yet).
    Nothing,
}

/// A follow provider that never has anything.
pub fn nothing_follows() -> Follow {
    Follow::Nothing
}

/// One client connection with its session.
pub struct ClientConn {
    stream: Stream,
    rbuf: Inbox,
    decoder: ReplyDecoder,
    session: ClientSession,
    chunks: Vec<Bytes>,
    command_timeout: Duration,
    /// The wait for the server, limited to `command_timeout`; its mark (the last write or
    /// reply) is also where each reply is timed from.
    patience: Patience,
    tls: Option<(Arc<rustls::ClientConfig>, String)>,
    /// Per-phase latencies of the replies read since the caller last cleared it.
    pub timings: Vec<(Phase, Duration)>,
    /// Bytes written on this connection.
    pub bytes_out: u64,
    /// When the write that ended the last message's content finished (the end of the
    /// data, or the BDAT LAST chunk), set as its final reply is read: the instant a relay
    /// times end to end from, since an MTA cannot pass a message on before it has all of
    /// it (its 250 may reach the client after the message reached the next hop).
    pub data_end: Option<Instant>,
    /// When the last write finished.
    flushed: Instant,
}

impl ClientConn {
    /// Opens a connection and runs the set-up (greeting, EHLO, STARTTLS, AUTH). The time of
    /// each step is left in `timings`.
    pub async fn open(
        target: &Target,
        opts: &ConnectOptions,
        cfg: ClientConfig,
    ) -> Result<ClientConn, ConnError> {
        let started = Instant::now();
        let stream = link::open(target, opts).await?;
        let connected = Instant::now();
        let tls = opts
            .tls
            .clone()
            .map(|c| (c, target.server_name().to_string()));
        let lmtp = cfg.lmtp;
        let mut conn = ClientConn {
            stream,
            rbuf: Inbox::with_capacity(READ_CHUNK),
            decoder: ReplyDecoder::default(),
            session: ClientSession::new(cfg, opts.implicit_tls && opts.tls.is_some()),
            chunks: Vec::with_capacity(4),
            command_timeout: opts.command_timeout,
            patience: Patience::new(opts.command_timeout),
            tls,
            timings: Vec::with_capacity(8),
            bytes_out: 0,
            data_end: None,
            flushed: connected,
        };
        conn.timings.push((Phase::Connect, connected - started));
        conn.patience.restart(connected);
        if opts.implicit_tls && conn.tls.is_some() {
            Box::pin(conn.upgrade_tls()).await?;
        }
        let expected = match lmtp {
            true => Protocol::Lmtp,
            false => Protocol::Smtp,
        };
        let c = &mut conn;
        let greeted = greeting::other_protocol(
            &mut c.stream,
            &mut c.rbuf,
            &mut c.patience,
            Phase::Banner,
            expected,
        );
        if let Some(speaks) = greeted.await? {
            let target = target.to_string();
            return Err(ConnError::OtherProtocol {
                target,
                expected,
                speaks,
            });
        }
        match conn.drive(&mut nothing_follows).await? {
            None => Ok(conn),
            Some(_) => Err(ConnError::Session(SessionError::Protocol {
                phase: Phase::Ehlo,
                what: "transaction outcome during set-up",
            })),
        }
    }

    /// True when a new transaction may begin now: set-up done, nothing in flight, no QUIT
    /// queued and the server has not closed the session.
    pub fn is_idle(&self) -> bool {
        self.session.is_idle()
    }

    /// True when TLS is active on this connection.
    pub fn tls_active(&self) -> bool {
        self.session.tls_active()
    }

    /// Sends one message. A refused transaction is an `Ok` outcome; only a broken
    /// connection is an error.
    pub async fn send(&mut self, txn: Transaction) -> Result<TxnOutcome, ConnError> {
        self.begin(txn)?;
        self.complete(&mut nothing_follows).await
    }

    /// Starts a transaction without waiting for it.
    pub fn begin(&mut self, txn: Transaction) -> Result<(), ConnError> {
        if self.session.is_closed() {
            return Err(ConnError::Closed);
        }
        self.session.begin(txn);
        Ok(())
    }

    /// Drives the transaction in flight to its outcome. When its content is written,
    /// `follow` is asked what to send in the same write; a follow-on transaction is then in
    /// flight when this returns.
    pub async fn complete(
        &mut self,
        follow: &mut (dyn FnMut() -> Follow + Send),
    ) -> Result<TxnOutcome, ConnError> {
        match self.drive(follow).await? {
            Some(outcome) => Ok(outcome),
            None => Err(ConnError::Closed),
        }
    }

    /// Says QUIT and waits for the reply; returns how long the QUIT took, or `None` when
    /// the session was already closed or QUIT failed (the messages are done either way).
    pub async fn quit_timed(mut self) -> Option<Duration> {
        if self.session.is_closed() {
            return None;
        }
        self.session.quit();
        self.timings.clear();
        // Dropping the stream closes it; a separate shutdown(2) would only cost a syscall.
        let ok = self.drive(&mut nothing_follows).await.is_ok();
        let took = self
            .timings
            .iter()
            .find(|(p, _)| *p == Phase::Quit)
            .map(|(_, d)| *d);
        if ok { took } else { None }
    }

    /// Runs the session until it is ready, a transaction ends, or it closes.
    async fn drive(
        &mut self,
        follow: &mut (dyn FnMut() -> Follow + Send),
    ) -> Result<Option<TxnOutcome>, ConnError> {
        loop {
            match self.session.step() {
                Step::OfferFollow => match follow() {
                    Follow::Txn(txn) => self.session.follow_with(txn),
                    Follow::Quit => self.session.follow_quit(),
                    Follow::Nothing => self.session.no_follow(),
                },
                Step::Flush => self.flush().await?,
                Step::Read(phase) => {
                    let reply = self.read_reply(phase).await?;
                    let now = Instant::now();
                    if phase == Phase::DataDot {
                        self.data_end = Some(self.flushed);
                    }
                    self.timings.push((phase, now - self.patience.since()));
                    self.patience.restart(now);
                    self.session.on_reply(reply)?;
                }
                Step::StartTls => {
                    // Boxed: the handshake future is kilobytes, and kept inline it would
                    // make every connection's task that large, TLS or not.
                    Box::pin(self.upgrade_tls()).await?;
                    self.session.tls_established();
                }
                Step::Ready => return Ok(None),
                Step::TxnDone(outcome) => return Ok(Some(outcome)),
                Step::Closed => return Ok(None),
            }
        }
    }

    async fn flush(&mut self) -> Result<(), ConnError> {
        self.session.outbox().take_into(&mut self.chunks);
        let phase = Phase::Mail;
        let write = async {
            let mut first = 0;
            let mut offset = 0;
            while first < self.chunks.len() {
                let mut slices = [IoSlice::new(&[]); 16];
                let mut n = 0;
                for (i, chunk) in self.chunks[first..].iter().take(16).enumerate() {
                    slices[i] = IoSlice::new(if i == 0 { &chunk[offset..] } else { chunk });
                    n += 1;
                }
                let mut written = self.stream.write_vectored(&slices[..n]).await?;
                if written == 0 {
                    return Err(io::Error::from(io::ErrorKind::WriteZero));
                }
                self.bytes_out += written as u64;
                while written > 0 {
                    let left = self.chunks[first].len() - offset;
                    if written >= left {
                        written -= left;
                        first += 1;
                        offset = 0;
                    } else {
                        offset += written;
                        written = 0;
                    }
                }
            }
            self.stream.flush().await
        };
        let result = self.patience.bound(write, phase).await;
        self.chunks.clear();
        self.flushed = Instant::now();
        self.patience.restart(self.flushed);
        Ok(result?)
    }

    async fn read_reply(&mut self, phase: Phase) -> Result<Reply, ConnError> {
        loop {
            if !self.rbuf.is_empty() {
                match self.decoder.decode(self.rbuf.unread()) {
                    Ok(Decoded::Done(reply, used)) => {
                        self.rbuf.consume(used);
                        return Ok(reply);
                    }
                    Ok(Decoded::NeedMore) => self.rbuf.clear(),
                    Err(error) => return Err(ConnError::Reply { phase, error }),
                }
            }
            self.patience
                .read(&mut self.stream, self.rbuf.room(READ_CHUNK), phase)
                .await?;
        }
    }

    async fn upgrade_tls(&mut self) -> Result<(), ConnError> {
        let Some((config, name)) = self.tls.clone() else {
            return Err(ConnError::Session(SessionError::Protocol {
                phase: Phase::StartTls,
                what: "STARTTLS without a TLS configuration",
            }));
        };
        let started = Instant::now();
        let now = link::upgrade(&mut self.stream, config, &name, self.command_timeout).await?;
        self.timings.push((Phase::TlsHandshake, now - started));
        self.patience.restart(now);
        Ok(())
    }
}
