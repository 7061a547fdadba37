//! The byte stream under a session, client or server: TCP, a unix socket, or TLS over
//! either. TLS streams are boxed behind one trait so both sides share this type.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// Anything a session can run over.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A plain or TLS stream.
pub enum Stream {
    /// Plain TCP.
    Tcp(TcpStream),
    /// Plain unix socket.
    Unix(UnixStream),
    /// Plain TCP whose bytes are counted (a run's connections to the store it watches).
    Counted(super::count::Counted),
    /// TLS over either.
    Tls(Box<dyn Io>),
    /// Only while a TLS upgrade is in progress.
    Gone,
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Tcp($s) => $e,
            Stream::Unix($s) => $e,
            Stream::Counted($s) => $e,
            Stream::Tls($s) => $e,
            Stream::Gone => Poll::Ready(Err(io::Error::from(io::ErrorKind::NotConnected))),
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        delegate!(self, s => Pin::new(s).poll_write(cx, b))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}
