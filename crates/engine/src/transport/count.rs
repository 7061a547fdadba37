//! Bytes the client side moved over a run's connections, in each direction: the kernel
//! keeps no per-process byte count on loopback, so a store's network use (seed 001's bytes
//! in and out) is counted where mailbench reads and writes its connections to it. Each
//! connection adds to its own counters (no lock, no shared cache line on the hot path);
//! the tally sums them when read, once per interval.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// One connection's byte counts, written only by the task that owns the connection.
#[derive(Debug, Default)]
struct ConnBytes {
    read: AtomicU64,
    written: AtomicU64,
}

/// Connections still open, and what the closed ones moved.
#[derive(Debug, Default)]
struct Registry {
    open: Vec<Arc<ConnBytes>>,
    closed: (u64, u64),
}

/// Every counted connection of a run: shared by its connect options, read by the sampler.
#[derive(Debug, Clone, Default)]
pub struct NetTally(Arc<Mutex<Registry>>);

impl NetTally {
    /// Bytes read from and written to the counted connections so far (all of them, open
    /// and closed): (read by mailbench = out of the server, written = into it).
    pub fn totals(&self) -> (u64, u64) {
        let mut reg = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A connection only the registry holds is closed and writes no more: fold it into
        // the closed totals (under this lock, so it counts once) and stop tracking it.
        let mut closed = reg.closed;
        reg.open.retain(|c| {
            if Arc::strong_count(c) > 1 {
                return true;
            }
            closed.0 += c.read.load(Ordering::Relaxed);
            closed.1 += c.written.load(Ordering::Relaxed);
            false
        });
        reg.closed = closed;
        reg.open.iter().fold(closed, |(r, w), c| {
            (
                r + c.read.load(Ordering::Relaxed),
                w + c.written.load(Ordering::Relaxed),
            )
        })
    }

    /// Wraps a new connection so that its bytes count here (one lock per connection).
    pub fn count(&self, tcp: TcpStream) -> Counted {
        let bytes = Arc::new(ConnBytes::default());
        let mut reg = self.0.lock().unwrap_or_else(|p| p.into_inner());
        reg.open.push(bytes.clone());
        Counted { tcp, bytes }
    }
}

/// A TCP connection whose bytes are counted in a [`NetTally`]: below TLS, so the counts
/// are what crossed the network.
#[derive(Debug)]
pub struct Counted {
    tcp: TcpStream,
    bytes: Arc<ConnBytes>,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.tcp).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before) as u64;
        if n > 0 {
            me.bytes.read.fetch_add(n, Ordering::Relaxed);
        }
        r
    }
}

impl Counted {
    fn wrote(&self, r: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = r {
            self.bytes.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.tcp).poll_write(cx, b);
        me.wrote(r)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.tcp).poll_write_vectored(cx, bufs);
        me.wrote(r)
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn both_directions_count_while_open_and_after_close() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut got = vec![0u8; 5];
            s.read_exact(&mut got).await.expect("read");
            s.write_all(b"0123456789abc").await.expect("write");
        });
        let tally = NetTally::default();
        let mut c = tally.count(TcpStream::connect(addr).await.expect("connect"));
        c.write_all(b"hello").await.expect("write");
        let mut back = vec![0u8; 13];
        c.read_exact(&mut back).await.expect("read");
        assert_eq!(tally.totals(), (13, 5), "open: 13 bytes read, 5 written");
        drop(c);
        server.await.expect("server");
        assert_eq!(tally.totals(), (13, 5), "closed: kept");
        assert_eq!(tally.totals(), (13, 5), "and kept once only");
    }
}
