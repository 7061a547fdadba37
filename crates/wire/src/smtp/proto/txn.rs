//! One transaction as the client side sees it: the message to send (shared, never copied
//! per send) and how the transaction ended.

use bytes::Bytes;

use super::phase::Phase;

/// A message to send in one transaction. The body is given both raw (for BDAT) and
/// dot-stuffed (for DATA); both must be CRLF-normalised. `prefix` is the per-message part
/// (trace header, Message-ID) and `suffix` a last short line that brings a generated
/// message to its exact size; neither may contain a line starting with '.'.
#[derive(Debug, Clone)]
pub struct Transaction {
    /// The reverse-path, without angle brackets (empty for the null sender).
    pub mail_from: String,
    /// The forward-paths, without angle brackets.
    pub rcpts: Vec<String>,
    /// Per-message header lines, sent first.
    pub prefix: Bytes,
    /// The shared rest of the message, as is.
    pub raw: Bytes,
    /// The shared rest of the message, dot-stuffed.
    pub stuffed: Bytes,
    /// Sent after the body, in both forms (empty for most messages).
    pub suffix: Bytes,
    /// The body has 8-bit octets (BODY=8BITMIME is declared when the server allows).
    pub eight_bit: bool,
}

impl Transaction {
    /// The message size in octets as the recipient will store it.
    pub fn size(&self) -> usize {
        self.prefix.len() + self.raw.len() + self.suffix.len()
    }
}

/// How one transaction ended. Per-transaction failures are data, not errors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnOutcome {
    /// The server took responsibility for the message for at least one recipient.
    pub accepted: bool,
    /// Recipients accepted at RCPT.
    pub rcpts_accepted: u32,
    /// Recipients refused at RCPT, with their reply codes (only the first few are kept).
    pub rcpts_refused: u32,
    /// Recipients the message was delivered to (SMTP: all accepted ones on success; LMTP:
    /// those with a positive reply after the body).
    pub rcpts_delivered: u32,
    /// The failure that decided the transaction: where it happened and the reply code.
    /// Replies that only follow from an earlier refusal (RCPT 503 after a refused MAIL,
    /// DATA 554 after every recipient was refused) are consequences, not failures.
    pub failure: Option<(Phase, u16)>,
    /// The text of the reply behind `failure`, for the error table's sample.
    pub failure_text: Option<String>,
    /// Reply codes of refused recipients (RCPT phase, or LMTP per-recipient after the body).
    pub rcpt_failures: Vec<(Phase, u16)>,
    /// The text of the first recipient refusal, for the error table's sample.
    pub rcpt_failure_text: Option<String>,
}
