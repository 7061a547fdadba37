//! A client's connection flags: the SMTP client's, and the TLS group every client takes.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// TLS use.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TlsArg {
    /// Plain text.
    None,
    /// Upgrade after the greeting: SMTP STARTTLS after EHLO, POP3 STLS, IMAP STARTTLS
    /// after CAPABILITY.
    Starttls,
    /// TLS from the first byte: SMTPS (465), POP3S (995), IMAPS (993).
    Implicit,
}

/// On or off.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// A client's TLS: mode, share of connections, CA, resumption.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// TLS: none (the default), starttls or implicit.
    #[arg(long, value_enum)]
    pub tls: Option<TlsArg>,
    /// Share of connections that use TLS (postal's -s); alone it means STARTTLS on that
    /// share (default 100 when --tls is given).
    #[arg(long, value_name = "PERCENT")]
    pub tls_percent: Option<String>,
    /// Verify server certificates against this PEM CA file (default: trust any).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS session resumption between connections.
    #[arg(long, value_enum, default_value = "on")]
    pub tls_resume: Switch,
}

/// The SMTP client: connections, TLS, AUTH, extensions.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Local addresses to bind, comma-separated, used round-robin (beyond 64k connections).
    #[arg(long, value_name = "IP,...")]
    pub source_ip: Option<String>,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Longest wait for a reply: a connection with nothing written or answered for this
    /// long fails as a timeout (at most 365d).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// TLS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// AUTH as user:pass, or 'senders' to log in as each --senders user with its password.
    #[arg(long, value_name = "USER:PASS|senders")]
    pub auth: Option<String>,
    /// Speak LMTP (LHLO; one reply per recipient after the body).
    #[arg(long)]
    pub lmtp: bool,
    /// Do not pipeline even when the server offers PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// Use BDAT instead of DATA when the server offers CHUNKING.
    #[arg(long)]
    pub chunking: bool,
    /// Name to send with EHLO.
    #[arg(long, default_value = "mailbench.test", value_name = "NAME")]
    pub helo: String,
}
