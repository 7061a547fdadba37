//! The client side of an IMAP session (RFC 9051, with LITERAL+ from RFC 7888, IDLE from
//! RFC 2177, SASL-IR from RFC 4959) as a sans-IO state machine: commands are tagged and
//! encoded into an outbox, responses are framed, parsed and matched to their commands by
//! tag. A synchronising literal (APPEND without LITERAL+) waits in the client until the
//! server's continuation request. Nothing here touches a socket or a clock; `imap::conn`
//! drives it.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::frame::{FrameError, Framer};
use super::response::{Code, Cond, Data, ParseError, Response, parse};

/// One step of an IMAP session whose completion is awaited (or, for `Connect`, the TCP
/// handshake): every latency histogram and classified error of an IMAP run is keyed by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// TCP (or unix socket) connection set-up.
    Connect,
    /// The server's greeting.
    Banner,
    /// CAPABILITY.
    Capability,
    /// STARTTLS, until its OK.
    Starttls,
    /// The TLS handshake (after STARTTLS, or first thing with IMAPS).
    TlsHandshake,
    /// LOGIN or AUTHENTICATE PLAIN.
    Login,
    /// SELECT or EXAMINE (a mailbox opened: its counts and flags arrive).
    Select,
    /// CLOSE (the mailbox left, its `\Deleted` messages expunged).
    Close,
    /// LIST.
    List,
    /// STATUS.
    Status,
    /// FETCH of metadata (UID, FLAGS, sizes, ENVELOPE, BODYSTRUCTURE) over a range.
    Fetch,
    /// FETCH of a whole message body.
    FetchBody,
    /// FETCH of one section of a message, drawn as imaptest's FETCH2 draws it.
    FetchPart,
    /// SEARCH.
    Search,
    /// STORE of flags.
    Store,
    /// STORE of `\Deleted` (marking for EXPUNGE).
    Delete,
    /// EXPUNGE.
    Expunge,
    /// COPY.
    Copy,
    /// CREATE (a missing target of COPY, MOVE or APPEND).
    Create,
    /// MOVE (RFC 6851).
    Move,
    /// APPEND.
    Append,
    /// NOOP (a poll for changes).
    Noop,
    /// IDLE, until the server's continuation request.
    Idle,
    /// LOGOUT.
    Logout,
}

impl Phase {
    /// Every phase, in session order.
    pub const ALL: [Phase; 24] = [
        Phase::Connect,
        Phase::Banner,
        Phase::Capability,
        Phase::Starttls,
        Phase::TlsHandshake,
        Phase::Login,
        Phase::Select,
        Phase::Close,
        Phase::List,
        Phase::Status,
        Phase::Fetch,
        Phase::FetchBody,
        Phase::FetchPart,
        Phase::Search,
        Phase::Store,
        Phase::Delete,
        Phase::Expunge,
        Phase::Copy,
        Phase::Create,
        Phase::Move,
        Phase::Append,
        Phase::Noop,
        Phase::Idle,
        Phase::Logout,
    ];

    /// The stable lower-case name used in results files, thresholds and `--mix`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Banner => "banner",
            Phase::Capability => "capability",
            Phase::Starttls => "starttls",
            Phase::TlsHandshake => "tls_handshake",
            Phase::Login => "login",
            Phase::Select => "select",
            Phase::Close => "close",
            Phase::List => "list",
            Phase::Status => "status",
            Phase::Fetch => "fetch",
            Phase::FetchBody => "fetch_body",
            Phase::FetchPart => "fetch_part",
            Phase::Search => "search",
            Phase::Store => "store",
            Phase::Delete => "delete",
            Phase::Expunge => "expunge",
            Phase::Copy => "copy",
            Phase::Create => "create",
            Phase::Move => "move",
            Phase::Append => "append",
            Phase::Noop => "noop",
            Phase::Idle => "idle",
            Phase::Logout => "logout",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a FETCH asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchItems {
    /// What a client lists a mailbox with: UID, FLAGS, RFC822.SIZE, ENVELOPE and
    /// BODYSTRUCTURE.
    Meta,
    /// UID and FLAGS only (learning a mailbox's UIDs).
    Flags,
    /// UID, RFC822.SIZE and the whole message, without setting `\Seen`.
    Body,
    /// The whole message, setting `\Seen` (a user reading it).
    Read,
    /// UID and one section, without setting `\Seen`.
    Part(Section),
}

/// A section of a message that a reader asks for alone: imaptest's FETCH2 draws one of
/// these five for each command, so a mix with `fetch_part` moves the octets it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `BODY.PEEK[HEADER]`.
    Header,
    /// `RFC822.HEADER` (the same octets, RFC 3501's older name).
    Rfc822Header,
    /// `BODY.PEEK[]`: the whole message.
    Whole,
    /// `BODY.PEEK[1]`: the first part (a single-part message's text).
    First,
    /// `BODY.PEEK[TEXT]`: everything after the header.
    Text,
}

impl Section {
    /// Every section, as imaptest lists them.
    pub const ALL: [Section; 5] = [
        Section::Header,
        Section::Rfc822Header,
        Section::Whole,
        Section::First,
        Section::Text,
    ];
}

impl FetchItems {
    fn text(self) -> &'static str {
        match self {
            FetchItems::Meta => "(UID FLAGS RFC822.SIZE ENVELOPE BODYSTRUCTURE)",
            FetchItems::Flags => "(UID FLAGS)",
            FetchItems::Body => "(UID RFC822.SIZE BODY.PEEK[])",
            FetchItems::Read => "(UID RFC822.SIZE FLAGS BODY[])",
            FetchItems::Part(Section::Header) => "(UID BODY.PEEK[HEADER])",
            FetchItems::Part(Section::Rfc822Header) => "(UID RFC822.HEADER)",
            FetchItems::Part(Section::Whole) => "(UID BODY.PEEK[])",
            FetchItems::Part(Section::First) => "(UID BODY.PEEK[1])",
            FetchItems::Part(Section::Text) => "(UID BODY.PEEK[TEXT])",
        }
    }
}

/// A flag change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagOp {
    /// `+FLAGS`.
    Add,
    /// `-FLAGS`.
    Remove,
}

/// An IMAP command. Mailbox names and credentials are sent as quoted strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// CAPABILITY.
    Capability,
    /// STARTTLS.
    Starttls,
    /// LOGIN user password.
    Login {
        /// The user name.
        user: String,
        /// The password.
        pass: String,
    },
    /// AUTHENTICATE PLAIN with its initial response (already base64; SASL-IR).
    AuthPlain(String),
    /// SELECT mailbox (EXAMINE when `read_only`).
    Select {
        /// The mailbox.
        mailbox: String,
        /// EXAMINE instead.
        read_only: bool,
    },
    /// `LIST "" "*"`.
    List,
    /// STATUS mailbox (MESSAGES UIDNEXT UNSEEN).
    Status(String),
    /// FETCH first:last items.
    Fetch {
        /// First sequence number.
        first: u32,
        /// Last sequence number.
        last: u32,
        /// What to fetch.
        items: FetchItems,
    },
    /// `UID FETCH first:* (UID BODY.PEEK[HEADER.FIELDS (field)])`: one header of every
    /// message from a UID on (what arrived since).
    FetchHeader {
        /// The first UID.
        first_uid: u32,
        /// The header field's name.
        field: &'static str,
    },
    /// `UID SEARCH criteria` (`ALL`: every UID of the mailbox).
    Search(&'static str),
    /// STORE seq ±FLAGS (flag); `.SILENT` for `\Deleted`.
    Store {
        /// The message.
        seq: u32,
        /// Add or remove.
        op: FlagOp,
        /// The flag.
        flag: &'static str,
    },
    /// EXPUNGE.
    Expunge,
    /// CLOSE.
    Close,
    /// CREATE mailbox.
    Create(String),
    /// COPY seq mailbox.
    Copy {
        /// The message.
        seq: u32,
        /// Where to.
        mailbox: String,
    },
    /// MOVE seq mailbox (RFC 6851).
    Move {
        /// The message.
        seq: u32,
        /// Where to.
        mailbox: String,
    },
    /// APPEND mailbox (flags) literal.
    Append {
        /// Where to.
        mailbox: String,
        /// Flags to set, space-separated (may be empty).
        flags: &'static str,
        /// The message.
        message: Bytes,
        /// Send the literal without waiting (LITERAL+ offered).
        literal_plus: bool,
    },
    /// NOOP.
    Noop,
    /// IDLE (ended by [`ImapClient::done`]).
    Idle,
    /// LOGOUT.
    Logout,
}

impl Command {
    /// The phase its completion is timed and classified under.
    pub fn phase(&self) -> Phase {
        match self {
            Command::Capability => Phase::Capability,
            Command::Starttls => Phase::Starttls,
            Command::Login { .. } | Command::AuthPlain(_) => Phase::Login,
            Command::Select { .. } => Phase::Select,
            Command::List => Phase::List,
            Command::Status(_) => Phase::Status,
            Command::Fetch {
                items: FetchItems::Body | FetchItems::Read,
                ..
            } => Phase::FetchBody,
            Command::Fetch {
                items: FetchItems::Part(_),
                ..
            } => Phase::FetchPart,
            Command::Fetch { .. } | Command::FetchHeader { .. } => Phase::Fetch,
            Command::Search(_) => Phase::Search,
            Command::Store {
                flag: DELETED,
                op: FlagOp::Add,
                ..
            } => Phase::Delete,
            Command::Store { .. } => Phase::Store,
            Command::Expunge => Phase::Expunge,
            Command::Close => Phase::Close,
            Command::Copy { .. } => Phase::Copy,
            Command::Create(_) => Phase::Create,
            Command::Move { .. } => Phase::Move,
            Command::Append { .. } => Phase::Append,
            Command::Noop => Phase::Noop,
            Command::Idle => Phase::Idle,
            Command::Logout => Phase::Logout,
        }
    }

    /// Appends `tag command` to `out`; returns the literal that must wait for the
    /// server's continuation request, if any. Written octet by octet, not through
    /// `write!`: the formatting machinery cost about 500 instructions per command, more
    /// than the rest of sending it.
    fn encode(&self, tag: u32, out: &mut BytesMut) -> Option<Bytes> {
        let mut w = Out(out);
        w.put(b"a").num(tag).put(b" ");
        match self {
            Command::Capability => w.put(b"CAPABILITY"),
            Command::Starttls => w.put(b"STARTTLS"),
            Command::Login { user, pass } => w.put(b"LOGIN ").quoted(user).put(b" ").quoted(pass),
            Command::AuthPlain(r) => w.put(b"AUTHENTICATE PLAIN ").put(r.as_bytes()),
            Command::Select { mailbox, read_only } => {
                let verb: &[u8] = if *read_only { b"EXAMINE " } else { b"SELECT " };
                w.put(verb).quoted(mailbox)
            }
            Command::List => w.put(b"LIST \"\" \"*\""),
            Command::Status(m) => w
                .put(b"STATUS ")
                .quoted(m)
                .put(b" (MESSAGES UIDNEXT UNSEEN)"),
            Command::Fetch { first, last, items } => {
                w.put(b"FETCH ").num(*first);
                if first != last {
                    w.put(b":").num(*last);
                }
                w.put(b" ").put(items.text().as_bytes())
            }
            Command::FetchHeader { first_uid, field } => w
                .put(b"UID FETCH ")
                .num(*first_uid)
                .put(b":* (UID BODY.PEEK[HEADER.FIELDS (")
                .put(field.as_bytes())
                .put(b")])"),
            Command::Search(criteria) => w.put(b"UID SEARCH ").put(criteria.as_bytes()),
            Command::Store { seq, op, flag } => {
                let sign: &[u8] = if *op == FlagOp::Add {
                    b" +FLAGS ("
                } else {
                    b" -FLAGS ("
                };
                w.put(b"STORE ")
                    .num(*seq)
                    .put(sign)
                    .put(flag.as_bytes())
                    .put(b")")
            }
            Command::Expunge => w.put(b"EXPUNGE"),
            Command::Close => w.put(b"CLOSE"),
            Command::Create(m) => w.put(b"CREATE ").quoted(m),
            Command::Copy { seq, mailbox } => w.put(b"COPY ").num(*seq).put(b" ").quoted(mailbox),
            Command::Move { seq, mailbox } => w.put(b"MOVE ").num(*seq).put(b" ").quoted(mailbox),
            Command::Append {
                mailbox,
                flags,
                message,
                literal_plus,
            } => {
                let close: &[u8] = if *literal_plus { b"+}\r\n" } else { b"}\r\n" };
                w.put(b"APPEND ")
                    .quoted(mailbox)
                    .put(b" (")
                    .put(flags.as_bytes())
                    .put(b") {")
                    .num(message.len())
                    .put(close);
                if !*literal_plus {
                    return Some(message.clone());
                }
                w.put(message)
            }
            Command::Noop => w.put(b"NOOP"),
            Command::Idle => w.put(b"IDLE"),
            Command::Logout => w.put(b"LOGOUT"),
        };
        out.extend_from_slice(b"\r\n");
        None
    }
}

/// The outbox being written: octets, decimal numbers and quoted strings, chained.
struct Out<'a>(&'a mut BytesMut);

impl Out<'_> {
    fn put(&mut self, octets: &[u8]) -> &mut Self {
        self.0.extend_from_slice(octets);
        self
    }

    fn num(&mut self, n: impl itoa::Integer) -> &mut Self {
        self.put(itoa::Buffer::new().format(n).as_bytes())
    }

    /// `s` as an IMAP quoted string (RFC 9051 §4.3): `"` and `\` escaped.
    fn quoted(&mut self, s: &str) -> &mut Self {
        self.put(b"\"");
        for part in s.as_bytes().split_inclusive(|b| matches!(b, b'"' | b'\\')) {
            match part.split_last() {
                Some((last @ (b'"' | b'\\'), head)) => {
                    self.put(head).put(b"\\").put(&[*last]);
                }
                _ => {
                    self.put(part);
                }
            }
        }
        self.put(b"\"")
    }
}

/// The system flag that marks a message for EXPUNGE.
pub const DELETED: &str = "\\Deleted";

/// A response that breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImapError {
    /// Framing failed (a line or literal beyond the limits).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A response could not be parsed.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A tagged completion for no command in flight.
    #[error("IMAP completion for a tag never sent")]
    UnknownTag,
    /// A continuation request nothing waits for.
    #[error("IMAP continuation request without a literal or IDLE waiting")]
    UnexpectedContinuation,
}

/// What one response meant to the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Untagged data.
    Data(Data),
    /// The server asks for the rest of the command; anything that waited for it is now in
    /// the outbox.
    Continue,
    /// A command completed.
    Done(Completion),
}

/// A command's completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Its tag number.
    pub tag: u32,
    /// Its phase.
    pub phase: Phase,
    /// OK, NO or BAD.
    pub cond: Cond,
    /// The response code.
    pub code: Option<Code>,
    /// The text.
    pub text: String,
}

/// The client session: commands out, responses in. One per connection.
#[derive(Debug, Default)]
pub struct ImapClient {
    out: BytesMut,
    next_tag: u32,
    in_flight: VecDeque<(u32, Phase)>,
    /// A synchronising literal waiting for `+`.
    held: Option<Bytes>,
    /// IDLE sent, its `+` not seen yet.
    idle_pending: bool,
    framer: Framer,
}

impl ImapClient {
    /// A client before the greeting.
    pub fn new() -> ImapClient {
        ImapClient::default()
    }

    /// Encodes `cmd` into the outbox; returns its tag number.
    pub fn send(&mut self, cmd: &Command) -> u32 {
        self.next_tag += 1;
        let tag = self.next_tag;
        if let Some(lit) = cmd.encode(tag, &mut self.out) {
            self.held = Some(lit);
        }
        self.idle_pending |= matches!(cmd, Command::Idle);
        self.in_flight.push_back((tag, cmd.phase()));
        tag
    }

    /// Ends an IDLE: `DONE` into the outbox.
    pub fn done(&mut self) {
        self.out.extend_from_slice(b"DONE\r\n");
    }

    /// What is to be written: written from here, then [`ImapClient::clear_output`] (the
    /// buffer is kept for the next command, never handed out).
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Forgets what [`ImapClient::output`] showed, once it is written.
    pub fn clear_output(&mut self) {
        self.out.clear();
    }

    /// The phase of the oldest command in flight (what a timeout or a lost connection
    /// interrupted), if any.
    pub fn awaiting(&self) -> Option<Phase> {
        self.in_flight.front().map(|(_, p)| *p)
    }

    /// Decodes the next response from `buf`: `Ok(None)` when it has not all arrived
    /// (nothing is consumed), else the octets it used and what it meant.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Option<(usize, Event)>, ImapError> {
        let Some(frame) = self.framer.next(buf)? else {
            return Ok(None);
        };
        let parsed = parse(buf, &frame);
        let used = frame.len;
        self.framer.recycle(frame);
        let event = match parsed? {
            Response::Untagged(d) => Event::Data(d),
            Response::Continuation => {
                if let Some(lit) = self.held.take() {
                    self.out.extend_from_slice(&lit);
                    self.out.extend_from_slice(b"\r\n");
                } else if !std::mem::take(&mut self.idle_pending) {
                    return Err(ImapError::UnexpectedContinuation);
                }
                Event::Continue
            }
            Response::Tagged {
                tag,
                cond,
                code,
                text,
            } => {
                let at = tag
                    .and_then(|t| self.in_flight.iter().position(|(x, _)| *x == t))
                    .ok_or(ImapError::UnknownTag)?;
                let Some((tag, phase)) = self.in_flight.remove(at) else {
                    return Err(ImapError::UnknownTag);
                };
                if phase == Phase::Append {
                    // A refused APPEND never gets its literal.
                    self.held = None;
                }
                self.idle_pending &= phase != Phase::Idle;
                Event::Done(Completion {
                    tag,
                    phase,
                    cond,
                    code,
                    text,
                })
            }
        };
        Ok(Some((used, event)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(c: &mut ImapClient) -> String {
        let out = String::from_utf8(c.output().to_vec()).unwrap();
        c.clear_output();
        out
    }

    fn feed_all(c: &mut ImapClient, input: &[u8]) -> Vec<Event> {
        let mut buf = input.to_vec();
        let mut out = Vec::new();
        while let Some((used, e)) = c.feed(&buf).expect("valid") {
            buf.drain(..used);
            out.push(e);
        }
        assert!(
            buf.is_empty(),
            "left over: {:?}",
            String::from_utf8_lossy(&buf)
        );
        out
    }

    #[test]
    fn commands_are_tagged_and_encoded() {
        let mut c = ImapClient::new();
        c.send(&Command::Login {
            user: "u\"1".into(),
            pass: "p\\w".into(),
        });
        c.send(&Command::Select {
            mailbox: "INBOX".into(),
            read_only: false,
        });
        c.send(&Command::Fetch {
            first: 1,
            last: 5,
            items: FetchItems::Meta,
        });
        c.send(&Command::Store {
            seq: 3,
            op: FlagOp::Remove,
            flag: "\\Seen",
        });
        assert_eq!(
            wire(&mut c),
            "a1 LOGIN \"u\\\"1\" \"p\\\\w\"\r\na2 SELECT \"INBOX\"\r\n\
             a3 FETCH 1:5 (UID FLAGS RFC822.SIZE ENVELOPE BODYSTRUCTURE)\r\n\
             a4 STORE 3 -FLAGS (\\Seen)\r\n"
        );
        assert_eq!(c.awaiting(), Some(Phase::Login));
    }

    #[test]
    fn every_command_is_encoded_as_rfc_9051_spells_it() {
        let mut c = ImapClient::new();
        let cases: Vec<(Command, &str)> = vec![
            (Command::Capability, "CAPABILITY"),
            (Command::Starttls, "STARTTLS"),
            (
                Command::AuthPlain("AHUAcA==".into()),
                "AUTHENTICATE PLAIN AHUAcA==",
            ),
            (
                Command::Select {
                    mailbox: "a \\b\"".into(),
                    read_only: true,
                },
                "EXAMINE \"a \\\\b\\\"\"",
            ),
            (Command::List, "LIST \"\" \"*\""),
            (
                Command::Status("INBOX".into()),
                "STATUS \"INBOX\" (MESSAGES UIDNEXT UNSEEN)",
            ),
            (
                Command::Fetch {
                    first: 7,
                    last: 7,
                    items: FetchItems::Body,
                },
                "FETCH 7 (UID RFC822.SIZE BODY.PEEK[])",
            ),
            (
                Command::Fetch {
                    first: 4_000_000_000,
                    last: 4_294_967_295,
                    items: FetchItems::Read,
                },
                "FETCH 4000000000:4294967295 (UID RFC822.SIZE FLAGS BODY[])",
            ),
            // imaptest's FETCH2 sections, as its client-state.c spells them.
            (
                Command::Fetch {
                    first: 3,
                    last: 3,
                    items: FetchItems::Part(Section::Header),
                },
                "FETCH 3 (UID BODY.PEEK[HEADER])",
            ),
            (
                Command::Fetch {
                    first: 3,
                    last: 3,
                    items: FetchItems::Part(Section::Rfc822Header),
                },
                "FETCH 3 (UID RFC822.HEADER)",
            ),
            (
                Command::Fetch {
                    first: 3,
                    last: 3,
                    items: FetchItems::Part(Section::Whole),
                },
                "FETCH 3 (UID BODY.PEEK[])",
            ),
            (
                Command::Fetch {
                    first: 3,
                    last: 3,
                    items: FetchItems::Part(Section::First),
                },
                "FETCH 3 (UID BODY.PEEK[1])",
            ),
            (
                Command::Fetch {
                    first: 3,
                    last: 3,
                    items: FetchItems::Part(Section::Text),
                },
                "FETCH 3 (UID BODY.PEEK[TEXT])",
            ),
            (
                Command::FetchHeader {
                    first_uid: 12,
                    field: "Message-ID",
                },
                "UID FETCH 12:* (UID BODY.PEEK[HEADER.FIELDS (Message-ID)])",
            ),
            (Command::Search("ALL"), "UID SEARCH ALL"),
            (
                Command::Store {
                    seq: 10,
                    op: FlagOp::Add,
                    flag: DELETED,
                },
                "STORE 10 +FLAGS (\\Deleted)",
            ),
            (Command::Expunge, "EXPUNGE"),
            (Command::Close, "CLOSE"),
            (Command::Create("Archive".into()), "CREATE \"Archive\""),
            (
                Command::Copy {
                    seq: 0,
                    mailbox: String::new(),
                },
                "COPY 0 \"\"",
            ),
            (
                Command::Move {
                    seq: 99,
                    mailbox: "\"".into(),
                },
                "MOVE 99 \"\\\"\"",
            ),
            (Command::Noop, "NOOP"),
            (Command::Idle, "IDLE"),
            (Command::Logout, "LOGOUT"),
        ];
        let mut want = String::new();
        for (i, (cmd, text)) in cases.iter().enumerate() {
            c.send(cmd);
            want.push_str(&format!("a{} {text}\r\n", i + 1));
        }
        assert_eq!(wire(&mut c), want);
    }

    #[test]
    fn completions_match_their_commands_by_tag() {
        let mut c = ImapClient::new();
        c.send(&Command::Noop);
        c.send(&Command::Fetch {
            first: 2,
            last: 2,
            items: FetchItems::Flags,
        });
        let events = feed_all(
            &mut c,
            b"* 3 EXISTS\r\na1 OK NOOP done\r\n* 2 FETCH (UID 5 FLAGS ())\r\na2 NO gone\r\n",
        );
        assert_eq!(events.len(), 4);
        assert!(matches!(events[0], Event::Data(Data::Exists(3))));
        let Event::Done(d) = &events[1] else { panic!() };
        assert_eq!((d.tag, d.phase, d.cond), (1, Phase::Noop, Cond::Ok));
        let Event::Done(d) = &events[3] else { panic!() };
        assert_eq!((d.tag, d.phase, d.cond), (2, Phase::Fetch, Cond::No));
        assert_eq!(c.awaiting(), None);
        assert_eq!(c.feed(b"a9 OK what\r\n"), Err(ImapError::UnknownTag));
    }

    #[test]
    fn a_synchronising_literal_waits_for_the_continuation() {
        let mut c = ImapClient::new();
        let message = Bytes::from_static(b"Subject: x\r\n\r\nhi\r\n");
        c.send(&Command::Append {
            mailbox: "INBOX".into(),
            flags: "\\Seen",
            message: message.clone(),
            literal_plus: false,
        });
        assert_eq!(wire(&mut c), "a1 APPEND \"INBOX\" (\\Seen) {18}\r\n");
        assert_eq!(feed_all(&mut c, b"+ OK\r\n"), vec![Event::Continue]);
        assert_eq!(wire(&mut c), "Subject: x\r\n\r\nhi\r\n\r\n");
        let mut plus = ImapClient::new();
        plus.send(&Command::Append {
            mailbox: "INBOX".into(),
            flags: "",
            message,
            literal_plus: true,
        });
        assert_eq!(
            wire(&mut plus),
            "a1 APPEND \"INBOX\" () {18+}\r\nSubject: x\r\n\r\nhi\r\n\r\n"
        );
        assert_eq!(
            plus.feed(b"+ go\r\n"),
            Err(ImapError::UnexpectedContinuation)
        );
    }

    #[test]
    fn idle_is_continued_then_done() {
        let mut c = ImapClient::new();
        c.send(&Command::Idle);
        let events = feed_all(&mut c, b"+ idling\r\n* 4 EXISTS\r\n");
        assert_eq!(events[0], Event::Continue);
        c.done();
        assert_eq!(wire(&mut c), "a1 IDLE\r\nDONE\r\n");
        let events = feed_all(&mut c, b"a1 OK Idle completed.\r\n");
        assert!(matches!(&events[0], Event::Done(d) if d.phase == Phase::Idle));
    }

    #[test]
    fn deletion_is_its_own_phase() {
        let del = Command::Store {
            seq: 1,
            op: FlagOp::Add,
            flag: DELETED,
        };
        assert_eq!(del.phase(), Phase::Delete);
        let undel = Command::Store {
            seq: 1,
            op: FlagOp::Remove,
            flag: DELETED,
        };
        assert_eq!(undel.phase(), Phase::Store);
    }
}
