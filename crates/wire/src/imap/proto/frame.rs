//! Where one IMAP response ends (RFC 9051 §4.3, §7): a line, or a line that announces a
//! literal (`{n}` or `{n+}` before its CRLF) followed by n octets and the rest of the
//! response. Scanning resumes where it stopped, so a response that arrives in many reads
//! is looked at once, and a literal's octets are skipped, not scanned.

use memchr::memchr;

/// Longest line (between literals) accepted: status texts and untagged data without
/// literals are short; a longer one is a broken or hostile server.
pub const MAX_LINE: usize = 1 << 20;

/// Largest response accepted (a message body is a literal inside it).
pub const MAX_RESPONSE: usize = 256 << 20;

/// A response the framer cannot accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A line without CRLF within [`MAX_LINE`] octets.
    #[error("IMAP response line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// A literal that would make the response larger than [`MAX_RESPONSE`].
    #[error("IMAP literal makes a response larger than {MAX_RESPONSE} bytes")]
    TooLarge,
}

/// A complete response's extent in the buffer, and where its literals are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Octets of the whole response, final CRLF included.
    pub len: usize,
    /// Each literal's octets, as (start, end) offsets from the response's start.
    pub literals: Vec<(usize, usize)>,
}

/// Finds response boundaries in a buffer that the caller appends to and, after each
/// complete response, advances past it.
#[derive(Debug, Default)]
pub struct Framer {
    /// Octets of the current response already known to belong to it.
    done: usize,
    /// Where the current line started.
    line_start: usize,
    literals: Vec<(usize, usize)>,
}

impl Framer {
    /// Looks at `buf` (which starts with the current response) for its end; `Ok(None)`
    /// until it has all arrived. After a `Some`, the caller drops `len` octets from the
    /// buffer's front before the next call.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<Frame>, FrameError> {
        loop {
            if buf.len() < self.done {
                // Inside a literal.
                return Ok(None);
            }
            let Some(nl) = memchr(b'\n', &buf[self.done..]) else {
                if buf.len() - self.line_start > MAX_LINE {
                    return Err(FrameError::LineTooLong);
                }
                self.done = buf.len();
                return Ok(None);
            };
            let end = self.done + nl + 1;
            if end - self.line_start > MAX_LINE {
                return Err(FrameError::LineTooLong);
            }
            match literal_announced(&buf[self.line_start..end]) {
                Some(n) => {
                    let start = end;
                    let stop = usize::try_from(n)
                        .ok()
                        .and_then(|n| start.checked_add(n))
                        .filter(|s| *s <= MAX_RESPONSE);
                    let Some(stop) = stop else {
                        return Err(FrameError::TooLarge);
                    };
                    self.literals.push((start, stop));
                    self.done = stop;
                    self.line_start = stop;
                }
                None => {
                    let frame = Frame {
                        len: end,
                        literals: std::mem::take(&mut self.literals),
                    };
                    self.done = 0;
                    self.line_start = 0;
                    return Ok(Some(frame));
                }
            }
        }
    }
}

impl Framer {
    /// Takes back a frame's literal list once the response is read, for the next
    /// response's literals (a body FETCH has one each: an allocation per command otherwise).
    pub fn recycle(&mut self, frame: Frame) {
        let mut spare = frame.literals;
        if self.literals.is_empty() && spare.capacity() > self.literals.capacity() {
            spare.clear();
            self.literals = spare;
        }
    }
}

/// The length a line announces for the literal after it: the line ends `{n}\r\n` or
/// `{n+}\r\n` (a bare `\n` is accepted too).
fn literal_announced(line: &[u8]) -> Option<u64> {
    let line = line.strip_suffix(b"\n")?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let inner = line.strip_suffix(b"}")?;
    let open = inner.iter().rposition(|&b| b == b'{')?;
    let digits = &inner[open + 1..];
    let digits = digits.strip_suffix(b"+").unwrap_or(digits);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Too many digits for a u64 is as large as can be: refused by the caller.
    Some(
        std::str::from_utf8(digits)
            .ok()?
            .parse()
            .unwrap_or(u64::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(mut input: &[u8], step: usize) -> Vec<Vec<u8>> {
        let mut f = Framer::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while !input.is_empty() || !buf.is_empty() {
            let take = step.min(input.len());
            buf.extend_from_slice(&input[..take]);
            input = &input[take..];
            while let Some(fr) = f.next(&buf).expect("frames") {
                out.push(buf.drain(..fr.len).collect());
            }
            if take == 0 {
                break;
            }
        }
        out
    }

    #[test]
    fn lines_and_literals_frame_alike_whatever_the_reads() {
        let input =
            b"* 3 EXISTS\r\n* 1 FETCH (UID 7 BODY[] {5}\r\nab\r\nc FLAGS ())\r\na1 OK done\r\n";
        for step in [1, 2, 3, 7, 100] {
            let got = frames(input, step);
            let want: Vec<&[u8]> = vec![
                b"* 3 EXISTS\r\n",
                b"* 1 FETCH (UID 7 BODY[] {5}\r\nab\r\nc FLAGS ())\r\n",
                b"a1 OK done\r\n",
            ];
            assert_eq!(got, want, "read size {step}");
        }
    }

    #[test]
    fn literal_spans_are_reported() {
        let buf = b"* 1 FETCH (BODY[HEADER] {3}\r\nabc BODY[TEXT] {0+}\r\n)\r\n";
        let fr = Framer::default().next(buf).unwrap().unwrap();
        assert_eq!(fr.len, buf.len());
        assert_eq!(fr.literals.len(), 2);
        let (s, e) = fr.literals[0];
        assert_eq!(&buf[s..e], b"abc");
        assert_eq!(fr.literals[1].0, fr.literals[1].1);
    }

    #[test]
    fn a_recycled_literal_list_carries_nothing_into_the_next_frame() {
        let mut f = Framer::default();
        let first = b"* 1 FETCH (BODY[HEADER] {3}\r\nabc BODY[TEXT] {2}\r\nde)\r\n";
        let fr = f.next(first).unwrap().unwrap();
        assert_eq!(fr.literals.len(), 2);
        f.recycle(fr);
        let second = b"* 2 FETCH (BODY[] {1}\r\nx)\r\n";
        let fr = f.next(second).unwrap().unwrap();
        assert_eq!(
            fr.literals,
            vec![(23, 24)],
            "only the second response's literal"
        );
        assert_eq!(&second[23..24], b"x");
        f.recycle(fr);
        let plain = b"a1 OK done\r\n";
        assert_eq!(f.next(plain).unwrap().unwrap().literals, vec![]);
    }

    #[test]
    fn braces_that_are_not_literals_end_the_line() {
        for line in [&b"a1 OK {x}\r\n"[..], b"a1 OK {}\r\n", b"a1 OK { 3}\r\n"] {
            let fr = Framer::default().next(line).unwrap().unwrap();
            assert_eq!(fr.len, line.len());
            assert!(fr.literals.is_empty());
        }
    }

    #[test]
    fn hostile_sizes_are_refused_not_allocated() {
        let huge = b"* 1 FETCH (BODY[] {99999999999}\r\n";
        assert_eq!(
            Framer::default().next(huge),
            Err(FrameError::TooLarge),
            "an 11-digit literal"
        );
        let mut f = Framer::default();
        let long = vec![b'x'; MAX_LINE + 2];
        assert_eq!(f.next(&long), Err(FrameError::LineTooLong));
    }
}
