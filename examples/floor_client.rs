//! The cheapest SMTP client this design can be: the same exchange as `mailbench send`
//! (pipelined MAIL+RCPT+DATA, then the body with the next envelope or QUIT in the same
//! write) on the same one-thread tokio runtime, but with precomputed bytes, replies only
//! counted, and no statistics. The send benchmark runs it beside smtp-source and
//! mailbench: its CPU per message is what the kernel and the runtime cost, which no
//! amount of work on mailbench's own code can go below.
//!
//! `floor_client HOST:PORT SESSIONS MESSAGES SIZE reuse|noreuse` prints the messages sent.

use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ENVELOPE: &[u8] = b"MAIL FROM:<floor@example.org>\r\nRCPT TO:<rcpt@example.com>\r\nDATA\r\n";

/// Reads until `count` final reply lines (`NNN text`) have arrived.
async fn replies(s: &mut TcpStream, buf: &mut Vec<u8>, count: usize) {
    let mut seen = 0;
    let mut chunk = [0u8; 4096];
    while seen < count {
        while let Some(p) = memmem::find(buf, b"\r\n") {
            if buf.get(3) == Some(&b' ') {
                seen += 1;
            }
            buf.drain(..p + 2);
        }
        if seen >= count {
            break;
        }
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One connection: greeting, EHLO, `n` messages, QUIT.
async fn session(addr: String, n: usize, body: &[u8]) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut buf = Vec::new();
    replies(&mut s, &mut buf, 1).await;
    s.write_all(b"EHLO floor.example\r\n").await.expect("write");
    replies(&mut s, &mut buf, 1).await;
    s.write_all(ENVELOPE).await.expect("write");
    replies(&mut s, &mut buf, 3).await;
    for i in 0..n {
        let last = i + 1 == n;
        let mut w = body.to_vec();
        w.extend_from_slice(if last { b"QUIT\r\n" } else { ENVELOPE });
        s.write_all(&w).await.expect("write");
        replies(&mut s, &mut buf, if last { 2 } else { 4 }).await;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: floor_client HOST:PORT SESSIONS MESSAGES SIZE reuse|noreuse";
    let addr = args.get(1).expect(usage).clone();
    let sessions: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let msgs: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
    let size: usize = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
    let reuse = args.get(5).map(String::as_str) == Some("reuse");
    let mut body = b"Subject: floor\r\n\r\n".to_vec();
    body.resize(size.max(body.len() + 2) - 2, b'x');
    body.extend_from_slice(b"\r\n.\r\n");
    let body: &'static [u8] = Box::leak(body.into_boxed_slice());
    let per_task = msgs / sessions;
    let tasks: Vec<_> = (0..sessions)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                if reuse {
                    session(addr, per_task, body).await;
                } else {
                    for _ in 0..per_task {
                        session(addr.clone(), 1, body).await;
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("session");
    }
    println!("{}", per_task * sessions);
}
