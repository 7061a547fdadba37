//! The sockets: on each address, UDP served by one or more threads taking queries in
//! batches ([`super::udp`]; a delayed answer waits in its own task), and a TCP listener
//! whose connections read length-prefixed queries with an idle timeout. Everything a
//! query costs is bounded: [`udp::BATCH`] × [`udp::SLOT`] bytes of buffer per UDP thread,
//! a TCP connection's no larger than the largest message it sent, at most [`MAX_TCP`]
//! connections, at most [`MAX_DELAYED`] delayed answers waiting (more are answered at
//! once and counted as `shed`).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::task::TaskTracker;

use super::answer::{Answer, Outcome, Responder, Transport};
use super::tally::Tally;
use super::udp;
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
    /// Delayed answers waiting.
    pub(super) delayed: AtomicUsize,
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

    /// Whether no query log is kept (then UDP may answer from its reply cache).
    pub(super) fn log_off(&self) -> bool {
        self.log.is_none()
    }

    /// Counts a delayed answer sent at once because too many were waiting.
    pub(super) fn count_shed(&self) {
        self.tally.lock().unwrap_or_else(|p| p.into_inner()).shed += 1;
    }

    /// How long after the rules' time zero `t` is.
    pub(super) fn rule_time(&self, t: Instant) -> Duration {
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

    /// Counts a batch of packets that arrived at `t0` and were answered just now, into
    /// latency shard `shard`: one lock of each kind for the batch, not one per packet.
    pub(super) fn record<'a>(
        &self,
        shard: usize,
        transport: Transport,
        t0: Instant,
        batch: impl IntoIterator<Item = (&'a Answer, IpAddr)>,
    ) {
        let took = t0.elapsed();
        let mut rec = self.shards.get(shard);
        let mut tally = self.tally.lock().unwrap_or_else(|p| p.into_inner());
        let mut log = self
            .log
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        for (a, from) in batch {
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
            tally.count(a, transport, from);
            if let Some(l) = &mut log {
                write_log(
                    &mut **l,
                    a,
                    transport,
                    from,
                    t0.duration_since(self.start),
                    took,
                );
            }
        }
    }
}

/// One line of the query log.
fn write_log(
    l: &mut impl Write,
    a: &Answer,
    transport: Transport,
    from: IpAddr,
    at: Duration,
    took: Duration,
) {
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
    let _ = writeln!(
        l,
        "{:.6} {from} {} {name} {qtype} {what} {:.3}ms",
        at.as_secs_f64(),
        match transport {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        },
        took.as_secs_f64() * 1e3
    );
}

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
