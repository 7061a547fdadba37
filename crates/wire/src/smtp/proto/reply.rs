//! SMTP replies and their incremental decoder (on smtp-proto's `ResponseReceiver`).

use std::fmt;

use smtp_proto::response::parser::ResponseReceiver;

/// Longest reply line a server may send (RFC 5321 §4.5.3.1.5 says 512 octets; smtp-proto
/// caps a whole reply at 4096, which also bounds multi-line replies).
pub const MAX_REPLY_LEN: usize = smtp_proto::response::parser::MAX_RESPONSE_LENGTH;

/// One complete (possibly multi-line) reply from a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit reply code.
    pub code: u16,
    /// The enhanced status code (RFC 3463) of the first line, `[0, 0, 0]` when absent.
    pub esc: [u8; 3],
    /// The text, lines joined by `\n`, without codes.
    pub text: String,
}

impl Reply {
    /// Builds a reply.
    #[cfg(test)]
    pub fn new(code: u16, text: &str) -> Self {
        Reply {
            code,
            esc: [0; 3],
            text: text.to_string(),
        }
    }

    /// 2xx.
    pub fn is_positive(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.text.lines().next().unwrap_or("");
        if self.esc != [0; 3] {
            write!(
                f,
                "{} {}.{}.{} {}",
                self.code, self.esc[0], self.esc[1], self.esc[2], first
            )
        } else {
            write!(f, "{} {}", self.code, first)
        }
    }
}

/// Result of feeding bytes to a decoder: a value and how many bytes it used, or "need more".
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<T> {
    /// A complete value, and the number of input bytes it consumed.
    Done(T, usize),
    /// The input ends inside a value; everything given was consumed into the decoder.
    NeedMore,
}

/// A reply the server sent that breaks the grammar of RFC 5321 §4.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The reply does not start with three digits and a separator.
    #[error("malformed reply: {0}")]
    Syntax(&'static str),
    /// The reply is longer than `MAX_REPLY_LEN`.
    #[error("reply longer than {MAX_REPLY_LEN} bytes")]
    TooLong,
}

/// Incremental reply decoder. Bytes may arrive split anywhere; state is kept between calls,
/// so callers must not re-feed bytes that were reported consumed.
#[derive(Default)]
pub struct ReplyDecoder {
    inner: ResponseReceiver,
}

impl ReplyDecoder {
    /// Feeds `buf`. On `Done(reply, n)` the first `n` bytes were used and the decoder is ready
    /// for the next reply; on `NeedMore` all of `buf` was absorbed.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Decoded<Reply>, ReplyError> {
        let mut iter = buf.iter();
        let result = self.inner.parse(&mut iter);
        let used = buf.len() - iter.len();
        match result {
            Ok(resp) => {
                self.inner.reset();
                let code = resp.code;
                if !(200..600).contains(&code) {
                    return Err(ReplyError::Syntax("reply code outside 200-599"));
                }
                Ok(Decoded::Done(
                    Reply {
                        code,
                        esc: resp.esc,
                        text: resp.message,
                    },
                    used,
                ))
            }
            Err(smtp_proto::Error::NeedsMoreData { .. }) => Ok(Decoded::NeedMore),
            Err(smtp_proto::Error::ResponseTooLong) => {
                self.inner.reset();
                Err(ReplyError::TooLong)
            }
            Err(smtp_proto::Error::SyntaxError { syntax }) => {
                self.inner.reset();
                Err(ReplyError::Syntax(syntax))
            }
            Err(_) => {
                self.inner.reset();
                Err(ReplyError::Syntax("unparsable reply"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes all replies in `input`, feeding it in pieces cut at `cuts`.
    fn decode_split(input: &[u8], cut: usize) -> Vec<Reply> {
        let mut dec = ReplyDecoder::default();
        let mut out = Vec::new();
        for piece in [&input[..cut], &input[cut..]] {
            let mut rest = piece;
            while !rest.is_empty() {
                match dec.decode(rest).expect("valid input") {
                    Decoded::Done(r, n) => {
                        out.push(r);
                        rest = &rest[n..];
                    }
                    Decoded::NeedMore => break,
                }
            }
        }
        out
    }

    #[test]
    fn single_and_multiline_replies_at_every_split() {
        let input = b"250-mx.example.test\r\n250-PIPELINING\r\n250 SIZE 1000\r\n354 go ahead\r\n250 2.0.0 ok\r\n";
        for cut in 0..=input.len() {
            let got = decode_split(input, cut);
            assert_eq!(got.len(), 3, "cut at {cut}: {got:?}");
            assert_eq!(got[0].code, 250);
            assert_eq!(got[0].text, "mx.example.test\nPIPELINING\nSIZE 1000");
            assert_eq!(got[1].code, 354);
            assert_eq!(got[2].esc, [2, 0, 0], "cut at {cut}");
            assert_eq!(got[2].text, "ok");
        }
    }

    #[test]
    fn bare_lf_line_endings_are_accepted() {
        let got = decode_split(b"220 hi\n250 ok\n", 3);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].code, 250);
    }

    #[test]
    fn garbage_is_a_syntax_error() {
        let mut dec = ReplyDecoder::default();
        assert!(dec.decode(b"hello\r\n").is_err());
    }

    #[test]
    fn overlong_reply_is_rejected() {
        let mut dec = ReplyDecoder::default();
        let mut line = b"250 ".to_vec();
        line.extend(std::iter::repeat_n(b'x', MAX_REPLY_LEN + 10));
        line.extend_from_slice(b"\r\n");
        assert_eq!(dec.decode(&line), Err(ReplyError::TooLong));
    }
}
