//! What a client connection has read and not yet consumed. Responses are decoded from the
//! front and reads append at the back; when the back is short of room, the unread octets
//! move to the front of the same allocation, which grows only for a response larger than
//! it. (`BytesMut::reserve` reallocates whenever fewer octets have been consumed than are
//! left, as when a pipelined message body is half read, copying the consumed ones too.)

/// Octets read from a connection: `buf[start..]` are unread.
#[derive(Debug, Default)]
pub struct Inbox {
    buf: Vec<u8>,
    start: usize,
}

impl Inbox {
    /// An empty inbox that holds `capacity` octets before it first grows.
    pub fn with_capacity(capacity: usize) -> Inbox {
        Inbox {
            buf: Vec::with_capacity(capacity),
            start: 0,
        }
    }

    /// The octets read and not consumed yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// True when everything read was consumed.
    pub fn is_empty(&self) -> bool {
        self.start == self.buf.len()
    }

    /// True when the last read filled all the room it was given: more may be waiting.
    pub fn is_full(&self) -> bool {
        self.buf.len() == self.buf.capacity()
    }

    /// Marks the first `n` unread octets consumed.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
        if self.start == self.buf.len() {
            self.clear();
        }
    }

    /// Drops everything read.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.start = 0;
    }

    /// Makes room for about `chunk` more octets at the back and returns the vector a read
    /// appends to: the unread octets move to the front when the back has less than
    /// `chunk`, and the allocation grows (by doubling) only when that leaves less than
    /// half of `chunk`, so a partial response left over does not make every read grow it.
    pub fn room(&mut self, chunk: usize) -> &mut Vec<u8> {
        if self.buf.capacity() - self.buf.len() < chunk {
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < chunk.div_ceil(2) {
                // A new allocation with the unread octets copied in: `reserve` would
                // reallocate, and the allocator copies the whole old allocation, read or
                // not (at a new pipelined connection's first read, 16 KiB of nothing).
                let size = (self.buf.len() + chunk).max(2 * self.buf.capacity());
                let mut grown = Vec::with_capacity(size);
                grown.extend_from_slice(&self.buf);
                self.buf = grown;
            }
        }
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_octets_move_to_the_front_instead_of_growing_the_buffer() {
        let mut inbox = Inbox::with_capacity(16);
        inbox.room(16).extend_from_slice(b"0123456789abcdef");
        inbox.consume(6);
        assert_eq!(inbox.unread(), b"6789abcdef");
        // Ten unread, six consumed: room for six more fits in the same 16 octets.
        let before = inbox.buf.as_ptr();
        inbox.room(6).extend_from_slice(b"ghijkl");
        assert_eq!(inbox.unread(), b"6789abcdefghijkl");
        assert_eq!((inbox.buf.capacity(), inbox.buf.as_ptr()), (16, before));
        // Eight consumed, eight left: asked for ten, the eight freed at the front are
        // enough (at least half), with no new allocation.
        inbox.consume(8);
        inbox.room(10).extend_from_slice(b"m");
        assert_eq!(inbox.unread(), b"efghijklm");
        assert_eq!((inbox.buf.capacity(), inbox.buf.as_ptr()), (16, before));
        // Less than half of what is asked for: it grows, keeping the unread octets.
        inbox.room(20).extend_from_slice(b"n");
        assert_eq!(inbox.unread(), b"efghijklmn");
        assert!(inbox.buf.capacity() >= 29);
    }

    #[test]
    fn it_is_full_when_a_read_took_all_the_room() {
        let mut inbox = Inbox::with_capacity(8);
        let room = inbox.room(8);
        let spare = room.capacity() - room.len();
        room.extend(std::iter::repeat_n(b'x', spare - 1));
        assert!(!inbox.is_full(), "one octet of room left");
        inbox.room(1).push(b'y');
        assert!(inbox.is_full(), "no room left");
    }

    #[test]
    fn consuming_everything_empties_it() {
        let mut inbox = Inbox::with_capacity(8);
        inbox.room(8).extend_from_slice(b"abc");
        inbox.consume(2);
        assert!(!inbox.is_empty());
        inbox.consume(5);
        assert!(inbox.is_empty());
        assert_eq!(inbox.unread(), b"");
        assert_eq!(inbox.start, 0);
    }
}
