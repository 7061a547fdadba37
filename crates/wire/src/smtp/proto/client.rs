//! The client side of an SMTP/LMTP session as a sans-IO state machine.
//!
//! The session never touches a socket or a clock. The IO driver asks [`ClientSession::step`]
//! what to do next (flush queued bytes, read a reply for a phase, upgrade to TLS, ...) and
//! hands every decoded reply to [`ClientSession::on_reply`]. This keeps every RFC rule —
//! EHLO/HELO fallback, RFC 2920 pipelining and its error cases, LMTP's reply per recipient,
//! BDAT — testable byte by byte without a network.

use std::collections::VecDeque;
use std::fmt::Write as _;

pub use super::txn::{Transaction, TxnOutcome};

use super::data::END_OF_DATA;
use super::ehlo::Capabilities;
use super::outbox::Outbox;
use super::phase::Phase;
use super::reply::Reply;

/// How a session should talk; fixed for the life of a connection.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Speak LMTP (LHLO, one reply per recipient after the body).
    pub lmtp: bool,
    /// The name sent with EHLO/HELO/LHLO.
    pub helo_name: String,
    /// Use PIPELINING when the server offers it.
    pub pipelining: bool,
    /// Use BDAT instead of DATA when the server offers CHUNKING.
    pub chunking: bool,
    /// Issue STARTTLS after EHLO (and fail the session when it is not offered).
    pub starttls: bool,
    /// Authenticate after EHLO (after STARTTLS when both are asked).
    pub auth: Option<Credentials>,
}

/// A user name and password for AUTH PLAIN or LOGIN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The authentication identity.
    pub user: String,
    /// Its password.
    pub pass: String,
}

/// What the driver must do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Write everything in the outbox ([`ClientSession::outbox`]), then ask again.
    Flush,
    /// Read one reply and pass it to [`ClientSession::on_reply`]; it belongs to this phase.
    Read(Phase),
    /// The message content is queued and PIPELINING is on, so RFC 2920 §3.1 lets the next
    /// transaction (or QUIT) ride in the same write, after the content. Answer with
    /// [`ClientSession::follow_with`], [`ClientSession::follow_quit`] or
    /// [`ClientSession::no_follow`].
    OfferFollow,
    /// The server accepted STARTTLS: do the TLS handshake, then call
    /// [`ClientSession::tls_established`].
    StartTls,
    /// Idle: set-up is done; start a transaction or quit.
    Ready,
    /// A transaction ended; its outcome.
    TxnDone(TxnOutcome),
    /// The session is over (after QUIT, or the server said 421); close the connection.
    Closed,
}

/// A failure that makes the whole session unusable (as opposed to a failed transaction).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The server refused a set-up step (greeting, EHLO, STARTTLS, AUTH).
    #[error("{phase} refused: {reply}")]
    Rejected {
        /// The step refused, which the statistics charge and the message names.
        phase: Phase,
        /// What the server said.
        reply: Reply,
    },
    /// The server's behaviour breaks the protocol or our requirements.
    #[error("protocol violation at {phase}: {what}")]
    Protocol {
        /// The step at which the server broke the protocol, charged with the failure.
        phase: Phase,
        /// What went wrong.
        what: &'static str,
    },
}

/// One expected reply, in the order commands were sent (RFC 2920 §3.1: replies come in
/// command order, so a queue correlates them strictly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Banner,
    Ehlo,
    Helo,
    StartTls,
    AuthLoginUser,
    AuthLoginPass,
    AuthDone,
    Rset,
    Mail,
    Rcpt,
    Data,
    /// The final reply after the body or BDAT LAST (SMTP), or one per recipient (LMTP).
    BodyEnd,
    /// Reply to the lone dot sent after an RFC 2920 "354 with no valid recipient".
    EmptyBodyEnd,
    Quit,
}

impl Expect {
    fn phase(self) -> Phase {
        match self {
            Expect::Banner => Phase::Banner,
            Expect::Ehlo | Expect::Helo => Phase::Ehlo,
            Expect::StartTls => Phase::StartTls,
            Expect::AuthLoginUser | Expect::AuthLoginPass | Expect::AuthDone => Phase::Auth,
            Expect::Rset => Phase::Rset,
            Expect::Mail => Phase::Mail,
            Expect::Rcpt => Phase::Rcpt,
            Expect::Data => Phase::Data,
            Expect::BodyEnd | Expect::EmptyBodyEnd => Phase::DataDot,
            Expect::Quit => Phase::Quit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Setup,
    Ready,
    InTxn,
    Quitting,
    Closed,
}

/// The client session state machine. One per connection.
pub struct ClientSession {
    cfg: ClientConfig,
    state: State,
    caps: Capabilities,
    tls_active: bool,
    tls_pending: bool,
    authed: bool,
    expect: VecDeque<Expect>,
    out: Outbox,
    needs_rset: bool,
    closing: bool,
    txn: Option<Transaction>,
    next_rcpt: usize,
    mail_ok: bool,
    outcome: TxnOutcome,
    finished: Option<TxnOutcome>,
    offer_follow: bool,
    follow: Option<Transaction>,
    content_sent: bool,
    /// Expected replies at the back of the queue that belong to what follows the current
    /// transaction (a pipelined follow-on and/or QUIT).
    tail_expects: usize,
    follow_expects: usize,
}

impl ClientSession {
    /// A session on a freshly opened connection, waiting for the greeting. With implicit
    /// TLS, `tls_active` is true from the start.
    pub fn new(cfg: ClientConfig, tls_active: bool) -> Self {
        let mut expect = VecDeque::with_capacity(8);
        expect.push_back(Expect::Banner);
        ClientSession {
            cfg,
            state: State::Setup,
            caps: Capabilities::default(),
            tls_active,
            tls_pending: false,
            authed: false,
            expect,
            out: Outbox::default(),
            needs_rset: false,
            closing: false,
            txn: None,
            next_rcpt: 0,
            mail_ok: false,
            outcome: TxnOutcome::default(),
            finished: None,
            offer_follow: false,
            follow: None,
            content_sent: false,
            tail_expects: 0,
            follow_expects: 0,
        }
    }

    /// True once the session is over; the connection must be dropped.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed && self.expect.is_empty() && self.finished.is_none()
    }

    /// True when a transaction may begin: set-up done, nothing in flight or queued.
    pub fn is_idle(&self) -> bool {
        self.state == State::Ready && self.expect.is_empty() && self.finished.is_none()
    }

    /// True when TLS is in use on this session.
    pub fn tls_active(&self) -> bool {
        self.tls_active
    }

    /// The bytes queued for the peer.
    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.out
    }

    /// What the driver must do next.
    pub fn step(&mut self) -> Step {
        if self.offer_follow {
            return Step::OfferFollow;
        }
        if !self.out.is_empty() {
            return Step::Flush;
        }
        if self.tls_pending {
            return Step::StartTls;
        }
        if let Some(done) = self.finished.take() {
            return Step::TxnDone(done);
        }
        if let Some(e) = self.expect.front() {
            return Step::Read(e.phase());
        }
        match self.state {
            State::Ready => Step::Ready,
            _ => Step::Closed,
        }
    }

    /// Called after a successful TLS handshake that followed STARTTLS: forget what the server
    /// said in clear text and say EHLO again (RFC 3207 §4.2).
    pub fn tls_established(&mut self) {
        self.tls_pending = false;
        self.tls_active = true;
        self.caps = Capabilities::default();
        self.send_hello(Expect::Ehlo);
    }

    /// Starts a transaction; only valid when [`step`](Self::step) said `Ready`.
    pub fn begin(&mut self, txn: Transaction) {
        debug_assert_eq!(self.state, State::Ready);
        self.state = State::InTxn;
        self.reset_txn_state();
        if std::mem::take(&mut self.needs_rset) {
            self.out.put(b"RSET\r\n");
            self.expect.push_back(Expect::Rset);
        }
        if self.pipelined() {
            self.put_envelope(&txn);
            self.offer_follow = self.chunking();
        } else {
            self.put_mail(&txn);
            self.expect.push_back(Expect::Mail);
        }
        self.txn = Some(txn);
    }

    /// Answers `OfferFollow`: the next transaction's commands go out right after the
    /// current content; its replies follow the current final reply.
    pub fn follow_with(&mut self, txn: Transaction) {
        self.offer_follow = false;
        let before = self.expect.len();
        self.put_envelope(&txn);
        self.follow_expects = self.expect.len() - before;
        self.tail_expects += self.follow_expects;
        self.follow = Some(txn);
    }

    /// Answers `OfferFollow`: QUIT goes out right after the current content.
    pub fn follow_quit(&mut self) {
        self.offer_follow = false;
        self.out.put(b"QUIT\r\n");
        self.expect.push_back(Expect::Quit);
        self.tail_expects += 1;
    }

    /// Answers `OfferFollow`: nothing follows.
    pub fn no_follow(&mut self) {
        self.offer_follow = false;
    }

    /// True while a transaction (possibly a pipelined follow-on) awaits replies.
    #[cfg(test)]
    pub fn in_transaction(&self) -> bool {
        self.state == State::InTxn
    }

    /// Ends the session politely; only valid when `Ready` (a QUIT already queued with
    /// `follow_quit` is not sent twice).
    pub fn quit(&mut self) {
        if self.expect.contains(&Expect::Quit) {
            self.state = State::Quitting;
            return;
        }
        self.state = State::Quitting;
        self.out.put(b"QUIT\r\n");
        self.expect.push_back(Expect::Quit);
    }

    fn reset_txn_state(&mut self) {
        self.outcome = TxnOutcome::default();
        self.mail_ok = false;
        self.next_rcpt = 0;
    }

    /// Queues MAIL, every RCPT and DATA (or BDAT LAST with the content) as one group.
    fn put_envelope(&mut self, txn: &Transaction) {
        self.put_mail(txn);
        self.expect.push_back(Expect::Mail);
        for rcpt in &txn.rcpts {
            let buf = self.out.buf();
            buf.extend_from_slice(b"RCPT TO:<");
            buf.extend_from_slice(rcpt.as_bytes());
            buf.extend_from_slice(b">\r\n");
            self.expect.push_back(Expect::Rcpt);
        }
        self.put_data(txn);
    }

    /// Feeds the next reply, in order. Set-up failures end the session with an error;
    /// transaction failures are recorded in the outcome.
    pub fn on_reply(&mut self, reply: Reply) -> Result<(), SessionError> {
        let Some(expect) = self.expect.pop_front() else {
            return Err(SessionError::Protocol {
                phase: Phase::Quit,
                what: "reply with no command outstanding",
            });
        };
        if reply.code == 421 {
            // RFC 5321 §3.8: the server is closing the transmission channel.
            self.closing = true;
        }
        match expect {
            Expect::Banner => {
                if reply.code != 220 {
                    return self.fail_setup(Phase::Banner, reply);
                }
                self.send_hello(Expect::Ehlo);
            }
            Expect::Ehlo => {
                if reply.is_positive() {
                    self.caps = Capabilities::from_reply(&reply);
                    self.continue_setup()?;
                } else if !self.cfg.lmtp && !self.closing && !self.tls_active {
                    // RFC 5321 §3.2: a server that does not know EHLO gets HELO.
                    self.send_hello(Expect::Helo);
                } else {
                    return self.fail_setup(Phase::Ehlo, reply);
                }
            }
            Expect::Helo => {
                if !reply.is_positive() {
                    return self.fail_setup(Phase::Ehlo, reply);
                }
                self.caps = Capabilities::default();
                self.continue_setup()?;
            }
            Expect::StartTls => {
                if reply.code != 220 {
                    return self.fail_setup(Phase::StartTls, reply);
                }
                self.tls_pending = true;
            }
            Expect::AuthLoginUser | Expect::AuthLoginPass => {
                if reply.code != 334 {
                    return self.fail_setup(Phase::Auth, reply);
                }
                let Some(creds) = self.cfg.auth.clone() else {
                    return Err(SessionError::Protocol {
                        phase: Phase::Auth,
                        what: "AUTH continuation without credentials",
                    });
                };
                let (secret, next) = match expect {
                    Expect::AuthLoginUser => (creds.user, Expect::AuthLoginPass),
                    _ => (creds.pass, Expect::AuthDone),
                };
                let encoded = crate::sasl::encode(&secret);
                self.out.put(encoded.as_bytes());
                self.out.put(b"\r\n");
                self.expect.push_back(next);
            }
            Expect::AuthDone => {
                if reply.code != 235 {
                    return self.fail_setup(Phase::Auth, reply);
                }
                self.authed = true;
                self.continue_setup()?;
            }
            Expect::Rset => {
                if !reply.is_positive() {
                    self.record_failure(Phase::Rset, &reply);
                }
            }
            Expect::Mail => {
                self.mail_ok = reply.is_positive();
                if !self.mail_ok {
                    self.record_failure(Phase::Mail, &reply);
                }
                if !self.pipelined() && self.mail_ok {
                    self.put_next_rcpt();
                }
            }
            Expect::Rcpt => {
                if reply.is_positive() {
                    self.outcome.rcpts_accepted += 1;
                } else if self.mail_ok {
                    // After a refused MAIL every RCPT reply (503) is a consequence.
                    self.outcome.rcpts_refused += 1;
                    self.outcome.rcpt_failures.push((Phase::Rcpt, reply.code));
                    if self.outcome.rcpt_failure_text.is_none() {
                        self.outcome.rcpt_failure_text = Some(reply.to_string());
                    }
                }
                if !self.pipelined() && !self.put_next_rcpt() {
                    if self.outcome.rcpts_accepted > 0 {
                        if let Some(txn) = self.txn.take() {
                            self.put_data(&txn);
                            self.txn = Some(txn);
                        }
                    } else {
                        self.record_failure(Phase::Rcpt, &reply);
                    }
                }
            }
            Expect::Data => self.on_data_reply(reply),
            Expect::BodyEnd => {
                // A BDAT LAST reply also closes the transaction, whatever it says.
                self.content_sent = true;
                if reply.is_positive() {
                    if self.mail_ok && self.outcome.rcpts_accepted > 0 {
                        self.outcome.accepted = true;
                        self.outcome.rcpts_delivered += if self.cfg.lmtp {
                            1
                        } else {
                            self.outcome.rcpts_accepted
                        };
                    }
                } else if self.cfg.lmtp {
                    // RFC 2033 §4.2: one reply per accepted recipient; each may fail alone.
                    self.outcome
                        .rcpt_failures
                        .push((Phase::DataDot, reply.code));
                    if self.outcome.rcpt_failure_text.is_none() {
                        self.outcome.rcpt_failure_text = Some(reply.to_string());
                    }
                } else {
                    self.record_failure(Phase::DataDot, &reply);
                }
            }
            Expect::EmptyBodyEnd => {}
            Expect::Quit => {
                self.tail_expects = 0;
                self.state = State::Closed;
                return Ok(());
            }
        }
        if self.state == State::InTxn
            && self.expect.len() == self.tail_expects
            && self.out.is_empty()
        {
            self.finish_txn();
        }
        Ok(())
    }

    fn pipelined(&self) -> bool {
        self.cfg.pipelining && self.caps.pipelining()
    }

    fn chunking(&self) -> bool {
        self.cfg.chunking && self.caps.chunking() && !self.cfg.lmtp
    }

    fn send_hello(&mut self, kind: Expect) {
        let verb: &[u8] = match kind {
            Expect::Helo => b"HELO ",
            _ if self.cfg.lmtp => b"LHLO ",
            _ => b"EHLO ",
        };
        self.out.put(verb);
        self.out.put(self.cfg.helo_name.as_bytes());
        self.out.put(b"\r\n");
        self.expect.push_back(kind);
    }

    /// After a successful EHLO: STARTTLS, then AUTH, then ready.
    fn continue_setup(&mut self) -> Result<(), SessionError> {
        if self.cfg.starttls && !self.tls_active {
            if !self.caps.starttls() {
                self.state = State::Closed;
                return Err(SessionError::Protocol {
                    phase: Phase::StartTls,
                    what: "STARTTLS requested but not offered by the server",
                });
            }
            self.out.put(b"STARTTLS\r\n");
            self.expect.push_back(Expect::StartTls);
            return Ok(());
        }
        if let (Some(creds), false) = (&self.cfg.auth, self.authed) {
            if self.caps.auth_plain() || !self.caps.auth_login() {
                // RFC 4616: authzid NUL authcid NUL passwd, sent as an initial response.
                let token = crate::sasl::plain_response(&creds.user, &creds.pass);
                self.out.put(b"AUTH PLAIN ");
                self.out.put(token.as_bytes());
                self.out.put(b"\r\n");
                self.expect.push_back(Expect::AuthDone);
            } else {
                self.out.put(b"AUTH LOGIN\r\n");
                self.expect.push_back(Expect::AuthLoginUser);
            }
            return Ok(());
        }
        self.state = State::Ready;
        Ok(())
    }

    fn fail_setup(&mut self, phase: Phase, reply: Reply) -> Result<(), SessionError> {
        self.state = State::Closed;
        self.expect.clear();
        Err(SessionError::Rejected { phase, reply })
    }

    fn record_failure(&mut self, phase: Phase, reply: &Reply) {
        if self.outcome.failure.is_none() {
            self.outcome.failure = Some((phase, reply.code));
            self.outcome.failure_text = Some(reply.to_string());
        }
    }

    /// A refused MAIL, or no recipient accepted: what follows in the same pipelined group
    /// (DATA's 503/554) only repeats that refusal.
    fn already_refused(&self) -> bool {
        !self.mail_ok || self.outcome.rcpts_accepted == 0
    }

    fn put_mail(&mut self, txn: &Transaction) {
        let buf = self.out.buf();
        buf.extend_from_slice(b"MAIL FROM:<");
        buf.extend_from_slice(txn.mail_from.as_bytes());
        buf.extend_from_slice(b">");
        if self.caps.size() {
            let _ = write!(buf, " SIZE={}", txn.size());
        }
        if txn.eight_bit && self.caps.eight_bit_mime() {
            buf.extend_from_slice(b" BODY=8BITMIME");
        }
        buf.extend_from_slice(b"\r\n");
    }

    /// Queues the next RCPT; false when all were sent.
    fn put_next_rcpt(&mut self) -> bool {
        let Some(txn) = &self.txn else { return false };
        let Some(rcpt) = txn.rcpts.get(self.next_rcpt) else {
            return false;
        };
        let buf = self.out.buf();
        buf.extend_from_slice(b"RCPT TO:<");
        buf.extend_from_slice(rcpt.as_bytes());
        buf.extend_from_slice(b">\r\n");
        self.next_rcpt += 1;
        self.expect.push_back(Expect::Rcpt);
        true
    }

    /// Queues DATA, or BDAT LAST with the whole message when CHUNKING is used.
    fn put_data(&mut self, txn: &Transaction) {
        if self.chunking() {
            let size = txn.size();
            let _ = write!(self.out.buf(), "BDAT {size} LAST\r\n");
            self.out.put_shared(txn.prefix.clone());
            self.out.put_shared(txn.raw.clone());
            self.out.put_shared(txn.suffix.clone());
            self.expect.push_back(Expect::BodyEnd);
        } else {
            self.out.put(b"DATA\r\n");
            self.expect.push_back(Expect::Data);
        }
    }

    fn on_data_reply(&mut self, reply: Reply) {
        if reply.code != 354 {
            if !self.already_refused() {
                self.record_failure(Phase::Data, &reply);
            }
            return;
        }
        if self.mail_ok && self.outcome.rcpts_accepted > 0 {
            if let Some(txn) = &self.txn {
                let (prefix, stuffed) = (txn.prefix.clone(), txn.stuffed.clone());
                self.out.put_shared(prefix);
                self.out.put_shared(stuffed);
                self.out.put_shared(txn.suffix.clone());
            }
            self.out.put(END_OF_DATA);
            self.content_sent = true;
            self.offer_follow = self.pipelined() && !self.closing;
            let replies = if self.cfg.lmtp {
                self.outcome.rcpts_accepted
            } else {
                1
            };
            for _ in 0..replies {
                self.expect.push_back(Expect::BodyEnd);
            }
        } else {
            // RFC 2920 §3.1: a server may answer 354 although no recipient was accepted; the
            // client then ends the (empty) message with a lone dot and ignores the reply.
            self.out.put(END_OF_DATA);
            self.content_sent = true;
            self.expect.push_back(Expect::EmptyBodyEnd);
            if self.mail_ok {
                let code = self
                    .outcome
                    .rcpt_failures
                    .last()
                    .map(|f| f.1)
                    .unwrap_or(554);
                let text = self.outcome.rcpt_failure_text.clone().unwrap_or_default();
                if self.outcome.failure.is_none() {
                    self.outcome.failure = Some((Phase::Rcpt, code));
                    self.outcome.failure_text = Some(text);
                }
            }
        }
    }

    fn finish_txn(&mut self) {
        let mut outcome = std::mem::take(&mut self.outcome);
        self.txn = None;
        if !outcome.accepted {
            if outcome.failure.is_none() {
                // Every recipient refused (at RCPT, or per recipient by LMTP).
                outcome.failure = Some(match outcome.rcpt_failures.last() {
                    Some(f) => *f,
                    None => (Phase::DataDot, 0),
                });
                outcome.failure_text = outcome.rcpt_failure_text.clone();
            }
            // After the final reply to content the transaction is over either way (RFC
            // 5321 §4.1.1.4); only one that ended before its content needs RSET.
            self.needs_rset = !self.content_sent;
        }
        self.content_sent = false;
        self.finished = Some(outcome);
        if let Some(next) = self.follow.take() {
            // The follow-on's commands are already out; its replies come next.
            self.reset_txn_state();
            self.tail_expects -= std::mem::take(&mut self.follow_expects);
            self.txn = Some(next);
            self.state = if self.closing {
                State::Closed
            } else {
                State::InTxn
            };
            return;
        }
        self.state = if self.closing {
            State::Closed
        } else if self.expect.contains(&Expect::Quit) {
            State::Quitting
        } else {
            State::Ready
        };
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
