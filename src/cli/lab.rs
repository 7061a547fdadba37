//! `mailbench lab`: a disposable lab server for manual use until Ctrl-C — an MTA that
//! relays, or a mail store with numbered users (filled when asked) — and the sweep of
//! what killed runs left, which every command that starts a lab does first. The lab
//! flags are planned in `plan::lab`.

use super::args::{DovecotLabArgs, LabCommand, MtaLabArgs};
use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use super::plan::lab::{entry_features, options, store_options};
use crate::lab::watch::{Watchdog, Watched};
use crate::lab::{LabError, LabServer, Mta};
use crate::mailbox::bench::StoreSetup;
use crate::shutdown::Shutdown;
use crate::transport::target::parse_tcp;
use crate::units;

/// Cleans the labs that runs killed outright (`kill -9`) left behind — their servers,
/// mounts and directories — once a command's flags are checked and it is about to start
/// labs of its own, saying so in one line per dead run (never before a usage error, which
/// must stay one line). Labs of runs still alive are left alone.
pub fn clean_leftovers(who: &str) {
    for line in crate::lab::leftovers::sweep() {
        crate::run::live::say(&format!("mailbench {who}: {line}"));
    }
}

/// `clean_leftovers` for a mailbox workload, once its flags are checked, when it will
/// start a lab store.
pub fn clean_before_store(setup: &Option<StoreSetup>) {
    if setup.is_some() {
        clean_leftovers("mailbox");
    }
}

/// Has a lab store (and a lab MTA in front of it) keep its logs beside the results file
/// `json`, when the run writes one.
pub fn keep_store_logs(setup: &mut Option<StoreSetup>, json: Option<&std::path::Path>) {
    if let Some(s) = setup {
        s.keep_logs = json.map(std::path::Path::to_path_buf);
    }
}

/// Runs `lab postfix|exim|opensmtpd|sendmail|qmail` or `lab dovecot|cyrus`: start, print where
/// it listens, wait for Ctrl-C or SIGTERM, clean up.
pub async fn lab(c: LabCommand) -> Result<u8, (u8, String)> {
    match c {
        LabCommand::Mta(mta, a) => relaying(mta, a).await,
        LabCommand::Store(kind, a) => store_lab(kind, a).await,
    }
}

async fn relaying(mta: Mta, a: MtaLabArgs) -> Result<u8, (u8, String)> {
    let (lmtp, next) = match a.relay.strip_prefix("lmtp:") {
        Some(addr) => (true, addr),
        None => (false, a.relay.as_str()),
    };
    let relay = parse_tcp(next, 2525, "--relay").map_err(|e| (EXIT_USAGE, e))?;
    let mut opts = options(&a.shape, relay, a.starttls).map_err(|e| (EXIT_USAGE, e))?;
    opts.relay_lmtp = lmtp;
    entry_features(mta, &opts).map_err(|e| (EXIT_USAGE, e))?;
    super::plan::lab::logging_knob(mta, &opts).map_err(|e| (EXIT_USAGE, e))?;
    if a.shape.mta_lookup != crate::cli::args::LookupArg::None || !a.shape.ldap_fault.is_empty() {
        return Err((EXIT_USAGE, "--mta-lookup and --ldap-fault need a run's recipients: give them to relay --lab postfix".into()));
    }
    mta.check().map_err(|e| (EXIT_USAGE, e))?;
    clean_leftovers("lab");
    let shutdown = Shutdown::install_saying(
        "mailbench lab: stopping the lab MTA and removing its directories",
    );
    let lab: std::sync::Arc<dyn crate::lab::MtaLab> =
        match crate::lab::interrupt::start_mta(mta, opts, &shutdown.stop).await {
            Ok(lab) => std::sync::Arc::from(lab),
            // A lab that runs until a signal: the signal came early, and nothing is left.
            Err(e @ LabError::Interrupted) => {
                crate::run::live::say(&format!("mailbench lab: {e}"));
                return Ok(EXIT_OK);
            }
            Err(e @ LabError::Setting(_)) => return Err((EXIT_USAGE, e.to_string())),
            Err(e) => return Err((EXIT_FAILED, e.to_string())),
        };
    let mut text = notices(lab.as_ref());
    text += &describe(lab.as_ref());
    text += &format!(
        "relaying to {relay}{}; inject into {}; Ctrl-C stops and removes everything\n",
        if lmtp { " over LMTP" } else { "" },
        lab.entry()
    );
    crate::report::print(&text);
    // Until the signal, or until the MTA stops answering: said in one line, exit 2.
    let stalled = tokio_util::sync::CancellationToken::new();
    let watchdog = {
        let s = stalled.clone();
        Watchdog::start(Watched::mta(mta.name(), lab.clone()), move |_| s.cancel())
    };
    tokio::select! {
        _ = shutdown.stop.cancelled() => {}
        _ = stalled.cancelled() => {}
    }
    let stall = watchdog.stalled();
    drop(watchdog);
    drop(lab);
    match stall {
        Some(line) => Err((
            EXIT_FAILED,
            format!("{line}; the lab is stopped and removed"),
        )),
        None => Ok(EXIT_OK),
    }
}

/// `lab dovecot|cyrus`: any store of the registry, started, filled and described alike.
async fn store_lab(store: crate::lab::Store, a: DovecotLabArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let options = store_options(store, &a.store, a.starttls).map_err(usage)?;
    let per_user = units::count(&a.fill).map_err(|e| usage(format!("--fill: {e}")))?;
    let fill = super::plan::fill::optional(&a.filling, per_user).map_err(usage)?;
    let setup = StoreSetup {
        store,
        options,
        keep_logs: None,
    };
    clean_leftovers("lab");
    let shutdown = Shutdown::install_saying(
        "mailbench lab: stopping the lab store and removing its directories",
    );
    // The fill has said what it delivered, as it ended; the start, the store's notices
    // (on stderr, where a workload's notices go): not repeated below.
    let (lab, _filled) = crate::mailbox::bench::store(setup, fill, &shutdown)
        .await
        .map_err(super::exit::mailbox)?;
    let mut text = describe(lab.as_ref());
    text += &format!(
        "users and passwords (for --users-file) in {}; Ctrl-C stops and removes everything\n",
        lab.users_file().display()
    );
    crate::report::print(&text);
    shutdown.stop.cancelled().await;
    drop(lab);
    Ok(EXIT_OK)
}

/// What a lab MTA complained of while it started, one `notice:` line each (a lab store's
/// start says its own).
fn notices(lab: &(impl LabServer + ?Sized)) -> String {
    lab.notices()
        .iter()
        .map(|n| format!("notice: {n}\n"))
        .collect()
}

/// What `mailbench lab` prints about any lab server.
fn describe(lab: &(impl LabServer + ?Sized)) -> String {
    let mut text = String::new();
    for line in lab.describe() {
        text += &format!("{line}\n");
    }
    if let Some(cert) = lab.certificate() {
        text += &format!("  STARTTLS certificate {} (for --tls-ca)\n", cert.display());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_registered_mta_is_a_lab_subcommand_that_starts_that_mta() {
        for m in crate::lab::MTAS {
            let cli = crate::cli::args::Cli::try_parse_from(["mailbench", "lab", m.name()])
                .unwrap_or_else(|e| panic!("`lab {}` is not a subcommand: {e}", m.name()));
            let crate::cli::args::Command::Lab(c) = cli.command else {
                panic!("`lab {}` parsed as another command", m.name());
            };
            let LabCommand::Mta(kind, _) = c else {
                panic!("`lab {}` is not an MTA lab", m.name());
            };
            assert_eq!(kind, *m);
        }
    }
}
