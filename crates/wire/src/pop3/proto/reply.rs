//! POP3 responses (RFC 1939) and their incremental decoder: a status line (`+OK`, `-ERR`,
//! or a SASL continuation `+ `), and after `+OK` to a multi-line command the lines up to
//! the terminating `.` line, dot-unstuffed. Bodies are counted, not kept: only a prefix
//! as long as the caller asks for (CAPA's listing) is.

/// Longest status line accepted (RFC 1939 §3 allows 512 octets; some servers say more).
pub const MAX_STATUS_LINE: usize = 4096;

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// `+OK` (or a `+ ` continuation).
    pub ok: bool,
    /// A SASL continuation (`+ data`) rather than a final `+OK`.
    pub continuation: bool,
    /// The text after the status indicator.
    pub text: String,
    /// The lines after `+OK` of a multi-line response.
    pub body: Option<Body>,
}

/// The multi-line part of a response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Body {
    /// Octets of content after dot-unstuffing, line ends included.
    pub octets: u64,
    /// The first octets of the content, up to the decoder's limit.
    pub kept: Vec<u8>,
}

/// A response that breaks RFC 1939.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The status line does not start with `+OK`, `-ERR` or `+ `.
    #[error("malformed POP3 status line")]
    Status,
    /// The status line is longer than [`MAX_STATUS_LINE`].
    #[error("POP3 status line longer than {MAX_STATUS_LINE} bytes")]
    TooLong,
}

#[derive(Debug, Default)]
enum State {
    /// Reading the status line (bytes so far in `line`).
    #[default]
    Status,
    /// Reading a multi-line body; `dots` counts the start of the current line: 0 in the
    /// middle of a line, 1 after a line-initial '.', 2 after ".\r".
    Body { at_line_start: bool, dots: u8 },
}

/// Incremental decoder for one response at a time; the caller says whether the response
/// it waits for is multi-line and how much of its body to keep.
#[derive(Debug, Default)]
pub struct ResponseDecoder {
    state: State,
    line: Vec<u8>,
    status: Option<(bool, bool, String)>,
    body: Body,
}

/// Result of feeding bytes: a complete response and the bytes it used, or "need more".
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A complete response, and how many of the given bytes it consumed.
    Done(Response, usize),
    /// Everything given was consumed; the response is not complete yet.
    NeedMore,
}

impl ResponseDecoder {
    /// Feeds bytes for a response that is multi-line (after `+OK`) when `multiline`;
    /// `keep` bounds how many body octets are kept.
    pub fn decode(
        &mut self,
        input: &[u8],
        multiline: bool,
        keep: usize,
    ) -> Result<Decoded, ReplyError> {
        let mut i = 0;
        if matches!(self.state, State::Status) {
            let Some(pos) = memchr::memchr(b'\n', input) else {
                self.line.extend_from_slice(input);
                if self.line.len() > MAX_STATUS_LINE {
                    return Err(ReplyError::TooLong);
                }
                return Ok(Decoded::NeedMore);
            };
            self.line.extend_from_slice(&input[..pos]);
            i = pos + 1;
            if self.line.len() > MAX_STATUS_LINE {
                return Err(ReplyError::TooLong);
            }
            let status = parse_status(&self.line)?;
            self.line.clear();
            let (ok, continuation, _) = status;
            if !(ok && multiline && !continuation) {
                return Ok(Decoded::Done(finish(status, None), i));
            }
            self.status = Some(status);
            // The kept prefix is allocated once, not grown line by line.
            self.body = Body {
                octets: 0,
                kept: Vec::with_capacity(keep.min(MAX_STATUS_LINE)),
            };
            self.state = State::Body {
                at_line_start: true,
                dots: 0,
            };
        }
        let State::Body {
            mut at_line_start,
            mut dots,
        } = self.state
        else {
            return Ok(Decoded::NeedMore);
        };
        while i < input.len() {
            if at_line_start {
                match (dots, input[i]) {
                    (0, b'.') => {
                        dots = 1;
                        i += 1;
                        continue;
                    }
                    (1, b'\r') => {
                        dots = 2;
                        i += 1;
                        continue;
                    }
                    // A lone "." line (LF only, lenient) or ".\r\n": the end.
                    (1, b'\n') | (2, b'\n') => {
                        i += 1;
                        return Ok(self.done(i));
                    }
                    // ".\r" then something else: content "\r…" after the stuffing dot.
                    (2, _) => self.take(b"\r", keep),
                    // Content, after a stuffing dot when there was one.
                    _ => {}
                }
                dots = 0;
            }
            // Only lines that start with '.' need a look: skip to the next one.
            let rest = &input[i..];
            match memchr::memmem::find(rest, b"\n.") {
                Some(p) => {
                    self.take(&rest[..=p], keep);
                    i += p + 1;
                    at_line_start = true;
                }
                None => {
                    self.take(rest, keep);
                    i = input.len();
                    at_line_start = rest.ends_with(b"\n");
                }
            }
        }
        self.state = State::Body {
            at_line_start,
            dots,
        };
        Ok(Decoded::NeedMore)
    }

    fn take(&mut self, content: &[u8], keep: usize) {
        self.body.octets += content.len() as u64;
        let room = keep.saturating_sub(self.body.kept.len());
        self.body
            .kept
            .extend_from_slice(&content[..content.len().min(room)]);
    }

    fn done(&mut self, used: usize) -> Decoded {
        self.state = State::Status;
        let status = self.status.take().unwrap_or((true, false, String::new()));
        Decoded::Done(finish(status, Some(std::mem::take(&mut self.body))), used)
    }
}

fn finish(status: (bool, bool, String), body: Option<Body>) -> Response {
    let (ok, continuation, text) = status;
    Response {
        ok,
        continuation,
        text,
        body,
    }
}

/// `+OK text`, `-ERR text` or `+ data` (CR optional).
fn parse_status(line: &[u8]) -> Result<(bool, bool, String), ReplyError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = |rest: &[u8]| String::from_utf8_lossy(rest.trim_ascii_start()).into_owned();
    if let Some(rest) = line.strip_prefix(b"+OK") {
        Ok((true, false, text(rest)))
    } else if let Some(rest) = line.strip_prefix(b"-ERR") {
        Ok((false, false, text(rest)))
    } else if let Some(rest) = line.strip_prefix(b"+") {
        Ok((true, true, text(rest)))
    } else {
        Err(ReplyError::Status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes.
    fn decode_split(input: &[u8], step: usize, multiline: bool) -> (Response, usize) {
        let mut d = ResponseDecoder::default();
        let mut at = 0;
        while at < input.len() {
            let end = (at + step).min(input.len());
            match d.decode(&input[at..end], multiline, 64).expect("valid") {
                Decoded::Done(r, used) => return (r, at + used),
                Decoded::NeedMore => at = end,
            }
        }
        panic!("incomplete: {input:?}");
    }

    #[test]
    fn status_lines_at_every_split() {
        for step in 1..12 {
            let (r, used) = decode_split(b"+OK 2 320\r\nextra", step, false);
            assert_eq!((r.ok, r.text.as_str(), used), (true, "2 320", 11));
            let (r, _) = decode_split(b"-ERR [IN-USE] locked\r\n", step, true);
            assert!(!r.ok && r.body.is_none(), "an error has no body");
            let (r, _) = decode_split(b"+ \r\n", step, false);
            assert!(r.ok && r.continuation);
        }
    }

    #[test]
    fn bodies_end_at_the_dot_line_and_are_unstuffed_at_every_split() {
        let wire = b"+OK 25 octets\r\nSubject: x\r\n\r\n..dot\r\n.\r\nnext";
        for step in 1..wire.len() {
            let (r, used) = decode_split(wire, step, true);
            let body = r.body.expect("a body");
            assert_eq!(&body.kept[..], b"Subject: x\r\n\r\n.dot\r\n", "step {step}");
            assert_eq!(body.octets, 20, "step {step}");
            assert_eq!(&wire[used..], b"next", "step {step}");
        }
        let (r, _) = decode_split(b"+OK\r\n.\r\n", 1, true);
        assert_eq!(r.body.expect("empty body").octets, 0);
    }

    #[test]
    fn only_the_kept_prefix_is_held() {
        let mut wire = b"+OK\r\n".to_vec();
        for _ in 0..1000 {
            wire.extend_from_slice(b"0123456789012345678901234567890123456789\r\n");
        }
        wire.extend_from_slice(b".\r\n");
        let (r, _) = decode_split(&wire, 4096, true);
        let body = r.body.expect("body");
        assert_eq!(body.octets, 42_000);
        assert_eq!(body.kept.len(), 64);
    }

    #[test]
    fn garbage_is_refused() {
        let mut d = ResponseDecoder::default();
        assert_eq!(d.decode(b"HELLO\r\n", false, 0), Err(ReplyError::Status));
        let mut d = ResponseDecoder::default();
        assert_eq!(
            d.decode(&[b'+'; MAX_STATUS_LINE + 2], false, 0),
            Err(ReplyError::TooLong)
        );
    }
}
