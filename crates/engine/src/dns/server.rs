//! The sockets: on each address, UDP served by one or more threads taking queries in
//! batches ([`super::udp`]; a delayed answer waits in its own task), and a TCP listener
//! whose connections read length-prefixed queries with an idle timeout. Everything a
//! query costs is bounded: [`udp::BATCH`] × [`udp::SLOT`] bytes of buffer per UDP thread,
//! a TCP connection's no larger than the largest message it sent, at most [`MAX_TCP`]
//! connections, at most [`MAX_DELAYED`](super::shared::MAX_DELAYED) delayed answers waiting (more are answered at
//! once and counted as `shed`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::task::TaskTracker;

use super::answer::{Outcome, Transport};
use super::shared::Shared;
use super::udp;

/// Most TCP connections served at once; more are closed on arrival.
pub const MAX_TCP: usize = 1024;
/// A TCP connection that sends nothing for this long is closed.
pub const TCP_IDLE: Duration = Duration::from_secs(10);

/// The bound sockets of a server, UDP and TCP on each address.
pub struct Sockets {
    udp: Vec<std::net::UdpSocket>,
    tcp: Vec<TcpListener>,
}

impl Sockets {
    /// Binds UDP and TCP on each address (port 0: one free port, the same for both).
    pub async fn bind(addrs: &[SocketAddr]) -> Result<Sockets, String> {
        let mut s = Sockets {
            udp: Vec::new(),
            tcp: Vec::new(),
        };
        for a in addrs {
            let (udp, tcp) = bind_pair(*a).await?;
            s.udp.push(udp);
            s.tcp.push(tcp);
        }
        Ok(s)
    }

    /// The UDP addresses, as bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.udp
            .iter()
            .filter_map(|u| u.local_addr().ok())
            .collect()
    }
}

/// Free UDP ports tried for port 0 before giving up: the TCP side of a port the kernel
/// gave UDP may be taken (an outgoing connection's local port, in the same range).
const PAIR_TRIES: usize = 32;

/// UDP and TCP on `a`, on the same port; for port 0, on a port free for both.
async fn bind_pair(a: SocketAddr) -> Result<(std::net::UdpSocket, TcpListener), String> {
    let mut tries = if a.port() == 0 { PAIR_TRIES } else { 1 };
    loop {
        let udp = udp_socket(a).map_err(|e| format!("cannot listen on udp {a}: {e}"))?;
        let port = udp.local_addr().map_err(|e| e.to_string())?.port();
        let at = SocketAddr::new(a.ip(), port);
        match TcpListener::bind(at).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries > 1 => tries -= 1,
            Err(e) => return Err(format!("cannot listen on tcp {at}: {e}")),
        }
    }
}

/// Receive buffer asked for each UDP socket (the kernel caps it at `net.core.rmem_max`):
/// the default ~200 KiB overflows in a burst of a few thousand queries.
const UDP_BUFFER: usize = 4 << 20;

/// A UDP socket bound to `a` with a large receive buffer, ready for [`udp::serve`].
fn udp_socket(a: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(a), Type::DGRAM, Some(Protocol::UDP))?;
    if a.is_ipv6() {
        s.set_only_v6(true)?;
    }
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    s.bind(&a.into())?;
    let s = std::net::UdpSocket::from(s);
    udp::prepare(&s)?;
    Ok(s)
}

/// A running server; dropping it stops every socket and connection (the UDP threads
/// within [`udp::WAKE`]).
pub struct Running {
    tasks: JoinSet<()>,
    conns: TaskTracker,
    /// Tells the UDP threads to stop.
    stop: Arc<AtomicBool>,
    udp: Vec<std::thread::JoinHandle<()>>,
    /// What the sockets share.
    pub shared: Arc<Shared>,
}

impl Running {
    /// Starts serving on `sockets`, with `threads` threads on each UDP socket (they share
    /// it: the kernel gives each query to one of them, so no client's queries wait behind
    /// another's thread); TCP runs on the async runtime.
    pub fn start(sockets: Sockets, shared: Arc<Shared>, threads: usize) -> Result<Running, String> {
        let mut run = Running {
            tasks: JoinSet::new(),
            conns: TaskTracker::new(),
            stop: Arc::new(AtomicBool::new(false)),
            udp: Vec::new(),
            shared,
        };
        let rt = tokio::runtime::Handle::current();
        for u in sockets.udp {
            let u = Arc::new(u);
            for _ in 0..threads.max(1) {
                let (u, sh, stop, rt) =
                    (u.clone(), run.shared.clone(), run.stop.clone(), rt.clone());
                // Each thread records into its own latency shard (TCP uses shard 0).
                let shard = run.udp.len() + 1;
                let t = std::thread::Builder::new()
                    .name(format!("dns-udp-{shard}"))
                    .spawn(move || udp::serve(u, sh, stop, shard, rt))
                    .map_err(|e| format!("cannot start a UDP thread: {e}"))?;
                run.udp.push(t);
            }
        }
        for t in sockets.tcp {
            run.tasks
                .spawn(tcp_accept(t, run.shared.clone(), run.conns.clone()));
        }
        Ok(run)
    }

    /// Stops the sockets and the open connections; every query answered is counted when
    /// this returns.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(&mut self.udp);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.conns.close();
        let _ = tokio::time::timeout(Duration::from_millis(200), self.conns.wait()).await;
        self.shared.flush_log();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn tcp_accept(l: TcpListener, sh: Arc<Shared>, conns: TaskTracker) {
    loop {
        let Ok((stream, from)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if sh.tcp_open.fetch_add(1, Ordering::Relaxed) >= MAX_TCP {
            sh.tcp_open.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let sh = sh.clone();
        conns.spawn(async move {
            let _ = tcp_conn(stream, from.ip(), &sh).await;
            sh.tcp_open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Serves one TCP connection until it closes, idles, or sends something that is no query.
/// Its buffer grows to the largest message it was sent (64 KiB at most): an idle
/// connection costs no buffer at all.
async fn tcp_conn(mut s: TcpStream, from: IpAddr, sh: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut rng = fastrand::Rng::new();
    let idle = |e| std::io::Error::new(std::io::ErrorKind::TimedOut, e);
    loop {
        let mut len = [0u8; 2];
        tokio::time::timeout(TCP_IDLE, s.read_exact(&mut len))
            .await
            .map_err(idle)??;
        let n = usize::from(u16::from_be_bytes(len));
        if buf.len() < n {
            buf.resize(n, 0);
        }
        tokio::time::timeout(TCP_IDLE, s.read_exact(&mut buf[..n]))
            .await
            .map_err(idle)??;
        let t0 = Instant::now();
        let a = sh
            .responder
            .respond(&buf[..n], Transport::Tcp, sh.rule_time(t0), &mut rng);
        if !a.delay.is_zero() {
            tokio::time::sleep(a.delay).await;
        }
        if let Some(r) = &a.reply {
            let mut out = Vec::with_capacity(r.len() + 2);
            out.extend_from_slice(&(r.len() as u16).to_be_bytes());
            out.extend_from_slice(r);
            s.write_all(&out).await?;
        }
        sh.record(0, Transport::Tcp, t0, [(&a, from)]);
        if a.outcome == Outcome::Ignored {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn port_zero_gives_udp_and_tcp_one_port_and_a_taken_port_is_named() {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
        for _ in 0..20 {
            let (udp, tcp) = bind_pair(any).await.expect("a free pair");
            let (u, t) = (
                udp.local_addr().expect("udp").port(),
                tcp.local_addr().expect("tcp").port(),
            );
            assert_eq!(u, t, "UDP and TCP on one port");
        }
        // A port whose TCP side is taken: named, not retried elsewhere.
        let taken = std::net::TcpListener::bind(any).expect("bind");
        let at = taken.local_addr().expect("addr");
        let err = bind_pair(at).await.err().unwrap_or_default();
        assert!(
            err.starts_with(&format!("cannot listen on tcp {at}:")),
            "expected the taken port named, got {err:?}"
        );
    }
}
