//! The trace header every generated message carries, so a sink — in this process or on
//! another host — can correlate arrivals, find loss and duplicates, and time delivery.
//!
//! Format (one header line, ASCII):
//!
//! ```text
//! X-Mailbench-Trace: run=<run id>; seq=<sequence number>; t=<send time, µs since the Unix epoch>
//! ```
//!
//! `run` is 16 lower-case hex digits, `seq` counts from 0 within the run, `t` is the wall
//! clock when the transaction started. Extra `; key=value` fields may be added later and
//! must be ignored by readers.

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
