//! The cheapest SMTP receiver this design can be: the same runtime (one thread), one task
//! per connection and replies batched per read as `mailbench sink`, but canned replies,
//! commands told apart by their first four bytes, and no statistics, faults or trace
//! reading. The sink benchmark runs it beside smtp-sink and mailbench sink: its CPU per
//! message is what the kernel and the runtime cost, which no amount of work on mailbench's
//! own code can go below.
//!
//! `floor_sink PORT` listens on 127.0.0.1:PORT until killed.

use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    if s.write_all(b"220 floor ESMTP\r\n").await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut in_data = false;
    let mut reply = Vec::new();
    loop {
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut quit = false;
        loop {
            if in_data {
                let Some(end) = memmem::find(&pending, b"\r\n.\r\n") else {
                    // Keep only what may start the terminator.
                    let keep = pending.len().min(4);
                    pending.drain(..pending.len() - keep);
                    break;
                };
                pending.drain(..end + 5);
                in_data = false;
                reply.extend_from_slice(b"250 2.0.0 ok\r\n");
                continue;
            }
            let Some(end) = memmem::find(&pending, b"\r\n") else {
                break;
            };
            let verb = pending[..end.min(4)].to_ascii_uppercase();
            reply.extend_from_slice(match verb.as_slice() {
                b"EHLO" => b"250-floor\r\n250-PIPELINING\r\n250 8BITMIME\r\n".as_slice(),
                b"DATA" => {
                    in_data = true;
                    // The terminator may follow an empty body at once.
                    pending.splice(..end, []);
                    b"354 go\r\n"
                }
                b"QUIT" => {
                    quit = true;
                    b"221 bye\r\n"
                }
                _ => b"250 ok\r\n",
            });
            if !in_data {
                pending.drain(..end + 2);
            }
        }
        if !reply.is_empty() && s.write_all(&reply).await.is_err() {
            return;
        }
        reply.clear();
        if quit {
            return;
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .expect("usage: floor_sink PORT");
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    while let Ok((s, _)) = listener.accept().await {
        tokio::spawn(serve(s));
    }
}
