//! The cheapest POP3 client this design can be: the same sessions as `mailbench mailbox
//! pop3` (greeting, CAPA, USER, PASS, STAT, then every RETR and QUIT in one write) on the
//! same one-thread tokio runtime, but with responses only counted — no parsing beyond the
//! message count, no timing, no statistics. The POP3 benchmark runs it beside mailbench:
//! its CPU per session is what the kernel and the runtime cost.
//!
//! `pop3_floor HOST:PORT CONNECTIONS SESSIONS USERS_FILE` prints the messages retrieved.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection's read side: bytes not yet consumed.
struct Reader {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    async fn fill(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// The next status line, without its CRLF.
    async fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(p) = memmem::find(&self.buf, b"\r\n") {
                let line = self.buf[..p].to_vec();
                self.buf.drain(..p + 2);
                return line;
            }
            self.fill().await;
        }
    }

    /// Skips a multi-line response: status line through the ".\r\n" line.
    async fn multiline(&mut self) {
        let mut from = 0;
        loop {
            if self.buf.starts_with(b"+OK") {
                if let Some(p) = memmem::find(&self.buf[from..], b"\r\n.\r\n") {
                    self.buf.drain(..from + p + 5);
                    return;
                }
                from = self.buf.len().saturating_sub(4);
            }
            self.fill().await;
        }
    }
}

/// One session as the user `user`/`pass`; returns the messages retrieved.
async fn session(addr: &str, user: &str, pass: &str) -> usize {
    let s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut r = Reader {
        s,
        buf: Vec::with_capacity(16384),
    };
    r.line().await;
    r.s.write_all(b"CAPA\r\n").await.expect("write");
    r.multiline().await;
    r.s.write_all(format!("USER {user}\r\n").as_bytes())
        .await
        .expect("write");
    r.line().await;
    r.s.write_all(format!("PASS {pass}\r\n").as_bytes())
        .await
        .expect("write");
    r.line().await;
    r.s.write_all(b"STAT\r\n").await.expect("write");
    let stat = r.line().await;
    let count: usize = std::str::from_utf8(&stat)
        .ok()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("STAT count");
    let mut w = Vec::with_capacity(count * 10 + 6);
    for i in 1..=count {
        w.extend_from_slice(format!("RETR {i}\r\n").as_bytes());
    }
    w.extend_from_slice(b"QUIT\r\n");
    r.s.write_all(&w).await.expect("write");
    for _ in 0..count {
        r.multiline().await;
    }
    r.line().await;
    count
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: pop3_floor HOST:PORT CONNECTIONS SESSIONS USERS_FILE";
    let addr = Rc::new(args.get(1).expect(usage).clone());
    let conns: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let sessions: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
    let text = std::fs::read_to_string(args.get(4).expect(usage)).expect("users file");
    let users: Rc<Vec<(String, String)>> = Rc::new(
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(u, p)| (u.to_string(), p.trim().to_string()))
            .collect(),
    );
    let next = Rc::new(AtomicUsize::new(0));
    let local = tokio::task::LocalSet::new();
    let total = local
        .run_until(async {
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let (addr, users, next) = (addr.clone(), users.clone(), next.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let mut got = 0;
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= sessions {
                            return got;
                        }
                        let (u, p) = &users[n % users.len()];
                        got += session(&addr, u, p).await;
                    }
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t.await.expect("session task");
            }
            total
        })
        .await;
    println!("{total}");
}
