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

/// Where a bounce says which message it is about: the trace header among the returned
/// headers (a DSN's `text/rfc822-headers` or `message/rfc822` part), and how many
/// recipients it reports as failed (its `Final-Recipient` fields, at least one).
pub fn bounced(message: &[u8]) -> Option<(Trace, u64)> {
    let name = HEADER_NAME.as_bytes();
    let mut trace = None;
    let mut recipients = 0;
    for line in message.split(|b| *b == b'\n') {
        if trace.is_none() && starts_with_field(line, name) {
            trace = Trace::parse_value(line[name.len() + 1..].trim_ascii());
        } else if starts_with_field(line, b"Final-Recipient") {
            recipients += 1;
        }
    }
    trace.map(|t| (t, recipients.max(1)))
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
        let dsn = b"From: MAILER-DAEMON\r\nSubject: Undelivered\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822; a@x\r\nAction: failed\r\n\r\nFinal-Recipient: rfc822; b@x\r\n\r\n--b\r\nContent-Type: text/rfc822-headers\r\n\r\nX-Mailbench-Trace: run=0000000000000007; seq=41; t=5\r\nSubject: x\r\n--b--\r\n";
        let (t, n) = bounced(dsn).expect("the returned headers carry the trace");
        assert_eq!((t.run, t.seq, n), (7, 41, 2));
        assert_eq!(Trace::find(dsn), None, "not the bounce's own header");
        assert_eq!(bounced(b"Subject: no trace\r\n\r\nbody\r\n"), None);
    }
}
