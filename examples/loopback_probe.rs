//! The loopback ceiling for the sink benchmark: a minimal pipelined SMTP-shaped client and
//! server in one tokio process, with no real parsing, no statistics and no storage.
//! `loopback_probe data|bdat CONNECTIONS MESSAGES SIZE` prints messages per second.
//! `data`: MAIL+RCPT+DATA in one write, then the body (two round trips per message);
//! `bdat`: the whole transaction in one write (one round trip).

use std::time::Instant;

use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn server(mut s: TcpStream, bdat: bool, size: usize) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut in_data = false;
    loop {
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut reply = Vec::new();
        loop {
            if bdat {
                // MAIL + RCPT + "BDAT n LAST" lines, then n bytes.
                let Some(hdr) = memmem::find(&pending, b"LAST\r\n") else {
                    break;
                };
                if pending.len() < hdr + 6 + size {
                    break;
                }
                pending.drain(..hdr + 6 + size);
                reply.extend_from_slice(b"250 ok\r\n250 ok\r\n250 ok\r\n");
            } else if in_data {
                let Some(end) = memmem::find(&pending, b"\r\n.\r\n") else {
                    break;
                };
                pending.drain(..end + 5);
                in_data = false;
                reply.extend_from_slice(b"250 ok\r\n");
            } else {
                let Some(end) = memmem::find(&pending, b"DATA\r\n") else {
                    break;
                };
                pending.drain(..end + 6);
                in_data = true;
                reply.extend_from_slice(b"250 ok\r\n250 ok\r\n354 go\r\n");
            }
        }
        if !reply.is_empty() && s.write_all(&reply).await.is_err() {
            return;
        }
    }
}

async fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, pat: &[u8], count: usize) {
    let mut seen = 0;
    let mut chunk = [0u8; 4096];
    while seen < count {
        if let Some(p) = memmem::find(buf, pat) {
            buf.drain(..p + pat.len());
            seen += 1;
            continue;
        }
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn client(addr: std::net::SocketAddr, n: usize, bdat: bool, size: usize) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let body = vec![b'x'; size - 2]
        .into_iter()
        .chain(*b"\r\n")
        .collect::<Vec<u8>>();
    let mut buf = Vec::new();
    for _ in 0..n {
        if bdat {
            let mut w =
                format!("MAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nBDAT {size} LAST\r\n")
                    .into_bytes();
            w.extend_from_slice(&body);
            s.write_all(&w).await.expect("write");
            read_until(&mut s, &mut buf, b"\r\n", 3).await;
        } else {
            s.write_all(b"MAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\n")
                .await
                .expect("write");
            read_until(&mut s, &mut buf, b"354 go\r\n", 1).await;
            let mut w = body.clone();
            w.extend_from_slice(b".\r\n");
            s.write_all(&w).await.expect("write");
            read_until(&mut s, &mut buf, b"250 ok\r\n", 1).await;
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: loopback_probe data|bdat CONNECTIONS MESSAGES SIZE";
    let bdat = args.get(1).map(String::as_str) == Some("bdat");
    let conns: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let msgs: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
    let size: usize = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(server(s, bdat, size));
        }
    });
    let start = Instant::now();
    let per = msgs / conns;
    let tasks: Vec<_> = (0..conns)
        .map(|_| tokio::spawn(client(addr, per, bdat, size)))
        .collect();
    for t in tasks {
        t.await.expect("client");
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{:.0}", (per * conns) as f64 / secs);
}
