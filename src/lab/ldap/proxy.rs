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

/// One whole BER element at the start of `buf`: (its tag, header length, total length).
fn element(buf: &[u8]) -> Option<(u8, usize, usize)> {
    let tag = *buf.first()?;
    let first = *buf.get(1)?;
    let (len, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            // Indefinite or absurd lengths never occur in LDAP (RFC 4511 §5.1).
            return None;
        }
        let bytes = buf.get(2..2 + n)?;
        (
            bytes.iter().fold(0usize, |a, b| (a << 8) | *b as usize),
            2 + n,
        )
    };
    Some((tag, header, header + len))
}

/// The message id's bytes and the operation's tag of a whole LDAPMessage.
fn message(msg: &[u8]) -> Option<(Vec<u8>, u8)> {
    let (_, header, _) = element(msg)?;
    let body = msg.get(header..)?;
    let (_, id_header, id_len) = element(body)?;
    let id = body.get(id_header..id_len)?.to_vec();
    Some((id, *body.get(id_len)?))
}

/// Splits whole messages off the front of `buf` (a partial one stays).
fn whole_messages(buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some((_, _, total)) = element(buf) {
        if buf.len() < total {
            break;
        }
        out.push(buf.drain(..total).collect());
    }
    out
}

/// MTA → slapd: searches counted, timed from here, delayed or cut by the faults.
fn requests(
    mut client: TcpStream,
    mut server: TcpStream,
    shared: Arc<Shared>,
    started: Arc<Mutex<HashMap<Vec<u8>, Instant>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        for msg in whole_messages(&mut buf) {
            if let Some((id, SEARCH_REQUEST)) = message(&msg) {
                let t0 = Instant::now();
                shared.first.get_or_init(|| t0);
                if shared.down() {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    let _ = client.shutdown(Shutdown::Both);
                    let _ = server.shutdown(Shutdown::Both);
                    return;
                }
                if let Some(d) = shared.faults.delay {
                    std::thread::sleep(d);
                }
                if let Ok(mut m) = started.lock() {
                    m.insert(id, t0);
                }
                shared.lookups.fetch_add(1, Ordering::Relaxed);
            }
            if server.write_all(&msg).is_err() {
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
        }
    }
    let _ = server.shutdown(Shutdown::Both);
}

/// slapd → MTA: each SearchResultDone ends its search's time.
fn replies(
    mut server: TcpStream,
    mut client: TcpStream,
    shared: Arc<Shared>,
    started: Arc<Mutex<HashMap<Vec<u8>, Instant>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match server.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        for msg in whole_messages(&mut buf) {
            if let Some((id, SEARCH_DONE)) = message(&msg) {
                let t0 = started.lock().ok().and_then(|mut m| m.remove(&id));
                if let (Some(t0), Ok(mut h)) = (t0, shared.latency.lock()) {
                    let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
                }
            }
            if client.write_all(&msg).is_err() {
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
        }
    }
    let _ = client.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SearchRequest with message id 2 (as ldapsearch sends it, trimmed to the op tag)
    // and a SearchResultDone for it.
    const SEARCH: &[u8] = &[0x30, 0x07, 0x02, 0x01, 0x02, 0x63, 0x02, 0x04, 0x00];
    const DONE: &[u8] = &[
        0x30, 0x0c, 0x02, 0x01, 0x02, 0x65, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
    ];

    #[test]
    fn messages_are_split_whole_and_read_for_their_id_and_operation() {
        let mut buf = [SEARCH, DONE, &DONE[..5]].concat();
        let msgs = whole_messages(&mut buf);
        assert_eq!(msgs, vec![SEARCH.to_vec(), DONE.to_vec()]);
        assert_eq!(buf, DONE[..5].to_vec());
        assert_eq!(message(SEARCH), Some((vec![2], SEARCH_REQUEST)));
        assert_eq!(message(DONE), Some((vec![2], SEARCH_DONE)));
    }

    #[test]
    fn a_long_form_length_is_read() {
        let mut long = vec![0x30, 0x82, 0x01, 0x00];
        long.extend(std::iter::repeat_n(0u8, 256));
        assert_eq!(element(&long), Some((0x30, 4, 260)));
        assert_eq!(element(&long[..3]), None);
    }
}
