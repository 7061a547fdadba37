//! What the server session asks of the IO layer and tells it: the command a [`Handler`]
//! decides about, its [`Decision`], the envelope and complete message it sees, and the
//! output queue ([`Out`]) the IO layer performs. Kept apart from the state machine so that
//! the sink's fault logic depends on these types only.

use std::borrow::Cow;
use std::time::Duration;

/// The command a handler is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// A new connection (before the greeting).
    Connect,
    /// EHLO, HELO or LHLO.
    Ehlo,
    /// AUTH.
    Auth,
    /// MAIL FROM.
    Mail,
    /// RCPT TO.
    Rcpt,
    /// DATA (before 354) or BDAT.
    Data,
    /// End of data: the message is complete.
    DataEnd,
    /// QUIT.
    Quit,
}

/// What to do with a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The normal positive reply.
    Accept,
    /// This reply instead (code, enhanced code, text).
    Reply(u16, &'static str, String),
    /// Close the connection without a reply.
    Disconnect,
    /// Reply 421 and close.
    Shutdown,
}

/// A handler's decision: an optional delay before the reply, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Wait this long before replying (the IO layer sleeps; later replies queue behind).
    pub delay: Duration,
    /// The verdict.
    pub verdict: Verdict,
}

impl Decision {
    /// Accept at once.
    pub const ACCEPT: Decision = Decision::at_once(Verdict::Accept);

    /// `verdict` without a delay.
    pub const fn at_once(verdict: Verdict) -> Decision {
        Decision {
            delay: Duration::ZERO,
            verdict,
        }
    }
}

/// The envelope of the transaction in progress.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// HELO/EHLO argument.
    pub helo: String,
    /// Reverse-path.
    pub from: String,
    /// Accepted forward-paths.
    pub rcpts: Vec<String>,
}

/// Decides replies to commands; implemented by the IO layer (sink).
pub trait Handler {
    /// Decides the reply to a command; `arg` is the address for MAIL/RCPT, the name for
    /// EHLO, `user NUL password` for AUTH, empty otherwise.
    fn decide(&mut self, cmd: Command, env: &Envelope, arg: &str) -> Decision;
}

/// A complete message waiting for its end-of-data decision.
#[derive(Debug)]
pub struct Received<'a> {
    /// Its envelope.
    pub env: &'a Envelope,
    /// The content: dot-unstuffed, or all BDAT chunks joined.
    pub data: &'a [u8],
    /// It passed the size limit (and was cut there); the session answers 552 to an accept.
    pub oversize: bool,
}

/// One item of the output queue.
#[derive(Debug, PartialEq, Eq)]
pub enum Out {
    /// Reply bytes to write.
    Bytes(Vec<u8>),
    /// Sleep before writing what follows.
    Delay(Duration),
    /// Sleep before writing the reply that accepts a message: the IO layer counts the
    /// message as delivered only if the client is still there after the hold.
    Hold(Duration),
    /// Upgrade to TLS now (after the 220 to STARTTLS was written).
    StartTls,
    /// Close the connection after writing what precedes.
    Close,
}

/// Convenience for handlers: a reply decision.
pub fn reply(code: u16, esc: &'static str, text: impl Into<Cow<'static, str>>) -> Decision {
    Decision::at_once(Verdict::Reply(code, esc, text.into().into_owned()))
}
