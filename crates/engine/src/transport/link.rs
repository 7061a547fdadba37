//! What every client connection shares below its protocol: how the link fails (connect,
//! timeout, lost connection, TLS) and the timed connect and TLS upgrade that produce
//! those failures, each tagged with the protocol's phase (reads and writes wait within
//! the connection's [`super::patience::Patience`]).

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use tokio::time::timeout;

use super::connect::{ConnectOptions, connect};
use super::stream::Stream;
use super::target::Target;
use super::tls;
use crate::error::ErrorClass;

/// A protocol's phases as the link needs them: where connecting and the TLS handshake are
/// charged.
pub trait LinkPhase: Copy + fmt::Debug + fmt::Display {
    /// TCP (or unix socket) set-up.
    const CONNECT: Self;
    /// The TLS handshake.
    const TLS_HANDSHAKE: Self;
}

/// How a connection failed below its protocol.
#[derive(Debug, thiserror::Error)]
pub enum LinkError<P: LinkPhase> {
    /// The connection could not be opened.
    #[error("cannot connect to {target}: {source}")]
    Connect {
        /// Where to.
        target: String,
        /// The system's reason (refused, unreachable), for the error table's sample.
        source: io::Error,
    },
    /// A response (or the connection) did not come in time.
    #[error("timed out after {after:?} waiting at {phase}")]
    Timeout {
        /// The step that waited, charged with the timeout.
        phase: P,
        /// The limit that passed.
        after: Duration,
    },
    /// Reading or writing failed, or the server closed the connection.
    #[error("connection lost at {phase}: {source}")]
    Io {
        /// The step at which the connection broke, charged with the failure.
        phase: P,
        /// The system's reason, for the error table's sample.
        source: io::Error,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(io::Error),
}

impl<P: LinkPhase> LinkError<P> {
    /// The statistics class of this failure.
    pub fn class(&self) -> ErrorClass {
        match self {
            LinkError::Connect { source, .. } if source.kind() == io::ErrorKind::TimedOut => {
                ErrorClass::Timeout
            }
            LinkError::Connect { .. } => ErrorClass::Refused,
            LinkError::Timeout { .. } => ErrorClass::Timeout,
            LinkError::Io { .. } => ErrorClass::Disconnect,
            LinkError::Tls(_) => ErrorClass::Tls,
        }
    }

    /// The phase where it happened.
    pub fn phase(&self) -> P {
        match self {
            LinkError::Connect { .. } => P::CONNECT,
            LinkError::Timeout { phase, .. } | LinkError::Io { phase, .. } => *phase,
            LinkError::Tls(_) => P::TLS_HANDSHAKE,
        }
    }

    /// True when the connection was made before this failed (a TLS handshake that
    /// failed was a connection too: the server answered).
    pub fn connected(&self) -> bool {
        !matches!(self, LinkError::Connect { .. })
    }

    /// For a failure to connect at all, the one line that says `what` (e.g. "target",
    /// "POP3 server") is unreachable.
    pub fn unreachable(&self, what: &str) -> Option<String> {
        let LinkError::Connect { target, source } = self else {
            return None;
        };
        Some(if source.kind() == io::ErrorKind::TimedOut {
            // Nothing drops a SYN on loopback but a full accept queue: a server that
            // stopped calling accept, or whose backlog is too small for the load.
            let why = match target.parse::<std::net::SocketAddr>() {
                Ok(a) if a.ip().is_loopback() => {
                    "its accept queue is full (a server that stopped accepting, or a listen backlog too small); check the server is accepting"
                }
                _ => {
                    "its accept queue is full or a firewall drops the connection; check the server is accepting, then the address and firewall"
                }
            };
            format!("{what} {target} did not accept a connection in time: {why}")
        } else {
            format!(
                "{what} {target} is not reachable: {source}; is the server running and listening there?"
            )
        })
    }
}

/// Connects to `target` (TCP or unix socket, no TLS yet).
pub async fn open<P: LinkPhase>(
    target: &Target,
    opts: &ConnectOptions,
) -> Result<Stream, LinkError<P>> {
    connect(target, opts)
        .await
        .map_err(|source| LinkError::Connect {
            target: target.to_string(),
            source,
        })
}

/// Replaces `stream` by TLS over it (client side, verifying `name`) within `limit`; returns
/// when the handshake ended.
pub async fn upgrade<P: LinkPhase>(
    stream: &mut Stream,
    config: std::sync::Arc<rustls::ClientConfig>,
    name: &str,
    limit: Duration,
) -> Result<Instant, LinkError<P>> {
    let plain = std::mem::replace(stream, Stream::Gone);
    match timeout(limit, tls::connect(plain, config, name)).await {
        Ok(Ok(s)) => {
            *stream = s;
            Ok(Instant::now())
        }
        Ok(Err(e)) => Err(LinkError::Tls(e)),
        Err(_) => Err(LinkError::Timeout {
            phase: P::TLS_HANDSHAKE,
            after: limit,
        }),
    }
}
