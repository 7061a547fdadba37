//! Which mail protocol answered: a server's first line tells SMTP (`220`), POP3 (`+OK`)
//! and IMAP (`* OK`) apart, so that a client pointed at the wrong port says so in one line
//! ("127.0.0.1:110 answered like a POP3 server, not IMAP") instead of counting each
//! session as a malformed reply. One place for the three clients (SMTP, POP3, IMAP).

use memchr::memchr;

use super::inbox::Inbox;
use super::link::{LinkError, LinkPhase};
use super::patience::Patience;
use super::stream::Stream;

/// The most of a first line read to tell the protocol (a greeting is one short line;
/// RFC 5321 §4.5.3.1.5 bounds an SMTP reply line at 512 octets).
const FIRST_LINE_MAX: usize = 512;

/// The mail protocols a greeting can be told by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// SMTP or LMTP: a reply code, `220 …` (or `220-…`, or a refusal such as `554 …`).
    Smtp,
    /// POP3: `+OK …` (or `-ERR …`).
    Pop3,
    /// IMAP: `* OK …`, `* PREAUTH …` or `* BYE …`.
    Imap,
    /// LMTP, which greets as SMTP does (only expected, never told by a greeting).
    Lmtp,
}

impl Protocol {
    /// Its name as users know it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Smtp => "SMTP",
            Protocol::Pop3 => "POP3",
            Protocol::Imap => "IMAP",
            Protocol::Lmtp => "LMTP",
        }
    }

    /// The protocol whose greeting this one's looks like.
    fn greets_like(self) -> Protocol {
        match self {
            Protocol::Lmtp => Protocol::Smtp,
            p => p,
        }
    }

    /// The protocol whose greeting `line` (a server's first line, CRLF or not) is, if it
    /// is one of the three's.
    pub fn of_greeting(line: &[u8]) -> Option<Protocol> {
        let upper = |n: usize| -> Vec<u8> {
            line.iter()
                .take(n)
                .map(u8::to_ascii_uppercase)
                .collect::<Vec<u8>>()
        };
        let digits = line.len() >= 3 && line[..3].iter().all(u8::is_ascii_digit);
        if digits && matches!(line.get(3), None | Some(b' ' | b'-' | b'\r' | b'\n')) {
            return Some(Protocol::Smtp);
        }
        if line.starts_with(b"+OK") || upper(4) == b"-ERR" {
            return Some(Protocol::Pop3);
        }
        let head = upper(10);
        if [&b"* OK"[..], b"* PREAUTH", b"* BYE"]
            .iter()
            .any(|p| head.starts_with(p))
        {
            return Some(Protocol::Imap);
        }
        None
    }

    /// The line that says the server at `target` answered with `greeting`, which is
    /// `other`'s and not this protocol's.
    pub fn mismatch(self, target: &str, other: Protocol) -> String {
        let article = match other {
            Protocol::Imap => "an",
            _ => "a",
        };
        format!(
            "{target} answered like {article} {} server, not {}: give the address of its {} port",
            other.name(),
            self.name(),
            self.name()
        )
    }
}

/// Reads until `rbuf` holds the server's whole first line (or `FIRST_LINE_MAX` octets of
/// it), leaving it unread; then returns the other protocol it belongs to, when it is not
/// `expected`'s. The wait is `patience`'s, charged to `phase`.
pub async fn other_protocol<P: LinkPhase>(
    stream: &mut Stream,
    rbuf: &mut Inbox,
    patience: &mut Patience,
    phase: P,
    expected: Protocol,
) -> Result<Option<Protocol>, LinkError<P>> {
    while memchr(b'\n', rbuf.unread()).is_none() && rbuf.unread().len() < FIRST_LINE_MAX {
        patience
            .read(stream, rbuf.room(FIRST_LINE_MAX), phase)
            .await?;
    }
    Ok(Protocol::of_greeting(rbuf.unread()).filter(|p| *p != expected.greets_like()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_greeting_is_told_apart() {
        let of = |l: &str| Protocol::of_greeting(l.as_bytes());
        // Dovecot's, Postfix's, Cyrus's and others' own first lines.
        assert_eq!(
            of("* OK [CAPABILITY IMAP4rev1 SASL-IR] Dovecot ready.\r\n"),
            Some(Protocol::Imap)
        );
        assert_eq!(of("* PREAUTH welcome\r\n"), Some(Protocol::Imap));
        assert_eq!(of("* bye too many connections\r\n"), Some(Protocol::Imap));
        assert_eq!(of("+OK Dovecot ready.\r\n"), Some(Protocol::Pop3));
        assert_eq!(of("-ERR [SYS/TEMP] busy\r\n"), Some(Protocol::Pop3));
        assert_eq!(
            of("220 mx.example.com ESMTP Postfix\r\n"),
            Some(Protocol::Smtp)
        );
        assert_eq!(of("220-mx.example.com ESMTP\r\n"), Some(Protocol::Smtp));
        assert_eq!(of("554 5.3.2 no service\r\n"), Some(Protocol::Smtp));
        assert_eq!(of("SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(of("HTTP/1.1 400 Bad Request\r\n"), None);
        assert_eq!(of("2200 x"), None, "a reply code has three digits");
        assert_eq!(of(""), None);
    }

    #[test]
    fn the_mismatch_is_one_line_naming_both() {
        assert_eq!(
            Protocol::Imap.mismatch("127.0.0.1:110", Protocol::Pop3),
            "127.0.0.1:110 answered like a POP3 server, not IMAP: give the address of its IMAP port"
        );
        assert_eq!(
            Protocol::Lmtp.mismatch("127.0.0.1:110", Protocol::Pop3),
            "127.0.0.1:110 answered like a POP3 server, not LMTP: give the address of its LMTP port"
        );
        assert_eq!(
            Protocol::Smtp.mismatch("127.0.0.1:143", Protocol::Imap),
            "127.0.0.1:143 answered like an IMAP server, not SMTP: give the address of its SMTP port"
        );
    }
}
