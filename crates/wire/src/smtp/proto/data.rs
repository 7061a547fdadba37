//! Message bodies on the wire: CRLF normalisation and dot-stuffing (RFC 5321 §4.5.2).
//!
//! Both run once per message template, never per send.

use memchr::memchr;

/// The end-of-data marker sent after a dot-stuffed body that ends in CRLF.
pub const END_OF_DATA: &[u8] = b".\r\n";

/// Returns `body` with every line ending turned into CRLF (bare LF and bare CR alike) and a
/// final CRLF added when missing, so that it can be sent with DATA or BDAT unchanged.
pub fn normalize_crlf(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 40 + 2);
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\r' => {
                out.extend_from_slice(b"\r\n");
                if body.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'\n' => out.extend_from_slice(b"\r\n"),
            b => out.push(b),
        }
        i += 1;
    }
    if !out.is_empty() && !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Dot-stuffs a CRLF-normalised body: every line that starts with '.' gets one more '.'.
/// The result is sent between `DATA`'s 354 and [`END_OF_DATA`].
pub fn dot_stuff(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 16);
    let mut line_start = true;
    let mut rest = body;
    while !rest.is_empty() {
        if line_start && rest[0] == b'.' {
            out.push(b'.');
        }
        match memchr(b'\n', rest) {
            Some(pos) => {
                out.extend_from_slice(&rest[..=pos]);
                rest = &rest[pos + 1..];
                line_start = true;
            }
            None => {
                out.extend_from_slice(rest);
                rest = &[];
                line_start = false;
            }
        }
    }
    out
}

/// True when no line of `body` starts with '.', so it needs no stuffing.
pub fn needs_no_stuffing(body: &[u8]) -> bool {
    body.first() != Some(&b'.') && memchr::memmem::find(body, b"\n.").is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_lf_and_cr_become_crlf_and_a_final_crlf_is_added() {
        assert_eq!(normalize_crlf(b"a\nb\r\nc\rd"), b"a\r\nb\r\nc\r\nd\r\n");
        assert_eq!(normalize_crlf(b""), b"");
    }

    #[test]
    fn lines_starting_with_a_dot_are_stuffed() {
        let body = normalize_crlf(b".\n..x\nplain\n.end");
        assert_eq!(dot_stuff(&body), b"..\r\n...x\r\nplain\r\n..end\r\n");
    }

    #[test]
    fn smuggling_shapes_cannot_end_data_early() {
        // A bare LF before a dot must not become "\r\n.\r\n" on the wire.
        let body = normalize_crlf(b"a\n.\nb\r.\rc");
        let stuffed = dot_stuff(&body);
        assert!(
            memchr::memmem::find(&stuffed, b"\r\n.\r\n").is_none(),
            "{:?}",
            String::from_utf8_lossy(&stuffed)
        );
    }

    #[test]
    fn no_stuffing_needed_is_detected() {
        assert!(needs_no_stuffing(b"a\r\nb\r\n"));
        assert!(!needs_no_stuffing(b".a\r\n"));
        assert!(!needs_no_stuffing(b"a\r\n.b\r\n"));
    }
}
