//! The client side of a POP3 session (RFC 1939 with APOP, CAPA and PIPELINING from RFC
//! 2449, STLS from RFC 2595, AUTH from RFC 5034) as a sans-IO state machine: commands are encoded
//! into an outbox, responses are matched to them in order. Nothing here touches a socket
//! or a clock; `pop3::conn` drives it.

use std::collections::VecDeque;

use bytes::BytesMut;

use super::reply::{Decoded, ReplyError, Response, ResponseDecoder};

/// One step of a POP3 session whose response is awaited (or, for `Connect`, the TCP
/// handshake): every latency histogram and classified error of a POP3 run is keyed by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// TCP (or unix socket) connection set-up.
    Connect,
    /// The server's greeting.
    Banner,
    /// CAPA.
    Capa,
    /// STLS, until its `+OK`.
    Stls,
    /// The TLS handshake (after STLS, or first thing with POP3S).
    TlsHandshake,
    /// USER and PASS, or AUTH: logging in (Dovecot answers after reading every message
    /// size, so this grows with the mailbox).
    Auth,
    /// STAT.
    Stat,
    /// LIST.
    List,
    /// UIDL.
    Uidl,
    /// RETR, one sample per message.
    Retr,
    /// TOP, one sample per message.
    Top,
    /// DELE, one sample per message.
    Dele,
    /// QUIT (the deletions are made then).
    Quit,
}

impl Phase {
    /// Every phase, in session order.
    pub const ALL: [Phase; 13] = [
        Phase::Connect,
        Phase::Banner,
        Phase::Capa,
        Phase::Stls,
        Phase::TlsHandshake,
        Phase::Auth,
        Phase::Stat,
        Phase::List,
        Phase::Uidl,
        Phase::Retr,
        Phase::Top,
        Phase::Dele,
        Phase::Quit,
    ];

    /// The stable lower-case name used in results files and thresholds.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Banner => "banner",
            Phase::Capa => "capa",
            Phase::Stls => "stls",
            Phase::TlsHandshake => "tls_handshake",
            Phase::Auth => "auth",
            Phase::Stat => "stat",
            Phase::List => "list",
            Phase::Uidl => "uidl",
            Phase::Retr => "retr",
            Phase::Top => "top",
            Phase::Dele => "dele",
            Phase::Quit => "quit",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A POP3 command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// CAPA: the server's capabilities (multi-line).
    Capa,
    /// STLS: start TLS.
    Stls,
    /// USER name.
    User(String),
    /// PASS password.
    Pass(String),
    /// AUTH PLAIN with its initial response (already base64).
    AuthPlain(String),
    /// APOP name digest (see [`apop_digest`]).
    Apop {
        /// The user name.
        user: String,
        /// The hex MD5 of the greeting's timestamp and the password.
        digest: String,
    },
    /// STAT: message count and size.
    Stat,
    /// LIST: every message's size (multi-line).
    List,
    /// UIDL: every message's unique id (multi-line).
    Uidl,
    /// RETR n: the whole message (multi-line).
    Retr(u32),
    /// TOP n lines: the header and the first lines (multi-line).
    Top(u32, u32),
    /// DELE n.
    Dele(u32),
    /// QUIT.
    Quit,
}

/// How many octets of CAPA's listing are kept (the capabilities are read from it). Other
/// bodies are counted, not kept: nothing reads them, and a message is the hot path.
const KEEP_CAPA: usize = 64 << 10;

impl Command {
    /// The phase its response is timed and classified under.
    pub fn phase(&self) -> Phase {
        match self {
            Command::Capa => Phase::Capa,
            Command::Stls => Phase::Stls,
            Command::User(_) | Command::Pass(_) | Command::AuthPlain(_) | Command::Apop { .. } => {
                Phase::Auth
            }
            Command::Stat => Phase::Stat,
            Command::List => Phase::List,
            Command::Uidl => Phase::Uidl,
            Command::Retr(_) => Phase::Retr,
            Command::Top(..) => Phase::Top,
            Command::Dele(_) => Phase::Dele,
            Command::Quit => Phase::Quit,
        }
    }

    /// True when a positive response carries lines up to a `.` line.
    fn multiline(&self) -> bool {
        matches!(
            self,
            Command::Capa | Command::List | Command::Uidl | Command::Retr(_) | Command::Top(..)
        )
    }

    fn keep(&self) -> usize {
        match self {
            Command::Capa => KEEP_CAPA,
            _ => 0,
        }
    }

    /// Appends the command line to `out`.
    fn encode(&self, out: &mut BytesMut) {
        use std::fmt::Write as _;
        let _ = match self {
            Command::Capa => write!(out, "CAPA\r\n"),
            Command::Stls => write!(out, "STLS\r\n"),
            Command::User(u) => write!(out, "USER {u}\r\n"),
            Command::Pass(p) => write!(out, "PASS {p}\r\n"),
            Command::AuthPlain(r) => write!(out, "AUTH PLAIN {r}\r\n"),
            Command::Apop { user, digest } => write!(out, "APOP {user} {digest}\r\n"),
            Command::Stat => write!(out, "STAT\r\n"),
            Command::List => write!(out, "LIST\r\n"),
            Command::Uidl => write!(out, "UIDL\r\n"),
            Command::Retr(n) => write!(out, "RETR {n}\r\n"),
            Command::Top(n, lines) => write!(out, "TOP {n} {lines}\r\n"),
            Command::Dele(n) => write!(out, "DELE {n}\r\n"),
            Command::Quit => write!(out, "QUIT\r\n"),
        };
    }
}

/// One awaited response.
#[derive(Debug, Clone, Copy)]
struct Expect {
    phase: Phase,
    multiline: bool,
    keep: usize,
}

/// The client session: commands out, responses in, in order. One per connection.
#[derive(Debug)]
pub struct Pop3Client {
    out: BytesMut,
    expect: VecDeque<Expect>,
    decoder: ResponseDecoder,
}

impl Default for Pop3Client {
    fn default() -> Self {
        Pop3Client::new()
    }
}

impl Pop3Client {
    /// A session on a freshly opened connection: the greeting comes first.
    pub fn new() -> Pop3Client {
        let mut expect = VecDeque::with_capacity(8);
        expect.push_back(Expect {
            phase: Phase::Banner,
            multiline: false,
            keep: 0,
        });
        Pop3Client {
            out: BytesMut::with_capacity(128),
            expect,
            decoder: ResponseDecoder::default(),
        }
    }

    /// Queues a command; its response is awaited after those queued before it.
    pub fn send(&mut self, cmd: &Command) {
        cmd.encode(&mut self.out);
        self.expect.push_back(Expect {
            phase: cmd.phase(),
            multiline: cmd.multiline(),
            keep: cmd.keep(),
        });
    }

    /// Queues a bare line (a SASL response after a `+ ` continuation), answered under
    /// `phase`.
    pub fn send_line(&mut self, line: &str, phase: Phase) {
        self.out.extend_from_slice(line.as_bytes());
        self.out.extend_from_slice(b"\r\n");
        self.expect.push_back(Expect {
            phase,
            multiline: false,
            keep: 0,
        });
    }

    /// The bytes to write (taken; empty when nothing is queued).
    pub fn take_output(&mut self) -> BytesMut {
        self.out.split()
    }

    /// The phase of the next awaited response, if any.
    pub fn awaiting(&self) -> Option<Phase> {
        self.expect.front().map(|e| e.phase)
    }

    /// Feeds received bytes; returns how many were used and, when one completed, the
    /// response with its phase. Call again with the rest while it returns responses.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<(Phase, Response)>), Pop3Error> {
        let Some(e) = self.expect.front().copied() else {
            return Err(Pop3Error::Unexpected);
        };
        match self.decoder.decode(input, e.multiline, e.keep) {
            Ok(Decoded::Done(r, used)) => {
                self.expect.pop_front();
                Ok((used, Some((e.phase, r))))
            }
            Ok(Decoded::NeedMore) => Ok((input.len(), None)),
            Err(error) => Err(Pop3Error::Reply {
                phase: e.phase,
                error,
            }),
        }
    }
}

/// A server that breaks the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Pop3Error {
    /// Bytes arrived when no response was awaited.
    #[error("POP3 server sent data nobody asked for")]
    Unexpected,
    /// A malformed response.
    #[error("malformed response at {phase}: {error}")]
    Reply {
        /// The step whose response was malformed, charged with the failure.
        phase: Phase,
        /// What was wrong with the response, for the error table's sample.
        error: ReplyError,
    },
}

/// The message count of a `STAT` response (`+OK count size`).
pub fn stat_count(r: &Response) -> Option<u32> {
    r.text.split_whitespace().next()?.parse().ok()
}

/// The APOP digest (RFC 1939 §7): the lower-case hex MD5 of the greeting's timestamp (its
/// `<...>` part, brackets included) followed by the password; `None` when the greeting has
/// no timestamp, i.e. the server does not offer APOP.
pub fn apop_digest(greeting: &str, password: &str) -> Option<String> {
    use md5::{Digest, Md5};
    use std::fmt::Write as _;
    let start = greeting.find('<')?;
    let end = start + greeting[start..].find('>')?;
    let mut md5 = Md5::new();
    md5.update(&greeting.as_bytes()[start..=end]);
    md5.update(password.as_bytes());
    Some(
        md5.finalize()
            .iter()
            .fold(String::with_capacity(32), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            }),
    )
}

/// The capabilities a `CAPA` response lists, upper-cased first words (`PIPELINING`,
/// `STLS`, `USER`, `SASL`, ...).
pub fn capabilities(r: &Response) -> Vec<String> {
    r.body
        .as_ref()
        .map(|b| {
            String::from_utf8_lossy(&b.kept)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .map(|w| w.to_ascii_uppercase())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` and returns every completed (phase, ok) in order.
    fn responses(c: &mut Pop3Client, wire: &[u8]) -> Vec<(Phase, Response)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            let (used, r) = c.feed(&wire[at..]).expect("valid");
            at += used;
            match r {
                Some(r) => out.push(r),
                None => break,
            }
        }
        out
    }

    #[test]
    fn a_pipelined_session_matches_responses_to_commands() {
        let mut c = Pop3Client::new();
        let got = responses(&mut c, b"+OK ready\r\n");
        assert_eq!(got[0].0, Phase::Banner);
        for cmd in [
            Command::Capa,
            Command::User("u@x.test".into()),
            Command::Pass("pw".into()),
            Command::Stat,
            Command::Retr(1),
            Command::Dele(1),
            Command::Quit,
        ] {
            c.send(&cmd);
        }
        assert_eq!(
            &c.take_output()[..],
            b"CAPA\r\nUSER u@x.test\r\nPASS pw\r\nSTAT\r\nRETR 1\r\nDELE 1\r\nQUIT\r\n"
        );
        let wire = b"+OK\r\nPIPELINING\r\nUSER\r\n.\r\n+OK\r\n+OK Logged in.\r\n+OK 1 20\r\n+OK 20 octets\r\nSubject: a\r\n\r\nhi\r\n.\r\n+OK Marked to be deleted.\r\n+OK Logging out.\r\n";
        let got = responses(&mut c, wire);
        let phases: Vec<Phase> = got.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            phases,
            [
                Phase::Capa,
                Phase::Auth,
                Phase::Auth,
                Phase::Stat,
                Phase::Retr,
                Phase::Dele,
                Phase::Quit
            ]
        );
        assert_eq!(capabilities(&got[0].1), ["PIPELINING", "USER"]);
        assert_eq!(stat_count(&got[3].1), Some(1));
        assert_eq!(got[4].1.body.as_ref().map(|b| b.octets), Some(18));
        assert_eq!(c.awaiting(), None);
    }

    #[test]
    fn an_error_to_a_multi_line_command_has_no_body() {
        let mut c = Pop3Client::new();
        responses(&mut c, b"+OK\r\n");
        c.send(&Command::Retr(9));
        c.send(&Command::Dele(1));
        let got = responses(&mut c, b"-ERR There's no message 9.\r\n+OK\r\n");
        assert!(!got[0].1.ok && got[0].1.body.is_none());
        assert_eq!(got[1].0, Phase::Dele);
    }

    #[test]
    fn the_apop_digest_is_rfc_1939s_example() {
        // RFC 1939 §7: greeting timestamp, secret "tanstaaf", and the digest it gives.
        let greeting = "POP3 server ready <1896.697170952@dbc.mtview.ca.us>";
        assert_eq!(
            apop_digest(greeting, "tanstaaf").as_deref(),
            Some("c4c9334bac560ecc979e58001b3e22fb")
        );
        assert_eq!(apop_digest("Dovecot ready.", "tanstaaf"), None);
        let mut c = Pop3Client::new();
        c.send(&Command::Apop {
            user: "mrose".into(),
            digest: "c4c9334bac560ecc979e58001b3e22fb".into(),
        });
        assert_eq!(
            &c.take_output()[..],
            b"APOP mrose c4c9334bac560ecc979e58001b3e22fb\r\n"
        );
        assert_eq!(
            c.awaiting(),
            Some(Phase::Banner),
            "the greeting is still awaited"
        );
    }

    #[test]
    fn data_nobody_asked_for_is_an_error() {
        let mut c = Pop3Client::new();
        responses(&mut c, b"+OK\r\n");
        assert_eq!(c.feed(b"+OK\r\n"), Err(Pop3Error::Unexpected));
    }
}
