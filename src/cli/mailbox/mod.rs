//! `mailbox`: the mail-store workloads, one file each — `populate`, `pop3`, `imap`,
//! `profile` and `arrival`. Each plans its flags (with the shared planners of
//! `cli::plan`) and hands the plan to `crate::mailbox`.

mod arrival;
mod imap;
mod pop3;
mod populate;
mod profile;

use crate::cli::args::MailboxCommand;

pub use arrival::ARRIVAL_DEFAULTS;
pub use imap::IMAP_DEFAULTS;
pub use pop3::POP3_DEFAULTS;

/// Runs a `mailbox` workload. Errors carry their exit code.
pub async fn mailbox(c: MailboxCommand) -> Result<u8, (u8, String)> {
    match c {
        MailboxCommand::Populate(a) => populate::populate(*a).await,
        MailboxCommand::Pop3(a) => pop3::pop3(*a).await,
        MailboxCommand::Imap(a) => imap::imap(*a).await,
        MailboxCommand::Profile(a) => profile::profile(*a).await,
        MailboxCommand::Arrival(a) => arrival::arrival(*a).await,
    }
}
