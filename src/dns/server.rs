//! The sockets: one UDP loop per address (answers inline; a delayed answer waits in its
//! own task), and a TCP listener per address whose connections read length-prefixed
//! queries with an idle timeout. Everything a query costs is bounded: one 64 KiB buffer
//! per UDP loop, a TCP connection's no larger than the largest message it sent, at most [`MAX_TCP`] connections, at most [`MAX_DELAYED`]
//! delayed answers waiting (more are answered at once and counted as `shed`).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;
use tokio_util::task::TaskTracker;

use super::answer::{Answer, Outcome, Responder, Transport};
use super::cache::AnswerCache;
use super::tally::Tally;
use crate::stats::{Metric, Recorder, Shards};

/// Most TCP connections served at once; more are closed on arrival.
pub const MAX_TCP: usize = 1024;
/// Most delayed answers waiting at once.
pub const MAX_DELAYED: usize = 65_536;
/// A TCP connection that sends nothing for this long is closed.
pub const TCP_IDLE: Duration = Duration::from_secs(10);

/// What every socket of one server shares.
pub struct Shared {
    /// Zones and rules.
    pub responder: Arc<Responder>,
    /// Latencies and the shared counters (a query is a unit of work).
    pub shards: Shards,
    /// The DNS-specific counts.
    tally: Mutex<Tally>,
    /// Time zero of the series.
    pub start: Instant,
    /// Where the rules' windows (`until=`) begin, µs after `start`: a relay moves it to
    /// each run's start.
    rules_from_us: AtomicU64,
    /// One line per query, when asked (`--query-log`).
    log: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
    tcp_open: AtomicUsize,
    delayed: AtomicUsize,
}

impl Shared {
    /// A server's shared state; `log` is the query log's file, if any.
    pub fn new(responder: Arc<Responder>, start: Instant, log: Option<std::fs::File>) -> Self {
        Shared {
            responder,
            shards: Shards::new(4),
            tally: Mutex::new(Tally::default()),
            start,
            rules_from_us: AtomicU64::new(0),
            log: log.map(|f| Mutex::new(std::io::BufWriter::new(f))),
            tcp_open: AtomicUsize::new(0),
            delayed: AtomicUsize::new(0),
        }
    }

    /// The counts so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How long after the rules' time zero `t` is.
    fn rule_time(&self, t: Instant) -> Duration {
        let from = Duration::from_micros(self.rules_from_us.load(Ordering::Relaxed));
        t.duration_since(self.start).saturating_sub(from)
    }

    /// Takes the counts and the latencies recorded so far, starting again from zero, and
    /// starts the rules' windows again from now (a relay keeps each of its runs apart).
    pub fn take(&self) -> (Tally, Recorder) {
        let now = self.start.elapsed().as_micros() as u64;
        self.rules_from_us.store(now, Ordering::Relaxed);
        let t = std::mem::take(&mut *self.tally.lock().unwrap_or_else(|p| p.into_inner()));
        let mut rec = Recorder::new();
        self.shards.drain_into(&mut rec);
        (t, rec)
    }

    /// Writes out the query log's buffer.
    pub fn flush_log(&self) {
        if let Some(l) = &self.log {
            let _ = l.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }

    /// Counts one packet, `t0` being when it arrived.
    fn record(&self, a: &Answer, transport: Transport, from: IpAddr, t0: Instant) {
        let took = t0.elapsed();
        {
            let mut rec = self.shards.get(0);
            rec.counters.sent += 1;
            match a.outcome {
                Outcome::Answered => rec.counters.accepted += 1,
                Outcome::Dropped => rec.counters.aborted += 1,
                Outcome::Ignored => rec.counters.errors += 1,
            }
            if let (Some(c), Outcome::Answered) = (a.class, a.outcome) {
                rec.record(Metric::Step(c.index() as u8), took);
                rec.record(Metric::Total, took);
            }
        }
        self.tally
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .count(a, transport, from);
        if let Some(l) = &self.log {
            let (name, qtype) = a
                .question
                .as_ref()
                .map(|(n, t)| (n.as_str(), t.to_string()))
                .unwrap_or(("-", "-".into()));
            let what = match a.outcome {
                Outcome::Answered => {
                    format!("rcode={}{}", a.rcode, if a.truncated { " tc" } else { "" })
                }
                Outcome::Dropped => "dropped".into(),
                Outcome::Ignored => "ignored".into(),
            };
            let mut l = l.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(
                l,
                "{:.6} {from} {} {name} {qtype} {what} {:.3}ms",
                t0.duration_since(self.start).as_secs_f64(),
                match transport {
                    Transport::Udp => "udp",
                    Transport::Tcp => "tcp",
                },
                took.as_secs_f64() * 1e3
            );
        }
    }
}

/// The bound sockets of a server, UDP and TCP on each address.
pub struct Sockets {
    udp: Vec<UdpSocket>,
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
async fn bind_pair(a: SocketAddr) -> Result<(UdpSocket, TcpListener), String> {
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

/// A UDP socket bound to `a` with a large receive buffer.
fn udp_socket(a: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(a), Type::DGRAM, Some(Protocol::UDP))?;
    if a.is_ipv6() {
        s.set_only_v6(true)?;
    }
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    s.set_nonblocking(true)?;
    s.bind(&a.into())?;
    UdpSocket::from_std(s.into())
}

/// A running server; dropping it stops every socket and connection.
pub struct Running {
    tasks: JoinSet<()>,
    conns: TaskTracker,
    /// What the sockets share.
    pub shared: Arc<Shared>,
}

impl Running {
    /// Starts serving on `sockets`.
    pub fn start(sockets: Sockets, shared: Arc<Shared>) -> Running {
        let mut tasks = JoinSet::new();
        let conns = TaskTracker::new();
        for u in sockets.udp {
            tasks.spawn(udp_loop(Arc::new(u), shared.clone()));
        }
        for t in sockets.tcp {
            tasks.spawn(tcp_accept(t, shared.clone(), conns.clone()));
        }
        Running {
            tasks,
            conns,
            shared,
        }
    }

    /// Stops the sockets and the open connections.
    pub async fn stop(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.conns.close();
        let _ = tokio::time::timeout(Duration::from_millis(200), self.conns.wait()).await;
        self.shared.flush_log();
    }
}

async fn udp_loop(sock: Arc<UdpSocket>, sh: Arc<Shared>) {
    let mut buf = vec![0u8; 65_535];
    let mut rng = fastrand::Rng::new();
    // The query log wants every question's name: it goes the slow way.
    let mut cache = sh.log.is_none().then(AnswerCache::default);
    loop {
        // A failed receive is an ICMP error of an earlier send (the client went away).
        let Ok((n, from)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let t0 = Instant::now();
        let (packet, at) = (&buf[..n], sh.rule_time(t0));
        let mut a = match &mut cache {
            Some(c) => c.answer(&sh.responder, packet, at, &mut rng),
            None => sh.responder.respond(packet, Transport::Udp, at, &mut rng),
        };
        if !a.delay.is_zero() && sh.delayed.fetch_add(1, Ordering::Relaxed) >= MAX_DELAYED {
            sh.delayed.fetch_sub(1, Ordering::Relaxed);
            a.delay = Duration::ZERO;
            sh.tally.lock().unwrap_or_else(|p| p.into_inner()).shed += 1;
        }
        if a.delay.is_zero() {
            if let Some(r) = &a.reply {
                let _ = sock.send_to(r, from).await;
            }
            sh.record(&a, Transport::Udp, from.ip(), t0);
            continue;
        }
        let (sock, sh) = (sock.clone(), sh.clone());
        tokio::spawn(async move {
            tokio::time::sleep(a.delay).await;
            if let Some(r) = &a.reply {
                let _ = sock.send_to(r, from).await;
            }
            sh.delayed.fetch_sub(1, Ordering::Relaxed);
            sh.record(&a, Transport::Udp, from.ip(), t0);
        });
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
        sh.record(&a, Transport::Tcp, from, t0);
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
