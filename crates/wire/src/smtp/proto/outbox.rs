//! Bytes a session has queued for the peer: small commands copied into one buffer, message
//! bodies kept as shared `Bytes` so that a template is never copied per send.

use bytes::{BufMut, Bytes, BytesMut};

/// The write queue of one session. The IO driver takes its chunks and writes them with one
/// vectored write where it can.
#[derive(Default)]
pub struct Outbox {
    buf: BytesMut,
    chunks: Vec<Bytes>,
}

impl Outbox {
    /// Appends a command line; `line` must already end in CRLF.
    pub fn put(&mut self, line: &[u8]) {
        self.buf.put_slice(line);
    }

    /// The command buffer, for formatting a command in place.
    pub fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Appends a shared chunk (a message body) without copying it.
    pub fn put_shared(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        if !self.buf.is_empty() {
            self.chunks.push(self.buf.split().freeze());
        }
        self.chunks.push(bytes);
    }

    /// True when nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.chunks.is_empty()
    }

    /// Moves everything queued, in order, into `into`.
    pub fn take_into(&mut self, into: &mut Vec<Bytes>) {
        into.append(&mut self.chunks);
        if !self.buf.is_empty() {
            into.push(self.buf.split().freeze());
        }
    }

    /// Everything queued as one contiguous vector.
    #[cfg(test)]
    pub fn take_vec(&mut self) -> Vec<u8> {
        let mut chunks = Vec::new();
        self.take_into(&mut chunks);
        chunks.concat()
    }
}
