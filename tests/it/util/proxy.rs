//! A byte-counting TCP proxy: the reference for the store's network bytes, which
//! mailbench counts at its own clients. It forwards each connection to one upstream and
//! counts what it read from the client (bytes into the server) and what it wrote to the
//! client (bytes out of the server).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counts of all the proxies made from one [`Counts`], summed.
#[derive(Default)]
pub struct Counts {
    into_server: AtomicU64,
    out_of_server: AtomicU64,
    open: AtomicU64,
    connections: AtomicU64,
}

impl Counts {
    /// Connections the proxies forwarded.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// (client to server, server to client) bytes, once every connection has closed.
    pub fn settled(&self) -> (u64, u64) {
        let closed = super::wait_until(Duration::from_secs(10), || {
            self.open.load(Ordering::SeqCst) == 0
        });
        assert!(closed, "the proxied connections closed within 10 s");
        (
            self.into_server.load(Ordering::SeqCst),
            self.out_of_server.load(Ordering::SeqCst),
        )
    }
}

/// Listens on a free loopback port and forwards to `upstream`, counting into `counts`;
/// returns the address to connect to. The listener lives as long as the test process.
pub fn start(upstream: SocketAddr, counts: Arc<Counts>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("proxy address");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            counts.open.fetch_add(2, Ordering::SeqCst);
            counts.connections.fetch_add(1, Ordering::SeqCst);
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let (a, b) = (counts.clone(), counts.clone());
            std::thread::spawn(move || pump(client, server, &a, |c| &c.into_server));
            std::thread::spawn(move || pump(s2, c2, &b, |c| &c.out_of_server));
        }
    });
    addr
}

/// Copies `from` to `to` until `from` ends, adding what reached `to` to `which` counter.
fn pump(mut from: TcpStream, mut to: TcpStream, counts: &Counts, which: fn(&Counts) -> &AtomicU64) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        which(counts).fetch_add(n as u64, Ordering::SeqCst);
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    counts.open.fetch_sub(1, Ordering::SeqCst);
}
