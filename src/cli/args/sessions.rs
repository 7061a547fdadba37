//! The flags of the session workloads `mailbox pop3` and `mailbox imap`.

use clap::{Args, ValueEnum};

use crate::mailbox::plan::DEFAULT_MIX;

use super::client::TlsArgs;
use super::load::ShapeArgs;
use super::output::OutputArgs;
use super::send::ScaleArgs;
use super::server::{LabFillArgs, MailboxClientArgs, MailboxServerArgs};

/// Flags of `mailbench mailbox pop3`.
#[derive(Debug, Args)]
pub struct Pop3Args {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The POP3 server (when not using --lab): host[:port] (default port 110, or 995 with
    /// --tls implicit).
    #[arg(
        long,
        value_name = "HOST:PORT",
        required_unless_present = "lab",
        requires = "users_file",
        conflicts_with = "lab"
    )]
    pub target: Option<String>,
    /// A lab store's filling.
    #[command(flatten)]
    pub lab_fill: LabFillArgs,
    /// How many sessions, how fast.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Share of each mailbox's messages a session downloads.
    #[arg(long, default_value = "100", value_name = "PERCENT")]
    pub download: String,
    /// Share of each mailbox's messages a session deletes (the first ones; committed at
    /// QUIT).
    #[arg(long, default_value = "0", value_name = "PERCENT")]
    pub delete: String,
    /// At most this many downloads per session, whatever the share (rabid's -c).
    #[arg(long, value_name = "N")]
    pub max_download: Option<String>,
    /// Log in as a user drawn at random for each session, as rabid does, instead of the
    /// next one in turn.
    #[arg(long)]
    pub random_users: bool,
    /// Download with TOP and this many body lines instead of RETR.
    #[arg(long, value_name = "LINES")]
    pub top: Option<u32>,
    /// Ask LIST (every message's size) after STAT in each session.
    #[arg(long)]
    pub list: bool,
    /// Ask UIDL (every message's unique id) after STAT in each session.
    #[arg(long)]
    pub uidl: bool,
    /// How sessions log in.
    #[arg(long, value_enum, default_value = "user")]
    pub login: Pop3LoginArg,
    /// Send one command at a time even when the server offers PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// The client, TLS, the processes observed and the outputs.
    #[command(flatten)]
    pub run: SessionRunArgs,
    /// Splitting the run over several agents against one store (--target).
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// Flags of `mailbench mailbox imap`.
#[derive(Debug, Args)]
pub struct ImapArgs {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The IMAP server (when not using --lab): host[:port] (default port 143, or 993 with
    /// --tls implicit).
    #[arg(
        long,
        value_name = "HOST:PORT",
        required_unless_present = "lab",
        requires = "users_file",
        conflicts_with = "lab"
    )]
    pub target: Option<String>,
    /// A lab store's filling.
    #[command(flatten)]
    pub lab_fill: LabFillArgs,
    /// How many commands, how fast, and commands per session (--per-conn).
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The commands and their relative weights, name=weight,... (the default is
    /// imaptest-like; the commands are below).
    #[arg(long, value_name = "MIX", default_value = DEFAULT_MIX)]
    pub mix: String,
    /// The mailbox each session selects.
    #[arg(long, default_value = "INBOX", value_name = "NAME")]
    pub mailbox: String,
    /// Most messages one `fetch` asks for.
    #[arg(long, default_value = "10", value_name = "N")]
    pub fetch_range: String,
    /// Size of each appended message, headers included: exactly what the server stores
    /// (RFC822.SIZE); a size below the headers' gives the headers alone.
    #[arg(long, default_value = "10k", value_name = "SIZE")]
    pub append_size: String,
    /// How long an `idle` command stays in IDLE before DONE (what the server pushes
    /// meanwhile is state-checked); 0 goes in and straight out.
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub idle_for: String,
    /// Do not check responses against the session's model and other sessions.
    #[arg(long)]
    pub no_state_check: bool,
    /// Wait for the server's continuation before an APPEND's message even when it offers
    /// LITERAL+.
    #[arg(long)]
    pub no_literal_plus: bool,
    /// Log in as a user drawn at random for each session instead of the next in turn (in
    /// turn skips a user whose session is still open, so that while there are as many
    /// users as connections no user has two sessions at once: what one session of a user
    /// sees of another's EXPUNGE would be counted twice).
    #[arg(long)]
    pub random_users: bool,
    /// Commands in flight per session, as RFC 9051 §5.5 allows (imaptest sends up to 10);
    /// 1 waits for each completion.
    #[arg(long, default_value = "1", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub pipeline: u16,
    /// How sessions log in.
    #[arg(long, value_enum, default_value = "login")]
    pub login: ImapLoginArg,
    /// The client, TLS, the processes observed and the outputs.
    #[command(flatten)]
    pub run: SessionRunArgs,
    /// Splitting the run over several agents against one store (--target).
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// The flags `mailbox pop3` and `mailbox imap` end with, in one struct so that the two
/// workloads connect, use TLS, observe processes and write results alike.
#[derive(Debug, Args)]
pub struct SessionRunArgs {
    /// The client's connect and response limits.
    #[command(flatten)]
    pub client: MailboxClientArgs,
    /// TLS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// How IMAP sessions log in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImapLoginArg {
    /// LOGIN.
    Login,
    /// AUTHENTICATE PLAIN (with SASL-IR).
    Plain,
}

/// How POP3 sessions log in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Pop3LoginArg {
    /// USER and PASS.
    User,
    /// AUTH PLAIN.
    Plain,
    /// APOP (the server's greeting must carry a timestamp; the lab's does).
    Apop,
}
