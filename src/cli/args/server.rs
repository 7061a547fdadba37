//! The flag groups the mailbox workloads share: the store they run against, how a lab
//! store is filled first, and the client's limits.

use std::path::PathBuf;

use clap::Args;

use super::lab::{FillArgs, StoreArgs, store_parser};
use crate::lab::Store;

/// Which store a mailbox workload runs against: a lab, or a server and its users.
#[derive(Debug, Clone, Args)]
pub struct MailboxServerArgs {
    /// Start a disposable store for the run (`mailbox profile` compares several, e.g.
    /// `dovecot,cyrus`: the same users and schedule on each in rotating rounds).
    #[arg(
        long,
        value_parser = store_parser(),
        value_delimiter = ',',
        value_name = "STORE[,STORE…]",
        conflicts_with = "users_file"
    )]
    pub lab: Vec<Store>,
    /// The lab store's users and settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The users to log in as (address password per line, Postal's format), with --target
    /// or --lmtp.
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
}

/// How a lab store is filled before a workload runs (`pop3`, `imap`, `profile`).
#[derive(Debug, Clone, Args)]
pub struct LabFillArgs {
    /// --lab: messages delivered into each user's mailboxes before the run [default: 10].
    #[arg(long, value_name = "N")]
    pub fill: Option<String>,
    /// --lab: how the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
}

/// A mailbox client's connect and response limits (`pop3`, `imap`, `profile`; the TLS
/// flags stay apart, as `profile`'s users take none).
#[derive(Debug, Clone, Args)]
pub struct MailboxClientArgs {
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Longest wait for a response: a connection with nothing written or answered for this
    /// long fails as a timeout (at most 365d).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
}
