//! A TCP proxy between a lab MTA and its slapd: it reads the LDAP messages going by (BER,
//! each a SEQUENCE with its length up front, RFC 4511 §4.1.1) to count the searches the
//! MTA makes and time each to its SearchResultDone, and it injects `--ldap-fault`s: a
//! delay before each search is passed on, or a window during which the directory is down
//! (connections are closed as they arrive and at their next search), as when slapd dies.
//! Blocking threads: the lab is started and read outside the async runtime, and the MTA
//! holds a handful of connections.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use mailbench_wire::ldap::frame::{self, Next};

/// SearchRequest, `[APPLICATION 3]` constructed.
const SEARCH_REQUEST: u8 = 0x63;
/// SearchResultDone, `[APPLICATION 5]` constructed.
const SEARCH_DONE: u8 = 0x65;

/// The faults the directory takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Held before each search is passed on to slapd.
    pub delay: Option<Duration>,
    /// Down for `.0` from `.1` after the first search (the load's start).
    pub down: Option<(Duration, Duration)>,
}

/// What the proxy counted so far.
#[derive(Debug, Clone)]
pub struct Counts {
    /// Searches passed on to slapd.
    pub lookups: u64,
    /// Searches that met the directory down (the connection was closed instead).
    pub failed: u64,
    /// Search → SearchResultDone, µs, as the MTA waits for it (delays included).
    pub latency: Histogram<u64>,
}

#[derive(Debug)]
struct Shared {
    slapd: SocketAddr,
    faults: Faults,
    first: OnceLock<Instant>,
    lookups: AtomicU64,
    failed: AtomicU64,
    latency: Mutex<Histogram<u64>>,
    stop: AtomicBool,
}

impl Shared {
    fn down(&self) -> bool {
        let (Some((length, from)), Some(first)) = (self.faults.down, self.first.get()) else {
            return false;
        };
        let t = first.elapsed();
        t >= from && t < from + length
    }
}

/// The running proxy; stops accepting on drop (its connections end with slapd's).
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free loopback port, passing connections on to `slapd`.
    pub fn start(slapd: SocketAddr, faults: Faults) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            slapd,
            faults,
            first: OnceLock::new(),
            lookups: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            latency: Mutex::new(crate::stats::recorder::new_histogram()),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::spawn(move || accept(listener, s));
        Ok(Proxy { addr, shared })
    }

    /// Where the MTA connects.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        Counts {
            lookups: self.shared.lookups.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
            latency: self
                .shared
                .latency
                .lock()
                .map(|h| h.clone())
                .unwrap_or_else(|_| crate::stats::recorder::new_histogram()),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(client) = conn else { continue };
        if shared.down() {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(server) = TcpStream::connect(shared.slapd) else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let started: Arc<Mutex<HashMap<Vec<u8>, Instant>>> = Arc::default();
        let (c2, s2, sh2, st2) = (
            client.try_clone(),
            server.try_clone(),
            shared.clone(),
            started.clone(),
        );
        let (Ok(c2), Ok(s2)) = (c2, s2) else { continue };
        let sh = shared.clone();
        std::thread::spawn(move || requests(client, server, sh, started));
        std::thread::spawn(move || replies(s2, c2, sh2, st2));
    }
}

/// Moves the whole messages at the front of `buf` to `out` (`handle` sees each first and
/// may refuse to pass it on); once the stream is opaque, everything goes through as it
/// comes. `Err` when `out` is gone, or `handle` stopped the connection.
fn pass(
    buf: &mut Vec<u8>,
    opaque: &mut bool,
    out: &mut TcpStream,
    mut handle: impl FnMut(&[u8]) -> bool,
) -> Result<(), ()> {
    while !*opaque {
        match frame::next(buf) {
            Next::Message(msg) => {
                if !handle(&msg) {
                    return Err(());
                }
                out.write_all(&msg).map_err(|_| ())?;
            }
            Next::Need => return Ok(()),
            Next::Opaque => *opaque = true,
        }
    }
    out.write_all(buf).map_err(|_| ())?;
    buf.clear();
    Ok(())
}

/// Copies `from` to `to` message by message, `handle` seeing each first (false closes
/// both ends); then closes `to`'s side.
fn pump(mut from: TcpStream, mut to: TcpStream, mut handle: impl FnMut(&[u8]) -> bool) {
    let mut buf = Vec::new();
    let mut opaque = false;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if pass(&mut buf, &mut opaque, &mut to, &mut handle).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

/// MTA → slapd: searches counted, timed from here, delayed or cut by the faults.
fn requests(
    client: TcpStream,
    server: TcpStream,
    shared: Arc<Shared>,
    started: Arc<Mutex<HashMap<Vec<u8>, Instant>>>,
) {
    pump(client, server, |msg| {
        if let Some((id, SEARCH_REQUEST)) = frame::operation(msg) {
            let t0 = Instant::now();
            shared.first.get_or_init(|| t0);
            if shared.down() {
                shared.failed.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            if let Some(d) = shared.faults.delay {
                std::thread::sleep(d);
            }
            if let Ok(mut m) = started.lock() {
                m.insert(id, t0);
            }
            shared.lookups.fetch_add(1, Ordering::Relaxed);
        }
        true
    });
}

/// slapd → MTA: each SearchResultDone ends its search's time.
fn replies(
    server: TcpStream,
    client: TcpStream,
    shared: Arc<Shared>,
    started: Arc<Mutex<HashMap<Vec<u8>, Instant>>>,
) {
    pump(server, client, |msg| {
        if let Some((id, SEARCH_DONE)) = frame::operation(msg) {
            let t0 = started.lock().ok().and_then(|mut m| m.remove(&id));
            if let (Some(t0), Ok(mut h)) = (t0, shared.latency.lock()) {
                let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
            }
        }
        true
    });
}
