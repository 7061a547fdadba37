//! The server side of an SMTP/LMTP session as a sans-IO state machine, on smtp-proto's
//! request, DATA and BDAT receivers.
//!
//! [`ServerSession::feed`] takes whatever bytes arrived and appends the replies to an
//! output queue, batching every reply that a pipelined read produced into one write. What
//! to answer (accept, refuse, delay, drop the connection) is decided by a [`Handler`] the IO
//! layer supplies, so fault injection stays outside and this core stays deterministic and
//! testable without sockets. A complete message pauses the session
//! ([`ServerSession::received`]) until the IO layer, which may store it on disk without
//! blocking other connections, answers with [`ServerSession::finish`].

use std::fmt::Write as _;
use std::time::Duration;

pub use super::handler::{Command, Decision, Envelope, Handler, Out, Received, Verdict, reply};
use crate::sasl;
use smtp_proto::Request;
use smtp_proto::request::receiver::{BdatReceiver, DataReceiver, RequestReceiver};

/// Which extensions the server advertises (each can be switched off, as smtp-sink allows).
/// The default offers every one, as `sink.mailbench.test`, up to 50 MiB.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerConfig {
    /// Name in the greeting and EHLO reply.
    pub hostname: String,
    /// Speak LMTP (LHLO; a reply per recipient after the content).
    pub lmtp: bool,
    /// Largest message accepted (SIZE); larger ones get 552.
    pub max_message_size: usize,
    /// PIPELINING.
    pub pipelining: bool,
    /// 8BITMIME.
    pub eight_bit_mime: bool,
    /// ENHANCEDSTATUSCODES.
    pub enhanced_status_codes: bool,
    /// STARTTLS (the IO layer must have a certificate).
    pub starttls: bool,
    /// AUTH PLAIN LOGIN.
    pub auth: bool,
    /// CHUNKING (BDAT).
    pub chunking: bool,
    /// SMTPUTF8.
    pub smtputf8: bool,
    /// DSN.
    pub dsn: bool,
}

/// The name a server greets with unless told otherwise.
pub const HOSTNAME: &str = "sink.mailbench.test";

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            hostname: HOSTNAME.into(),
            lmtp: false,
            max_message_size: 50 << 20,
            pipelining: true,
            eight_bit_mime: true,
            enhanced_status_codes: true,
            starttls: true,
            auth: true,
            chunking: true,
            smtputf8: true,
            dsn: true,
        }
    }
}

enum State {
    Command,
    Data(DataReceiver),
    Bdat(BdatReceiver),
    /// AUTH continuation lines: how many are still expected, and whether they are LOGIN's
    /// user name and password (true) or one PLAIN response (false).
    AuthLines(u8, bool),
    /// A message is complete; input waits until [`ServerSession::finish`].
    Received,
    Closed,
}

/// Counts of what a session saw, read by the IO layer after each feed. Messages the
/// session accepted are the IO layer's to count: one is delivered only once its reply
/// reached the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Negative replies sent, not counting those that only repeat an earlier refusal in
    /// the same transaction (RCPT 503 after a refused MAIL, DATA 554 after every recipient
    /// was refused).
    pub rejected: u64,
    /// Transactions (MAIL accepted).
    pub transactions: u64,
    /// Transaction attempts (from MAIL to the final reply) that ended without the message
    /// being accepted because this server refused it: MAIL, every RCPT, DATA or the end
    /// of data refused, or the connection dropped or shut down by the server.
    pub refused: u64,
    /// Transaction attempts the client gave up on: RSET, QUIT or a closed connection while
    /// it still had accepted recipients and no refusal.
    pub abandoned: u64,
    /// Protocol errors from the client (unknown command, bad syntax, line too long).
    pub protocol_errors: u64,
}

/// A transaction attempt in progress, from MAIL (accepted or not) to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// No attempt open.
    None,
    /// Open; `refused` once MAIL or a RCPT was refused.
    Open { refused: bool },
}

/// The server session. One per connection.
pub struct ServerSession {
    cfg: ServerConfig,
    state: State,
    requests: RequestReceiver,
    env: Envelope,
    body: Vec<u8>,
    oversize: bool,
    out: Vec<Out>,
    pending: Vec<u8>,
    helo_done: bool,
    tls_active: bool,
    auth_buf: Vec<u8>,
    auth_user: String,
    attempt: Attempt,
    /// Counters since the session started.
    pub counts: SessionCounts,
}

impl ServerSession {
    /// A new session; the greeting is queued (or the connection refused) per the handler.
    pub fn new(cfg: ServerConfig, tls_active: bool, h: &mut dyn Handler) -> Self {
        let mut s = ServerSession {
            cfg,
            state: State::Command,
            requests: RequestReceiver::default(),
            env: Envelope::default(),
            body: Vec::new(),
            oversize: false,
            out: Vec::new(),
            pending: Vec::with_capacity(256),
            helo_done: false,
            tls_active,
            auth_buf: Vec::new(),
            auth_user: String::new(),
            attempt: Attempt::None,
            counts: SessionCounts::default(),
        };
        let d = h.decide(Command::Connect, &s.env, "");
        let greeting = format!(
            "{} {}",
            s.cfg.hostname,
            if s.cfg.lmtp {
                "LMTP"
            } else {
                "ESMTP mailbench"
            }
        );
        s.respond(d, 220, "", &greeting);
        s
    }

    /// True once the session has ended.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Takes the queued output; the IO layer performs it in order.
    pub fn take_output(&mut self, into: &mut Vec<Out>) {
        self.flush_pending();
        into.append(&mut self.out);
    }

    /// Feeds received bytes; replies are queued. Returns how many bytes were consumed: all
    /// of them, unless a message completed ([`ServerSession::received`]); the rest must be
    /// fed again after [`ServerSession::finish`]. Bytes after a STARTTLS request or after the
    /// session closed are consumed and discarded (RFC 3207 §4.2: no plaintext may follow).
    pub fn feed(&mut self, input: &[u8], h: &mut dyn Handler) -> usize {
        let mut iter = input.iter();
        while iter.len() > 0 {
            match &mut self.state {
                State::Closed => break,
                State::Received => return input.len() - iter.len(),
                State::Data(rx) => {
                    let done = rx.ingest(&mut iter, &mut self.body);
                    self.bound_body();
                    if done {
                        self.complete_message();
                    }
                }
                State::Bdat(rx) => {
                    let done = rx.ingest(&mut iter, &mut self.body);
                    let last = rx.is_last;
                    self.bound_body();
                    if done {
                        self.state = State::Command;
                        if last {
                            self.complete_message();
                        } else {
                            self.reply(250, "2.0.0", "chunk received");
                        }
                    }
                }
                State::AuthLines(left, login) => {
                    let rest = iter.as_slice();
                    let (line, complete) = match memchr::memchr(b'\n', rest) {
                        Some(pos) => (&rest[..pos], true),
                        None => (rest, false),
                    };
                    // Bounded: a response longer than an AUTH line can be is cut.
                    let room = MAX_AUTH_LINE.saturating_sub(self.auth_buf.len());
                    self.auth_buf
                        .extend_from_slice(&line[..line.len().min(room)]);
                    if !complete {
                        break;
                    }
                    iter = rest[line.len() + 1..].iter();
                    let text = sasl::decode(&self.auth_buf);
                    self.auth_buf.clear();
                    *left -= 1;
                    let (left, login) = (*left, *login);
                    if login && left == 1 {
                        self.auth_user = text;
                        self.reply(334, "", sasl::LOGIN_PASS_PROMPT);
                    } else {
                        self.state = State::Command;
                        let creds = if login {
                            format!("{}\0{}", std::mem::take(&mut self.auth_user), text)
                        } else {
                            sasl::plain_credentials(&text)
                        };
                        let d = h.decide(Command::Auth, &self.env, &creds);
                        self.respond(d, 235, "2.7.0", "authentication succeeded");
                    }
                }
                State::Command => {
                    let parsed = self.requests.ingest(&mut iter).map(Request::into_owned);
                    match parsed {
                        Ok(req) => {
                            let starttls = matches!(req, Request::StartTls);
                            self.on_request(req, h);
                            if starttls && matches!(self.out.last(), Some(Out::StartTls)) {
                                break;
                            }
                        }
                        Err(smtp_proto::Error::NeedsMoreData { .. }) => break,
                        Err(e) => self.on_bad_request(e),
                    }
                }
            }
        }
        input.len()
    }

    /// The complete message waiting for [`ServerSession::finish`], if any.
    pub fn received(&self) -> Option<Received<'_>> {
        matches!(self.state, State::Received).then_some(Received {
            env: &self.env,
            data: &self.body,
            oversize: self.oversize,
        })
    }

    /// Called by the IO layer after the TLS handshake: the session starts over.
    pub fn tls_established(&mut self) {
        self.tls_active = true;
        self.helo_done = false;
        self.env = Envelope::default();
        self.requests = RequestReceiver::default();
    }

    fn bound_body(&mut self) {
        if self.body.len() > self.cfg.max_message_size {
            // Keep reading to the end marker, but never hold more than the limit.
            self.oversize = true;
            self.body.truncate(self.cfg.max_message_size);
        }
    }

    fn on_bad_request(&mut self, e: smtp_proto::Error) {
        self.counts.protocol_errors += 1;
        match e {
            smtp_proto::Error::UnknownCommand => self.reply(500, "5.5.1", "command unrecognized"),
            smtp_proto::Error::ResponseTooLong => self.reply(500, "5.5.2", "line too long"),
            smtp_proto::Error::InvalidSenderAddress => {
                self.reply(501, "5.1.7", "invalid sender address")
            }
            smtp_proto::Error::InvalidRecipientAddress => {
                self.reply(501, "5.1.3", "invalid recipient address")
            }
            smtp_proto::Error::SyntaxError { syntax } => {
                self.reply(501, "5.5.4", &format!("syntax: {syntax}"))
            }
            smtp_proto::Error::InvalidParameter { param } => {
                self.reply(501, "5.5.4", &format!("invalid parameter {param}"))
            }
            smtp_proto::Error::UnsupportedParameter { param } => {
                let p: String = param.chars().take(32).collect();
                self.reply(555, "5.5.4", &format!("unsupported parameter {p}"))
            }
            _ => self.reply(500, "5.5.2", "syntax error"),
        }
    }

    fn on_request(&mut self, req: Request<String>, h: &mut dyn Handler) {
        match req {
            Request::Ehlo { host } | Request::Helo { host } | Request::Lhlo { host } => {
                self.end_attempt();
                self.env = Envelope {
                    helo: host.clone(),
                    ..Envelope::default()
                };
                let d = h.decide(Command::Ehlo, &self.env, &host);
                if d.verdict == Verdict::Accept {
                    self.helo_done = true;
                    let text = self.ehlo_text(&host);
                    self.push_delay(d.delay);
                    self.multiline(250, &text);
                } else {
                    self.respond(d, 250, "", "");
                }
            }
            Request::StartTls => {
                if !self.cfg.starttls || self.tls_active {
                    self.reply(502, "5.5.1", "STARTTLS not available");
                } else {
                    self.reply(220, "2.0.0", "ready to start TLS");
                    self.flush_pending();
                    self.out.push(Out::StartTls);
                }
            }
            Request::Auth {
                mechanism,
                initial_response,
            } => {
                if !self.cfg.auth {
                    self.reply(502, "5.5.1", "AUTH not available");
                } else if mechanism == smtp_proto::AUTH_PLAIN {
                    if initial_response.is_empty() {
                        self.state = State::AuthLines(1, false);
                        self.reply(334, "", "");
                    } else if !sasl::is_base64(initial_response.as_bytes()) {
                        self.reply(501, "5.5.2", "invalid base64");
                    } else {
                        let creds =
                            sasl::plain_credentials(&sasl::decode(initial_response.as_bytes()));
                        let d = h.decide(Command::Auth, &self.env, &creds);
                        self.respond(d, 235, "2.7.0", "authentication succeeded");
                    }
                } else if mechanism == smtp_proto::AUTH_LOGIN {
                    self.state = State::AuthLines(2, true);
                    self.reply(334, "", sasl::LOGIN_USER_PROMPT);
                } else {
                    self.reply(504, "5.5.4", "mechanism not supported");
                }
            }
            Request::Mail { from } => {
                if !self.helo_done {
                    self.reply(503, "5.5.1", "send EHLO first");
                } else if !self.env.from.is_empty() || !self.env.rcpts.is_empty() {
                    self.reply(503, "5.5.1", "nested MAIL command");
                } else {
                    // A MAIL after a refused one starts a new attempt.
                    self.end_attempt();
                    self.attempt = Attempt::Open { refused: false };
                    if from.size > self.cfg.max_message_size {
                        self.refuse_attempt();
                        self.reply(552, "5.3.4", "message size exceeds fixed limit");
                    } else {
                        let d = h.decide(Command::Mail, &self.env, &from.address);
                        if d.verdict == Verdict::Accept {
                            self.env.from = if from.address.is_empty() {
                                "<>".into()
                            } else {
                                from.address
                            };
                            self.counts.transactions += 1;
                        } else {
                            self.refuse_attempt();
                        }
                        self.respond(d, 250, "2.1.0", "sender ok");
                    }
                }
            }
            Request::Rcpt { to } => {
                if self.env.from.is_empty() {
                    if self.attempt_refused() {
                        // The MAIL of this pipelined group was refused: not a new refusal.
                        self.follow_on_reply(503, "5.5.1", "need MAIL before RCPT");
                    } else {
                        self.reply(503, "5.5.1", "need MAIL before RCPT");
                    }
                } else {
                    let d = h.decide(Command::Rcpt, &self.env, &to.address);
                    if d.verdict == Verdict::Accept {
                        self.env.rcpts.push(to.address);
                    } else {
                        self.refuse_attempt();
                    }
                    self.respond(d, 250, "2.1.5", "recipient ok");
                }
            }
            Request::Data => {
                if self.env.rcpts.is_empty() {
                    if self.attempt_refused() {
                        self.follow_on_reply(554, "5.5.1", "no valid recipients");
                    } else {
                        self.reply(554, "5.5.1", "no valid recipients");
                    }
                    self.end_attempt();
                } else {
                    let d = h.decide(Command::Data, &self.env, "");
                    if d.verdict == Verdict::Accept {
                        self.body.clear();
                        self.oversize = false;
                        self.state = State::Data(DataReceiver::new());
                    } else {
                        self.refuse_attempt();
                        self.end_attempt();
                    }
                    self.respond(d, 354, "", "end data with <CR><LF>.<CR><LF>");
                }
            }
            Request::Bdat {
                chunk_size,
                is_last,
            } => {
                if !self.cfg.chunking {
                    self.reply(502, "5.5.1", "BDAT not available");
                    // The chunk still arrives; skip it (RFC 3030 §2).
                    self.state = State::Bdat(BdatReceiver::new(chunk_size, false));
                    self.body.clear();
                } else {
                    if self.body.is_empty() {
                        self.oversize = false;
                    }
                    self.state = State::Bdat(BdatReceiver::new(chunk_size, is_last));
                }
            }
            Request::Rset => {
                self.end_attempt();
                self.env.from.clear();
                self.env.rcpts.clear();
                self.body.clear();
                self.reply(250, "2.0.0", "ok");
            }
            Request::Noop { .. } => self.reply(250, "2.0.0", "ok"),
            Request::Quit => {
                self.end_attempt();
                let d = h.decide(Command::Quit, &self.env, "");
                self.respond(d, 221, "2.0.0", "bye");
                self.flush_pending();
                if !matches!(self.state, State::Closed) {
                    self.out.push(Out::Close);
                    self.state = State::Closed;
                }
            }
            Request::Vrfy { .. } => self.reply(252, "2.5.0", "cannot verify"),
            _ => self.reply(502, "5.5.1", "command not implemented"),
        }
    }

    /// The content ended: pause for the IO layer's decision, unless there is no valid
    /// transaction to decide about.
    fn complete_message(&mut self) {
        if self.env.rcpts.is_empty() {
            // BDAT chunks without a valid transaction (or BDAT not offered).
            self.state = State::Command;
            if self.attempt_refused() {
                self.follow_on_reply(503, "5.5.1", "no valid recipients");
            } else {
                self.reply(503, "5.5.1", "no valid recipients");
            }
            self.end_attempt();
            self.body.clear();
        } else {
            self.state = State::Received;
        }
    }

    /// Answers the message from [`ServerSession::received`]: the decisions for end of
    /// data, for LMTP one per recipient in order (a single one applies to all). Then the
    /// session takes input again. Does nothing when no message is waiting. A delay before
    /// an accepting reply is queued as [`Out::Hold`].
    pub fn finish(&mut self, decisions: &[Decision]) {
        if !matches!(self.state, State::Received) {
            return;
        }
        self.state = State::Command;
        let replies = if self.cfg.lmtp {
            self.env.rcpts.len()
        } else {
            1
        };
        let mut delivered = 0;
        for i in 0..replies {
            let mut d = decisions
                .get(i)
                .or(decisions.last())
                .cloned()
                .unwrap_or(Decision::ACCEPT);
            if self.oversize && d.verdict == Verdict::Accept {
                self.reply(552, "5.3.4", "message too big");
                continue;
            }
            if d.verdict == Verdict::Accept {
                delivered += 1;
                if delivered == 1 && !d.delay.is_zero() {
                    self.flush_pending();
                    self.out.push(Out::Hold(std::mem::take(&mut d.delay)));
                }
            }
            self.respond(d, 250, "2.0.0", "message accepted");
        }
        if delivered == 0 {
            self.refuse_attempt();
        } else {
            self.attempt = Attempt::None;
        }
        self.end_attempt();
        self.env.from.clear();
        self.env.rcpts.clear();
        self.body.clear();
    }

    /// Called by the IO layer when the connection ends, however it ends: an attempt still
    /// open is counted as refused when this server closed the session, as abandoned when
    /// the client went away.
    pub fn end(&mut self) {
        if self.is_closed() && !self.attempt_refused() && self.attempt != Attempt::None {
            // Closed by a Disconnect or Shutdown verdict: this server ended it.
            self.refuse_attempt();
        }
        self.end_attempt();
    }

    /// Marks the open attempt as refused by this server.
    fn refuse_attempt(&mut self) {
        if let Attempt::Open { refused } = &mut self.attempt {
            *refused = true;
        }
    }

    fn attempt_refused(&self) -> bool {
        self.attempt == Attempt::Open { refused: true }
    }

    /// Closes the open attempt (if any), counting how it ended.
    fn end_attempt(&mut self) {
        match std::mem::replace(&mut self.attempt, Attempt::None) {
            Attempt::None => {}
            Attempt::Open { refused: true } => self.counts.refused += 1,
            Attempt::Open { refused: false } => self.counts.abandoned += 1,
        }
    }

    fn ehlo_text(&self, host: &str) -> String {
        let c = &self.cfg;
        let mut t = format!(
            "{} greets {}",
            c.hostname,
            host.chars().take(64).collect::<String>()
        );
        let mut add = |on: bool, s: &str| {
            if on {
                t.push('\n');
                t.push_str(s);
            }
        };
        add(c.pipelining, "PIPELINING");
        add(true, &format!("SIZE {}", c.max_message_size));
        add(c.eight_bit_mime, "8BITMIME");
        add(c.enhanced_status_codes, "ENHANCEDSTATUSCODES");
        add(c.starttls && !self.tls_active, "STARTTLS");
        add(c.auth, "AUTH PLAIN LOGIN");
        add(c.chunking, "CHUNKING");
        add(c.smtputf8, "SMTPUTF8");
        add(c.dsn, "DSN");
        t
    }

    /// Applies a decision: `Accept` gives the default reply.
    fn respond(&mut self, d: Decision, code: u16, esc: &str, text: &str) {
        self.push_delay(d.delay);
        match d.verdict {
            Verdict::Accept => self.reply(code, esc, text),
            Verdict::Reply(code, esc, text) => self.reply(code, esc, &text),
            Verdict::Disconnect => {
                self.flush_pending();
                self.out.push(Out::Close);
                self.state = State::Closed;
            }
            Verdict::Shutdown => {
                self.reply(421, "4.3.2", "service shutting down");
                self.flush_pending();
                self.out.push(Out::Close);
                self.state = State::Closed;
            }
        }
    }

    fn push_delay(&mut self, d: Duration) {
        if !d.is_zero() {
            self.flush_pending();
            self.out.push(Out::Delay(d));
        }
    }

    fn reply(&mut self, code: u16, esc: &str, text: &str) {
        if code >= 400 {
            self.counts.rejected += 1;
        }
        let p = &mut self.pending;
        let _ = write!(p_str(p), "{code} ");
        if self.cfg.enhanced_status_codes && !esc.is_empty() {
            p.extend_from_slice(esc.as_bytes());
            p.push(b' ');
        }
        p.extend_from_slice(text.as_bytes());
        p.extend_from_slice(b"\r\n");
    }

    /// A negative reply that only repeats a refusal already counted in this attempt.
    fn follow_on_reply(&mut self, code: u16, esc: &str, text: &str) {
        self.reply(code, esc, text);
        self.counts.rejected -= 1;
    }

    fn multiline(&mut self, code: u16, text: &str) {
        let lines: Vec<&str> = text.split('\n').collect();
        for (i, line) in lines.iter().enumerate() {
            let sep = if i + 1 == lines.len() { ' ' } else { '-' };
            let _ = write!(p_str(&mut self.pending), "{code}{sep}{line}\r\n");
        }
    }

    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            self.out.push(Out::Bytes(std::mem::take(&mut self.pending)));
        }
    }
}

/// Longest AUTH continuation line kept.
const MAX_AUTH_LINE: usize = 1024;

/// A `fmt::Write` view of a byte buffer (replies are ASCII).
fn p_str(v: &mut Vec<u8>) -> impl std::fmt::Write + '_ {
    struct W<'a>(&'a mut Vec<u8>);
    impl std::fmt::Write for W<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    W(v)
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
