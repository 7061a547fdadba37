//! `mailbench lab`: a disposable lab server for manual use until Ctrl-C — an MTA that
//! relays, or a mail store with numbered users (filled when asked) — and the lab flags
//! `relay --lab` and `mailbox --lab` share with it.

use std::net::SocketAddr;

use super::args::{
    DovecotLabArgs, LabCommand, LabShape, MailFormatArg, MtaLabArgs, PlacementArg, StoreArgs,
};
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::lab::{
    LabError, LabOptions, LabServer, MailFormat, Mta, MtaLimits, QueueKind, Store, StoreOptions,
};
use crate::mailbox::bench::StoreSetup;
use crate::shutdown::Shutdown;
use crate::transport::target::parse_tcp;
use crate::units;

/// Refuses what only the Postfix lab does (STARTTLS on its entry, DKIM signing through a
/// milter, LMTP onward) for another MTA, naming the flag.
pub fn postfix_only(mta: Mta, opts: &LabOptions) -> Result<(), String> {
    if mta == Mta::Postfix {
        return Ok(());
    }
    let flag = if opts.starttls {
        "--tls starttls (--starttls)"
    } else if opts.dkim.is_some() {
        "--mta-dkim-key"
    } else if opts.relay_lmtp {
        "--relay lmtp:"
    } else {
        return Ok(());
    };
    Err(format!(
        "{flag}: the {} lab does not do this yet; only --lab postfix does",
        mta.name()
    ))
}

fn placement(p: PlacementArg) -> QueueKind {
    match p {
        PlacementArg::Tmpfs => QueueKind::Tmpfs,
        PlacementArg::Disk => QueueKind::Disk,
    }
}

/// `key=value` overrides of a server's own settings, as `flag` gave them.
pub fn settings(
    flag: &str,
    list: &[String],
    example: &str,
) -> Result<Vec<(String, String)>, String> {
    list.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("{flag} {kv:?}: write key=value, e.g. {example}"))
        })
        .collect()
}

/// The lab MTA's options from its flags; it relays to `relay` over SMTP.
pub fn options(shape: &LabShape, relay: SocketAddr, starttls: bool) -> Result<LabOptions, String> {
    let settings = settings("--mta-conf", &shape.mta_conf, "default_process_limit=100")?;
    let positive = |flag: &str, n: Option<u32>| match n {
        Some(0) => Err(format!("{flag} 0: give at least 1")),
        n => Ok(n),
    };
    if shape.hops == 0 || shape.hops > 8 {
        return Err("--hops must be between 1 and 8".into());
    }
    Ok(LabOptions {
        hops: shape.hops,
        queue: placement(shape.queue),
        settings,
        limits: MtaLimits {
            processes: positive("--mta-processes", shape.mta_processes)?,
            per_destination: positive("--mta-dest-concurrency", shape.mta_dest_concurrency)?,
        },
        relay,
        relay_lmtp: false,
        hold: false,
        dns: None,
        dkim: match &shape.mta_dkim_key {
            Some(key) => {
                crate::lab::opendkim::check()?;
                Some(crate::lab::DkimSigning {
                    key: key.clone(),
                    domain: shape.mta_dkim_domain.clone(),
                    selector: shape.mta_dkim_selector.clone(),
                })
            }
            None => None,
        },
        starttls,
    })
}

/// Whether any store flag was given (they only mean something with a lab store).
pub fn store_flags_given(a: &StoreArgs) -> bool {
    a.users.is_some()
        || a.user_template.is_some()
        || a.password_template.is_some()
        || a.mail_format.is_some()
        || a.storage.is_some()
        || !a.store_conf.is_empty()
}

/// The lab store's options from its flags; its settings are named as `store` names them.
pub fn store_options(store: Store, a: &StoreArgs, starttls: bool) -> Result<StoreOptions, String> {
    let users = match &a.users {
        Some(n) => units::count(n).map_err(|e| format!("--users: {e}"))?,
        None => 100,
    };
    if users == 0 || users > 1_000_000 {
        return Err("--users must be between 1 and 1000000".into());
    }
    let user_template = a
        .user_template
        .clone()
        .unwrap_or_else(|| "user{num}@store.test".into());
    if users > 1 && !user_template.contains("{num}") {
        return Err(format!(
            "--user-template {user_template:?} gives every user the same address; put {{num}} in it, e.g. user{{num}}@store.test"
        ));
    }
    if !crate::message::users::valid_address(&user_template.replace("{num}", "1")) {
        return Err(format!(
            "--user-template {user_template:?} is not an address; write e.g. user{{num}}@store.test"
        ));
    }
    Ok(StoreOptions {
        users: users as u32,
        user_template,
        password_template: a
            .password_template
            .clone()
            .unwrap_or_else(|| "secret{num}".into()),
        mail_format: match a.mail_format {
            None | Some(MailFormatArg::Maildir) => MailFormat::Maildir,
            Some(MailFormatArg::Mdbox) => MailFormat::Mdbox,
        },
        placement: placement(a.storage.unwrap_or(PlacementArg::Tmpfs)),
        starttls,
        settings: settings(
            store.settings().flag,
            &a.store_conf,
            store.settings().example,
        )?,
        server_stats: a.server_stats,
    })
}

/// Cleans the labs that runs killed outright (`kill -9`) left behind — their servers,
/// mounts and directories — once a command's flags are checked and it is about to start
/// labs of its own, saying so in one line per dead run (never before a usage error, which
/// must stay one line). Labs of runs still alive are left alone.
pub fn clean_leftovers(who: &str) {
    for line in crate::lab::leftovers::sweep() {
        crate::run::live::say(&format!("mailbench {who}: {line}"));
    }
}

/// Runs `lab postfix|exim|opensmtpd|sendmail` or `lab dovecot`: start, print where it
/// listens, wait for Ctrl-C or SIGTERM, clean up.
pub async fn lab(c: LabCommand) -> Result<u8, (u8, String)> {
    match c {
        LabCommand::Postfix(a) => relaying(Mta::Postfix, a).await,
        LabCommand::Exim(a) => relaying(crate::lab::exim::KIND, a).await,
        LabCommand::Opensmtpd(a) => relaying(crate::lab::opensmtpd::KIND, a).await,
        LabCommand::Sendmail(a) => relaying(crate::lab::sendmail::KIND, a).await,
        LabCommand::Dovecot(a) => dovecot(a).await,
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
    postfix_only(mta, &opts).map_err(|e| (EXIT_USAGE, e))?;
    mta.check().map_err(|e| (EXIT_USAGE, e))?;
    clean_leftovers("lab");
    let shutdown = Shutdown::install_saying(
        "mailbench lab: stopping the lab MTA and removing its directories",
    );
    let lab = match tokio::task::spawn_blocking(move || mta.start(&opts)).await {
        Ok(Ok(lab)) => lab,
        Ok(Err(e @ LabError::Setting(_))) => return Err((EXIT_USAGE, e.to_string())),
        Ok(Err(e)) => return Err((EXIT_FAILED, e.to_string())),
        Err(e) => return Err((EXIT_FAILED, e.to_string())),
    };
    let mut text = describe(lab.as_ref());
    text += &format!(
        "relaying to {relay}{}; inject into {}; Ctrl-C stops and removes everything\n",
        if lmtp { " over LMTP" } else { "" },
        lab.entry()
    );
    crate::report::print(&text);
    shutdown.stop.cancelled().await;
    drop(lab);
    Ok(EXIT_OK)
}

async fn dovecot(a: DovecotLabArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let store = crate::lab::dovecot::KIND;
    let options = store_options(store, &a.store, a.starttls).map_err(usage)?;
    let per_user = units::count(&a.fill).map_err(|e| usage(format!("--fill: {e}")))?;
    let fill = match per_user {
        0 => None,
        n => Some(super::mailbox::fill(&a.filling, n).map_err(usage)?),
    };
    let setup = StoreSetup { store, options };
    clean_leftovers("lab");
    let shutdown = Shutdown::install_saying(
        "mailbench lab: stopping the lab store and removing its directories",
    );
    let (lab, filled) = crate::mailbox::bench::store(setup, fill, &shutdown)
        .await
        .map_err(super::mailbox::exit)?;
    let mut text = describe(lab.as_ref());
    if let Some(r) = filled {
        text += &format!(
            "filled: {} messages delivered over LMTP in {:.2} s\n",
            r.counters.accepted, r.duration_s
        );
    }
    text += &format!(
        "users and passwords (for --users-file) in {}; Ctrl-C stops and removes everything\n",
        lab.users_file().display()
    );
    crate::report::print(&text);
    shutdown.stop.cancelled().await;
    drop(lab);
    Ok(EXIT_OK)
}

/// What `mailbench lab` prints about any lab server.
fn describe(lab: &(impl LabServer + ?Sized)) -> String {
    let mut text = String::new();
    for n in lab.notices() {
        text += &format!("notice: {n}\n");
    }
    for line in lab.describe() {
        text += &format!("{line}\n");
    }
    if let Some(cert) = lab.certificate() {
        text += &format!("  STARTTLS certificate {} (for --tls-ca)\n", cert.display());
    }
    text
}
