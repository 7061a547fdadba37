//! The phases of an SMTP session, shared by timeouts, statistics and error text.

use std::fmt;

/// One step of an SMTP/LMTP session whose reply is awaited (or, for `Connect`, the TCP
/// handshake). Every latency histogram and every classified error is keyed by a `Phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// TCP (or unix socket) connection set-up.
    Connect,
    /// The server's 220 greeting.
    Banner,
    /// EHLO, HELO or LHLO.
    Ehlo,
    /// The STARTTLS command, until its 220 reply.
    StartTls,
    /// The TLS handshake (after STARTTLS's 220, or first thing with implicit TLS).
    TlsHandshake,
    /// AUTH, all of its round trips.
    Auth,
    /// MAIL FROM.
    Mail,
    /// RCPT TO, one sample per recipient.
    Rcpt,
    /// DATA, until the 354 intermediate reply.
    Data,
    /// End of data: the final reply after the body (or after BDAT LAST).
    DataDot,
    /// RSET between transactions.
    Rset,
    /// QUIT.
    Quit,
}

impl Phase {
    /// Every phase, in session order.
    pub const ALL: [Phase; 12] = [
        Phase::Connect,
        Phase::Banner,
        Phase::Ehlo,
        Phase::StartTls,
        Phase::TlsHandshake,
        Phase::Auth,
        Phase::Mail,
        Phase::Rcpt,
        Phase::Data,
        Phase::DataDot,
        Phase::Rset,
        Phase::Quit,
    ];

    /// The stable lower-case name used in results files and threshold expressions.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Banner => "banner",
            Phase::Ehlo => "ehlo",
            Phase::StartTls => "starttls",
            Phase::TlsHandshake => "tls_handshake",
            Phase::Auth => "auth",
            Phase::Mail => "mail",
            Phase::Rcpt => "rcpt",
            Phase::Data => "data",
            Phase::DataDot => "data_end",
            Phase::Rset => "rset",
            Phase::Quit => "quit",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
