//! A shaping relay in front of one server: it listens on a loopback port of its own,
//! connects each client it accepts to the server, and carries the bytes both ways with
//! the link's delay, jitter and rate ([`super::shape::LinkShape`]). Bytes keep their
//! order (a later run never overtakes an earlier one, whatever its jitter), and each way
//! holds at most 64 runs of 16 KiB in flight, so a fast sender waits as on a slow network and
//! memory stays bounded. An end of stream crosses with the same delay; a reset ends both
//! ways at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::shape::LinkShape;

/// Byte runs one way of a connection may hold before its reader waits (64 of at most
/// [`RUN`] bytes: 1 MiB).
const HELD: usize = 64;
/// The largest byte run read at once.
const RUN: usize = 16 * 1024;
/// What a rate-capped link writes at a time: an Ethernet frame's TCP payload.
const SEGMENT: usize = 1448;

/// A running shaped link; dropping it closes the listener and every connection.
#[derive(Debug)]
pub struct Shaper {
    addr: SocketAddr,
    stop: CancellationToken,
    connections: Arc<AtomicU64>,
}

impl Shaper {
    /// Starts a link shaped by `shape` in front of `server`, listening on a free loopback
    /// port.
    pub async fn start(server: SocketAddr, shape: LinkShape) -> std::io::Result<Shaper> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let connections = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = s.cancelled() => return,
                };
                let Ok((client, _)) = accepted else { continue };
                n.fetch_add(1, Ordering::Relaxed);
                let s = s.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = carry(client, server, shape) => {}
                        _ = s.cancelled() => {}
                    }
                });
            }
        });
        Ok(Shaper {
            addr,
            stop,
            connections,
        })
    }

    /// Where clients connect instead of the server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections carried so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Carries one client's connection to `server` and back until either side ends it.
async fn carry(client: TcpStream, server: SocketAddr, shape: LinkShape) {
    let Ok(upstream) = TcpStream::connect(server).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let seed = fastrand::u64(..);
    // A reset or error one way ends the other too (select); an orderly end of stream
    // crosses and the other way goes on until it ends as well (join).
    let up = one_way(cr, uw, shape, seed);
    let down = one_way(ur, cw, shape, seed ^ 1);
    tokio::pin!(up, down);
    tokio::select! {
        r = &mut up => if r.is_ok() { let _ = down.await; },
        r = &mut down => if r.is_ok() { let _ = up.await; },
    }
}

/// One way of a connection: what `from` reads is written to `to` once its delay (and the
/// rate) let it through; ends with the end of stream passed on, or the first error.
async fn one_way<R, W>(mut from: R, mut to: W, shape: LinkShape, seed: u64) -> std::io::Result<()>
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(HELD);
    let read = async move {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut last = Instant::now();
        let mut buf = vec![0u8; RUN];
        loop {
            let n = from.read(&mut buf).await?;
            // A run leaves no earlier than the one before it: TCP keeps order.
            last = last.max(Instant::now() + shape.draw_delay(&mut rng));
            let run = Bytes::copy_from_slice(&buf[..n]);
            if tx.send((last, run)).await.is_err() || n == 0 {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let write = async move {
        // When the link is free again at its rate.
        let mut free = Instant::now();
        while let Some((due, run)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if run.is_empty() {
                return to.shutdown().await;
            }
            if shape.rate_bytes_s.is_none() {
                to.write_all(&run).await?;
                continue;
            }
            // At a rate, a segment at a time: a link streams, it does not hold a whole
            // run until its last byte has crossed (a timer a little late is caught up by
            // the next segments, whose times are not moved).
            for segment in run.chunks(SEGMENT) {
                free = free.max(due) + shape.transmit(segment.len());
                tokio::time::sleep_until(free).await;
                to.write_all(segment).await?;
            }
        }
        Ok(())
    };
    let (r, w) = tokio::join!(read, write);
    r.and(w)
}

/// How long a round trip through `shape` takes at least: the delay each way.
pub fn round_trip(shape: &LinkShape) -> Duration {
    shape.delay.saturating_sub(shape.jitter) * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(delay_ms: u64, rate_bytes_s: Option<u64>) -> LinkShape {
        LinkShape {
            hop: super::super::shape::Hop::Mta,
            delay: Duration::from_millis(delay_ms),
            jitter: Duration::ZERO,
            rate_bytes_s,
        }
    }

    /// An echo server on loopback; returns its address.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let addr = l.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_round_trip_takes_the_delay_each_way_and_a_rate_paces_the_bytes() {
        let server = echo().await;
        let shape = shaped(40, None);
        let link = Shaper::start(server, shape).await.expect("start");
        let mut c = TcpStream::connect(link.addr()).await.expect("connect");
        c.set_nodelay(true).expect("nodelay");
        let mut got = [0u8; 5];
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            c.write_all(b"hello").await.expect("write");
            c.read_exact(&mut got).await.expect("read");
            let took = t0.elapsed();
            assert_eq!(&got, b"hello");
            assert!(
                (Duration::from_millis(80)..Duration::from_millis(95)).contains(&took),
                "a round trip through 40 ms each way: expected 80 ms, got {took:?}"
            );
        }
        assert_eq!(round_trip(&shape), Duration::from_millis(80));

        // 20 kB at 100 kB/s each way: the echo crosses twice, pipelined, ~0.2 s.
        let shape = shaped(0, Some(100_000));
        let link = Shaper::start(server, shape).await.expect("start");
        let mut c = TcpStream::connect(link.addr()).await.expect("connect");
        let data = vec![7u8; 20_000];
        let t0 = std::time::Instant::now();
        let (mut r, mut w) = c.split();
        let mut back = vec![0u8; data.len()];
        let (a, b) = tokio::join!(w.write_all(&data), r.read_exact(&mut back));
        a.expect("write");
        b.expect("read");
        let took = t0.elapsed();
        assert_eq!(back, data);
        assert!(
            (Duration::from_millis(195)..Duration::from_millis(260)).contains(&took),
            "20 kB at 100 kB/s: expected 200 ms, got {took:?}"
        );
        assert_eq!(link.connections(), 1);
    }

    #[tokio::test]
    async fn an_end_of_stream_crosses_and_order_holds_under_jitter() {
        let server = echo().await;
        let shape = LinkShape {
            jitter: Duration::from_millis(15),
            ..shaped(20, None)
        };
        let link = Shaper::start(server, shape).await.expect("start");
        let mut c = TcpStream::connect(link.addr()).await.expect("connect");
        c.set_nodelay(true).expect("nodelay");
        let sent: Vec<u8> = (0..200u8).collect();
        for b in &sent {
            c.write_all(&[*b]).await.expect("write");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        c.shutdown().await.expect("shutdown");
        let mut back = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut back))
            .await
            .expect("the end of stream came back")
            .expect("read");
        assert_eq!(back, sent, "every byte back, in order");
    }
}
