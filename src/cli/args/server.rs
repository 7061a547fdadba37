//! The flag groups every mailbox workload shares: the store it runs against.

use std::path::PathBuf;

use clap::Args;

use super::lab::{StoreArg, StoreArgs};

/// Which store a mailbox workload runs against: a lab, or a server and its users.
#[derive(Debug, Clone, Args)]
pub struct MailboxServerArgs {
    /// Start a disposable store for the run.
    #[arg(long, value_enum, conflicts_with = "users_file")]
    pub lab: Option<StoreArg>,
    /// The lab store's users and settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The users to log in as (address password per line, Postal's format), with --target
    /// or --lmtp.
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
}
