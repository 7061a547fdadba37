//! Listening sockets for every server part (the sink now; DNS and the mail-store labs'
//! peers later): what to listen on, binding with errors that name the fix, and accepting
//! into the shared [`Stream`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use tokio::net::{TcpListener, UnixListener};

use super::stream::Stream;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// TCP.
    Tcp(SocketAddr),
    /// A unix socket path (replaced if it exists).
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A bound listener.
pub enum Listener {
    /// Bound on an address and port.
    Tcp(TcpListener),
    /// Bound on a Unix socket path (an LMTP socket, as MTAs deliver to one).
    Unix(UnixListener),
}

/// Binds every listener; the error names the address and the likely fix.
pub async fn bind(listen: &[Listen]) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for l in listen {
        match l {
            Listen::Tcp(addr) => {
                let sock = if addr.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()
                } else {
                    tokio::net::TcpSocket::new_v6()
                }
                .map_err(|e| format!("cannot create a socket for {addr}: {e}"))?;
                let _ = sock.set_reuseaddr(true);
                sock.bind(*addr).map_err(|e| {
                    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                        "; ports below 1024 need root, try --listen 127.0.0.1:2525"
                    } else {
                        "; is another server on that port?"
                    };
                    format!("cannot listen on {addr}: {e}{hint}")
                })?;
                out.push(Listener::Tcp(
                    sock.listen(4096)
                        .map_err(|e| format!("cannot listen on {addr}: {e}"))?,
                ));
            }
            Listen::Unix(p) => {
                let _ = std::fs::remove_file(p);
                out.push(Listener::Unix(UnixListener::bind(p).map_err(|e| {
                    format!("cannot listen on unix:{}: {e}", p.display())
                })?));
            }
        }
    }
    Ok(out)
}

/// The local address of a TCP listener (for tests that bind port 0).
pub fn local_addrs(listeners: &[Listener]) -> Vec<String> {
    listeners
        .iter()
        .map(|l| match l {
            Listener::Tcp(t) => t.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Listener::Unix(u) => u
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_default(),
        })
        .collect()
}

/// Accepts one connection; the peer's IP for TCP (per-client limits and greylisting).
pub async fn accept(l: &Listener) -> std::io::Result<(Stream, Option<IpAddr>)> {
    match l {
        Listener::Tcp(t) => {
            let (s, peer) = t.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Stream::Tcp(s), Some(peer.ip())))
        }
        Listener::Unix(u) => {
            let (s, _) = u.accept().await?;
            Ok((Stream::Unix(s), None))
        }
    }
}
