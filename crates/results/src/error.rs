//! The classification of failures shared by statistics, reports and thresholds.

use serde::Serialize;

/// What kind of failure a transaction or connection met. Counted, never fatal to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The connection was refused or could not be opened.
    Refused,
    /// No reply (or no connection) within the timeout.
    Timeout,
    /// The TLS handshake failed.
    Tls,
    /// A 4xx reply other than 421.
    Rejected4xx,
    /// A 5xx reply.
    Rejected5xx,
    /// A negative response of a protocol without reply codes (POP3's `-ERR`).
    Rejected,
    /// The server said 421 and closed the channel.
    Closing421,
    /// The peer closed or reset the connection unexpectedly.
    Disconnect,
    /// The peer broke the protocol (malformed or unexpected reply).
    Protocol,
    /// A response contradicted what the server said before (an IMAP state check).
    State,
}

impl ErrorClass {
    /// The class of a negative reply code.
    pub fn of_code(code: u16) -> ErrorClass {
        match code {
            421 => ErrorClass::Closing421,
            400..=499 => ErrorClass::Rejected4xx,
            500..=599 => ErrorClass::Rejected5xx,
            _ => ErrorClass::Protocol,
        }
    }

    /// The stable name used in results files.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Refused => "refused",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Tls => "tls",
            ErrorClass::Rejected4xx => "rejected_4xx",
            ErrorClass::Rejected5xx => "rejected_5xx",
            ErrorClass::Rejected => "rejected",
            ErrorClass::Closing421 => "closing_421",
            ErrorClass::Disconnect => "disconnect",
            ErrorClass::Protocol => "protocol",
            ErrorClass::State => "state",
        }
    }
}
