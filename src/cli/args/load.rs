//! The load flags `send`, `relay` and the mailbox workloads share: shape, messages, DKIM.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::client::ClientArgs;
use super::output::OutputArgs;

/// Spacing of open-loop arrivals.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalsArg {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (Poisson process).
    Poisson,
}

/// `--to`'s default (the relay spreads recipients over `--dns-domains` instead).
pub const DEFAULT_TO: &str = "rcpt@example.com";

/// The flags `send` and `relay` share: the load, the messages, the SMTP client, outputs.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// How many, how fast.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// What each message is.
    #[command(flatten)]
    pub message: MessageArgs,
    /// DKIM signing of each message.
    #[command(flatten)]
    pub dkim: DkimArgs,
    /// How to connect and speak.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Write Postal's per-minute CSV here.
    #[arg(long, value_name = "FILE")]
    pub postal_csv: Option<PathBuf>,
    /// Run the load this long first and keep it out of the statistics (recorded apart in
    /// the results): servers start processes and fill caches under the first load, and
    /// seed 002 found two minutes of sustained load before the full picture shows.
    #[arg(long, value_name = "DURATION")]
    pub warmup: Option<String>,
    /// Run the whole benchmark this many times (relay: on a fresh lab each round) and keep
    /// every round in one results file, with the median and spread in the summary.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub rounds: u32,
}

/// The load's shape: how many units, how fast, over how many connections (every load
/// command's).
#[derive(Debug, Clone, Args)]
pub struct ShapeArgs {
    /// Connections: closed loop uses this many, open loop at most this many (default: 16
    /// for send, 64 for relay). relay also takes a list, 1,4,16,64,256, and runs once per
    /// level on the same lab (a sweep).
    #[arg(short = 'c', long, value_name = "N")]
    pub concurrency: Option<String>,
    /// Open loop: intended message rate, e.g. 500/s or 12000/min.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Open loop: how arrivals are spaced.
    #[arg(long, value_enum, default_value = "constant")]
    pub arrivals: ArrivalsArg,
    /// Open loop: ramp the rate linearly up to --rate over this long.
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<String>,
    /// Rate at the start of the ramp.
    #[arg(long, value_name = "RATE", default_value = "1/s")]
    pub ramp_from: String,
    /// Stop after this many messages (default when no --duration is given: 1000 for send,
    /// 10000 for relay).
    #[arg(short = 'n', long, value_name = "N")]
    pub messages: Option<String>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Messages per connection, N or MIN-MAX; 0 keeps each connection for the whole run.
    #[arg(long, default_value = "0", value_name = "N|MIN-MAX")]
    pub per_conn: String,
    /// After Ctrl-C or the end of --duration, how long transactions in flight may finish.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub grace: String,
    /// Stop the run after this many failed transactions.
    #[arg(long, value_name = "N")]
    pub max_errors: Option<String>,
}

/// DKIM-signing every message (what a signing MTA would do, so that its cost can be
/// measured, or a verifier loaded).
#[derive(Debug, Clone, Args)]
pub struct DkimArgs {
    /// Sign every message with this PEM private key (Ed25519 or RSA, PKCS#8 or PKCS#1),
    /// e.g. from `openssl genpkey -algorithm ed25519`.
    #[arg(long, value_name = "FILE")]
    pub dkim_key: Option<PathBuf>,
    /// The signature's selector (s=).
    #[arg(
        long,
        default_value = "mailbench",
        value_name = "NAME",
        requires = "dkim_key"
    )]
    pub dkim_selector: String,
    /// The signing domain (d=); default: the domain of --from.
    #[arg(long, value_name = "DOMAIN", requires = "dkim_key")]
    pub dkim_domain: Option<String>,
}

/// What each message is: envelope and content.
#[derive(Debug, Clone, Args)]
pub struct MessageArgs {
    /// Reverse-path; placeholders {seq}, {rcpt}, {mod:N}, {rand:N}.
    #[arg(long, default_value = "mailbench@example.org", value_name = "ADDR")]
    pub from: String,
    /// Forward-path template; placeholders {seq}, {rcpt}, {mod:N}, {rand:N}.
    #[arg(long, default_value = DEFAULT_TO, value_name = "ADDR")]
    pub to: String,
    /// Senders from a Postal user list (address [password [flags]] per line).
    #[arg(long, value_name = "FILE")]
    pub senders: Option<PathBuf>,
    /// Recipients from a Postal user list.
    #[arg(long, value_name = "FILE")]
    pub recipients: Option<PathBuf>,
    /// Recipients per message.
    #[arg(long, default_value = "1", value_name = "N")]
    pub rcpts: String,
    /// Message size (headers included): 25k, or a range 0-10k (default: 1k for send, 25k
    /// for relay). A message is at least its headers and trace header (about 380 bytes):
    /// a smaller size is refused, and a range below it starts there.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Send this message file (headers and body) instead of generated messages. Each copy
    /// gets its own Message-ID (the file's is replaced) and a trace header.
    #[arg(long, value_name = "FILE", conflicts_with = "eml")]
    pub body: Option<PathBuf>,
    /// Send the *.eml files of this directory, round-robin (each copy with its own
    /// Message-ID and trace header, as --body).
    #[arg(long, value_name = "DIR")]
    pub eml: Option<PathBuf>,
    /// Add a base64 attachment of this size to generated messages.
    #[arg(long, value_name = "SIZE")]
    pub attach: Option<String>,
}
