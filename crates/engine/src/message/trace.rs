//! The trace header every generated message carries, so a sink — in this process or on
//! another host — can correlate arrivals, find loss and duplicates, and time delivery.
//!
//! Format (one header line, ASCII):
//!
//! ```text
//! X-Mailbench-Trace: run=<run id>; seq=<sequence number>; t=<send time, µs since the Unix epoch>; len=<body octets>; crc=<body CRC-32>
//! ```
//!
//! `run` is 16 lower-case hex digits, `seq` counts from 0 within the run, `t` is the wall
//! clock when the transaction started. `len` (10 decimal digits) and `crc` (8 lower-case
//! hex digits, the CRC-32 of zlib and Ethernet) describe the body as sent — every octet after
//! the header section's empty line, CRLF line ends, before dot-stuffing — so that a sink
//! can tell a message that arrived intact from one an MTA cut or altered (a queue file
//! truncated by a power cut): [`BodySum`]. A header without them (an older sender) is
//! not checked. Extra `; key=value` fields may be added later and must be ignored by
//! readers.

/// The header name, as written.
pub const HEADER_NAME: &str = "X-Mailbench-Trace";

/// What a trace header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trace {
    /// The run id.
    pub run: u64,
    /// The message's sequence number within the run.
    pub seq: u64,
    /// Send time, microseconds since the Unix epoch.
    pub sent_us: u64,
}

impl Trace {
    /// Appends the header line (with CRLF) to `out`.
    pub fn write(&self, out: &mut impl std::fmt::Write) {
        let _ = write!(
            out,
            "{HEADER_NAME}: run={:016x}; seq={}; t={}\r\n",
            self.run, self.seq, self.sent_us
        );
    }

    /// Appends the header line (with CRLF) to `out`, with a [`BodySum`] of zeros as its
    /// last [`BodySum::WIDTH`] octets before the CRLF: the message's size can be made before
    /// its body is chosen, and [`BodySum::put`] fills the sum in once it is.
    pub fn write_with_sum_slot(&self, out: &mut impl std::fmt::Write) {
        let _ = write!(
            out,
            "{HEADER_NAME}: run={:016x}; seq={}; t={}; len=0000000000; crc=00000000\r\n",
            self.run, self.seq, self.sent_us
        );
    }

    /// Parses the value part of the header (after the colon).
    pub fn parse_value(value: &[u8]) -> Option<Trace> {
        let text = std::str::from_utf8(value).ok()?;
        let (mut run, mut seq, mut t) = (None, None, None);
        for field in text.split(';') {
            let (k, v) = field.trim().split_once('=')?;
            match k {
                "run" => run = u64::from_str_radix(v.trim(), 16).ok(),
                "seq" => seq = v.trim().parse().ok(),
                "t" => t = v.trim().parse().ok(),
                _ => {}
            }
        }
        Some(Trace {
            run: run?,
            seq: seq?,
            sent_us: t?,
        })
    }

    /// Finds and parses the trace header in a message, scanning the header section only.
    pub fn find(message: &[u8]) -> Option<Trace> {
        let name = HEADER_NAME.as_bytes();
        let mut rest = message;
        loop {
            let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |p| p + 1);
            let line = &rest[..end];
            if line == b"\r\n" || line == b"\n" || line.is_empty() {
                return None; // end of the header section
            }
            if starts_with_field(line, name) {
                let value = line[name.len() + 1..].trim_ascii();
                return Trace::parse_value(value);
            }
            rest = &rest[end..];
        }
    }
}

/// What a message's body was as sent, for the sink to check what arrived against: its
/// length and CRC-32. Carried in the trace header (`; len=…; crc=…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodySum {
    /// Octets of the body.
    pub len: u64,
    /// Its CRC-32.
    pub crc: u32,
}

impl BodySum {
    /// Octets of the fields as written (`; len=` 10 digits `; crc=` 8 hex digits): fixed,
    /// so that the slot can be laid out before the body is known.
    pub const WIDTH: usize = 6 + 10 + 6 + 8;

    /// The sum of a body given in pieces (a shared template and a per-message last line).
    pub fn of(parts: &[&[u8]]) -> BodySum {
        let mut h = crc32fast::Hasher::new();
        let mut len = 0u64;
        for p in parts {
            h.update(p);
            len += p.len() as u64;
        }
        BodySum {
            len,
            crc: h.finalize(),
        }
    }

    /// True when `body` is the body this sum was made of (the length first: a cut body
    /// costs no checksum).
    pub fn matches(&self, body: &[u8]) -> bool {
        body.len() as u64 == self.len && crc32fast::hash(body) == self.crc
    }

    /// Writes the fields over `slot`, the [`BodySum::WIDTH`] octets
    /// [`Trace::write_with_sum_slot`] left (a length beyond 10 digits is written as the
    /// largest: no message is that long).
    pub fn put(&self, slot: &mut [u8]) {
        use std::io::Write as _;
        let mut at = &mut slot[..];
        let _ = write!(
            at,
            "; len={:010}; crc={:08x}",
            self.len.min(9_999_999_999),
            self.crc
        );
    }

    /// The sum a trace header's value carries, if it carries one.
    pub fn parse_value(value: &[u8]) -> Option<BodySum> {
        let text = std::str::from_utf8(value).ok()?;
        let (mut len, mut crc) = (None, None);
        for field in text.split(';') {
            match field.trim().split_once('=') {
                Some(("len", v)) => len = v.trim().parse().ok(),
                Some(("crc", v)) => crc = u32::from_str_radix(v.trim(), 16).ok(),
                _ => {}
            }
        }
        Some(BodySum {
            len: len?,
            crc: crc?,
        })
    }
}

/// A message's trace header as a sink reads it: the trace, and when the header carries a
/// [`BodySum`], whether the body that arrived is the one sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traced {
    /// The trace.
    pub trace: Trace,
    /// `Some(false)` when the body is not the one sent (cut, lengthened or altered);
    /// `None` when the header carries no sum.
    pub intact: Option<bool>,
}

impl Traced {
    /// Finds the trace header in a message's header section and checks the body (every
    /// octet after the section's empty line; none when there is no such line) against the
    /// sum it carries. Headers an MTA added (`Received:`) do not matter: only the body is
    /// compared.
    pub fn find(message: &[u8]) -> Option<Traced> {
        let name = HEADER_NAME.as_bytes();
        let mut found: Option<(Trace, Option<BodySum>)> = None;
        let mut at = 0;
        while at < message.len() {
            let rest = &message[at..];
            let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |p| p + 1);
            let line = &rest[..end];
            at += end;
            if line == b"\r\n" || line == b"\n" {
                break; // end of the header section
            }
            if found.is_none() && starts_with_field(line, name) {
                let value = line[name.len() + 1..].trim_ascii();
                let trace = Trace::parse_value(value)?;
                let sum = BodySum::parse_value(value);
                if sum.is_none() {
                    return Some(Traced {
                        trace,
                        intact: None,
                    });
                }
                found = Some((trace, sum));
            }
        }
        let (trace, sum) = found?;
        Some(Traced {
            trace,
            intact: sum.map(|s| s.matches(&message[at..])),
        })
    }
}

/// What a delivery status notification (RFC 3464) reports of the message it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    /// The returned message's trace header.
    pub trace: Trace,
    /// Recipients it reports failed (`Action: failed`): the MTA gave up on them, a bounce.
    pub failed: u64,
    /// Recipients it reports only late (`Action: delayed`): the MTA still tries them; a
    /// warning to the sender, not a bounce.
    pub delayed: u64,
}

/// Where a notice to the null sender says which message it is about: the trace header
/// among the returned headers (a DSN's `text/rfc822-headers` or `message/rfc822` part),
/// and what it reports of each recipient (its `Action` fields). A notice without any
/// `Action` field is not an RFC 3464 DSN (qmail's bounces are plain text): it is the old
/// form of a bounce, one failed recipient at least. Other actions (`delivered`,
/// `relayed`, `expanded`: success notices) are neither failures nor delays.
pub fn notice(message: &[u8]) -> Option<Notice> {
    let name = HEADER_NAME.as_bytes();
    let mut trace = None;
    let (mut recipients, mut actions, mut failed, mut delayed) = (0u64, 0u64, 0u64, 0u64);
    for line in message.split(|b| *b == b'\n') {
        if trace.is_none() && starts_with_field(line, name) {
            trace = Trace::parse_value(line[name.len() + 1..].trim_ascii());
        } else if starts_with_field(line, b"Final-Recipient") {
            recipients += 1;
        } else if starts_with_field(line, b"Action") {
            actions += 1;
            let value = line[b"Action".len() + 1..].trim_ascii();
            let word = value
                .split(|b| !b.is_ascii_alphabetic())
                .next()
                .unwrap_or_default();
            if word.eq_ignore_ascii_case(b"failed") {
                failed += 1;
            } else if word.eq_ignore_ascii_case(b"delayed") {
                delayed += 1;
            }
        }
    }
    if actions == 0 {
        failed = recipients.max(1);
    }
    trace.map(|trace| Notice {
        trace,
        failed,
        delayed,
    })
}

/// True when `line` is the header field `name` (case-insensitive, followed by ':').
fn starts_with_field(line: &[u8], name: &[u8]) -> bool {
    line.len() > name.len()
        && line[..name.len()].eq_ignore_ascii_case(name)
        && line[name.len()] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_is_found_in_the_header_section_only() {
        let t = Trace {
            run: 0xdead_beef_0000_0001,
            seq: 42,
            sent_us: 1_700_000_000_000_000,
        };
        let mut line = String::new();
        t.write(&mut line);
        assert_eq!(
            line,
            "X-Mailbench-Trace: run=deadbeef00000001; seq=42; t=1700000000000000\r\n"
        );
        let msg = format!("Received: x\r\n{line}Subject: y\r\n\r\nbody\r\n");
        assert_eq!(Trace::find(msg.as_bytes()), Some(t));
        let in_body = format!("Subject: y\r\n\r\n{line}");
        assert_eq!(Trace::find(in_body.as_bytes()), None);
        assert_eq!(Trace::parse_value(b"run=zz; seq=1; t=2"), None);
    }

    /// Issue 42: the body sum goes in its slot, survives headers an MTA adds above it, and
    /// a body cut short (a queue file a power cut truncated), emptied, lengthened or with
    /// one octet changed is told from the one sent; a header without a sum is not judged.
    #[test]
    fn issue_42_a_cut_or_altered_body_is_told_from_the_one_sent() {
        let t = Trace {
            run: 7,
            seq: 3,
            sent_us: 5,
        };
        let body = b"line one\r\nline two\r\n".to_vec();
        let mut line = String::new();
        t.write_with_sum_slot(&mut line);
        let mut line = line.into_bytes();
        let slot = line.len() - 2 - BodySum::WIDTH;
        let sum = BodySum::of(&[&body[..9], &body[9..]]);
        assert_eq!(sum.len, 20);
        // CRC-32's published check value, the one zlib's crc32() gives for "123456789".
        assert_eq!(
            BodySum::of(&[b"1234", b"56789"]),
            BodySum {
                len: 9,
                crc: 0xcbf4_3926
            }
        );
        sum.put(&mut line[slot..slot + BodySum::WIDTH]);
        let line = String::from_utf8(line).expect("ascii");
        assert_eq!(
            line,
            format!(
                "X-Mailbench-Trace: run=0000000000000007; seq=3; t=5; len=0000000020; crc={:08x}\r\n",
                crc32fast::hash(&body)
            )
        );
        let with = |b: &[u8]| {
            let mut m = format!("Received: from lab\r\n\tby sink; now\r\n{line}Subject: y\r\n\r\n")
                .into_bytes();
            m.extend_from_slice(b);
            Traced::find(&m)
        };
        let whole = with(&body).expect("traced");
        assert_eq!((whole.trace, whole.intact), (t, Some(true)));
        assert_eq!(
            Trace::find(line.as_bytes()),
            Some(t),
            "older readers still read it"
        );
        for (what, b) in [
            ("cut", &body[..12]),
            ("empty", &b""[..]),
            ("longer", &b"line one\r\nline two\r\nline 3\r\n"[..]),
            ("altered", &b"line one\r\nline twO\r\n"[..]),
        ] {
            assert_eq!(with(b).and_then(|t| t.intact), Some(false), "{what}");
        }
        // No empty line at all: the header section is all there is, the body empty.
        assert_eq!(
            Traced::find(line.as_bytes()).and_then(|t| t.intact),
            Some(false)
        );
        let old = b"X-Mailbench-Trace: run=0000000000000007; seq=3; t=5\r\n\r\nanything";
        assert_eq!(
            Traced::find(old),
            Some(Traced {
                trace: t,
                intact: None
            })
        );
        assert_eq!(Traced::find(b"Subject: x\r\n\r\nbody"), None);
    }

    #[test]
    fn a_bounce_names_the_message_it_returns_and_its_failed_recipients() {
        let dsn = b"From: MAILER-DAEMON\r\nSubject: Undelivered\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822; a@x\r\nAction: failed\r\n\r\nFinal-Recipient: rfc822; b@x\r\nAction: failed\r\n\r\n--b\r\nContent-Type: text/rfc822-headers\r\n\r\nX-Mailbench-Trace: run=0000000000000007; seq=41; t=5\r\nSubject: x\r\n--b--\r\n";
        let n = notice(dsn).expect("the returned headers carry the trace");
        assert_eq!(
            (n.trace.run, n.trace.seq, n.failed, n.delayed),
            (7, 41, 2, 0)
        );
        assert_eq!(Trace::find(dsn), None, "not the bounce's own header");
        assert_eq!(notice(b"Subject: no trace\r\n\r\nbody\r\n"), None);
    }

    #[test]
    fn issue_40_a_delay_notice_is_no_bounce_and_a_plain_text_bounce_still_is() {
        // OpenSMTPD's warning: the recipient is only late (it was counted as a bounce).
        let delayed = b"From: MAILER-DAEMON@lab\r\nSubject: Delivery status notification: delayed\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; lab\r\n\r\nFinal-Recipient: rfc822; rcpt@example.com\r\nAction: delayed\r\nStatus: 4.0.0\r\n\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nX-Mailbench-Trace: run=0000000000000007; seq=3; t=5\r\n--b--\r\n";
        let n = notice(delayed).expect("it names the message");
        assert_eq!((n.failed, n.delayed), (0, 1), "{n:?}");
        // One recipient failed, one late, one delivered (a mixed report): one bounce.
        let mixed = b"Final-Recipient: rfc822; a@x\r\nAction: failed (bad mailbox)\r\n\r\nFinal-Recipient: rfc822; b@x\r\nAction: Delayed\r\n\r\nFinal-Recipient: rfc822; c@x\r\nAction: delivered\r\n\r\nX-Mailbench-Trace: run=0000000000000007; seq=4; t=5\r\n";
        let n = notice(mixed).expect("it names the message");
        assert_eq!((n.failed, n.delayed), (1, 1), "{n:?}");
        // qmail's bounce is plain text, no DSN fields: a bounce of one recipient.
        let qmail = b"From: MAILER-DAEMON@lab\r\n\r\nHi. This is the qmail-send program.\r\n--- Below this line is a copy of the message.\r\n\r\nX-Mailbench-Trace: run=0000000000000007; seq=5; t=5\r\n";
        let n = notice(qmail).expect("it names the message");
        assert_eq!((n.failed, n.delayed), (1, 0), "{n:?}");
    }
}
