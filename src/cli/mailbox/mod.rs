//! `mailbox`: the mail-store workloads, one file each — `populate`, `pop3`, `imap`,
//! `profile` and `arrival` (`stores`: profile's comparison of stores or settings; `shard`:
//! a POP3 or IMAP run split over agents, with the users dealt disjointly). Each plans its
//! flags (with the shared planners of `cli::plan`) and hands the plan to `crate::mailbox`.

mod arrival;
mod imap;
mod pop3;
mod populate;
mod profile;
mod shard;
mod stores;

use crate::cli::args::MailboxCommand;
use crate::cli::exit::{self, EXIT_USAGE};
use crate::cli::finish::deliver;
use crate::cli::plan::store::Planned;
use crate::shutdown::Shutdown;
use crate::stats::Results;

pub use arrival::ARRIVAL_DEFAULTS;
pub use imap::IMAP_DEFAULTS;
pub use pop3::POP3_DEFAULTS;

/// Runs a `mailbox` workload. Errors carry their exit code.
pub async fn mailbox(c: MailboxCommand) -> Result<u8, (u8, String)> {
    match c {
        MailboxCommand::Populate(a) => populate::populate(*a).await,
        MailboxCommand::Pop3(a) => pop3::pop3(*a).await,
        MailboxCommand::Imap(a) => imap::imap(*a).await,
        // Several stores, or two settings of one, are compared.
        MailboxCommand::Profile(a) if a.server.lab.len() > 1 || a.compare_store_conf.is_some() => {
            stores::compare(*a).await
        }
        MailboxCommand::Profile(a) => profile::profile(*a).await,
        MailboxCommand::Arrival(a) => arrival::arrival(*a).await,
    }
}

/// Runs a planned session workload (`pop3`, `imap`, `profile`) the one way they all run:
/// a refused plan is a usage error; otherwise the lab's leftovers go, the store starts and
/// is filled, the sessions run, and the results are delivered under `render`'s text.
async fn run(
    plan: Result<Planned, String>,
    render: impl FnOnce(&Results) -> String,
) -> Result<u8, (u8, String)> {
    let mut p = plan.map_err(|e| (EXIT_USAGE, e))?;
    crate::cli::lab::clean_before_store(&p.setup);
    crate::cli::lab::keep_store_logs(&mut p.setup, p.outputs.files.json.as_deref());
    let shutdown = Shutdown::install();
    let outputs = p.outputs;
    let results = crate::mailbox::bench::workload(p.work, p.setup, p.fill, p.sut_pids, shutdown)
        .await
        .map_err(exit::mailbox)?;
    deliver(results, &outputs, render)
}
