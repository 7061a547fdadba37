//! Opening client connections for every protocol: TCP (from a chosen source address, with
//! Nagle off so pipelined commands leave at once) or a unix socket, within a time limit.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpSocket, UnixStream};
use tokio::time::timeout;

use super::count::NetTally;
use super::stream::Stream;
use super::target::Target;

/// How to open connections; shared by all connections of a run.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Limit for the TCP handshake.
    pub connect_timeout: Duration,
    /// Limit for each reply (and each write).
    pub command_timeout: Duration,
    /// Local address to bind before connecting (spreads connections over source IPs).
    pub source_ip: Option<IpAddr>,
    /// TLS client configuration, when this connection uses TLS.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// TLS from the first byte (SMTPS, POP3S, IMAPS) instead of a STARTTLS-like upgrade.
    pub implicit_tls: bool,
    /// Where TCP connections' bytes are counted, when the run reports them (a store's
    /// network use, seen from the client).
    pub count: Option<NetTally>,
}

/// Opens a plain connection to `target`; a connection not made within the connect
/// timeout fails with `TimedOut`.
pub async fn connect(target: &Target, opts: &ConnectOptions) -> io::Result<Stream> {
    let attempt = async {
        match target {
            Target::Tcp { addr, .. } => {
                let socket = if addr.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                if let Some(ip) = opts.source_ip {
                    socket.bind(SocketAddr::new(ip, 0))?;
                }
                let stream = socket.connect(*addr).await?;
                // Pipelined commands must leave at once, not wait for Nagle.
                stream.set_nodelay(true)?;
                Ok(match &opts.count {
                    Some(tally) => Stream::Counted(tally.count(stream)),
                    None => Stream::Tcp(stream),
                })
            }
            Target::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path).await?)),
        }
    };
    match timeout(opts.connect_timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
    }
}
