//! The lab flags → lab options: which MTA or store `--lab` names, the MTA's shape and
//! settings (`relay --lab`, `lab postfix`), the store's users and settings
//! (`mailbox --lab`, `lab dovecot`).

use std::net::SocketAddr;

use crate::cli::args::{LabShape, MailFormatArg, MailboxServerArgs, PlacementArg, StoreArgs};
use crate::lab::{LabOptions, MailFormat, Mta, MtaLimits, QueueKind, Store, StoreOptions};
use crate::mailbox::bench::StoreSetup;
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

/// The lab store the flags ask for, or none (then no store flag may be given).
pub fn store_setup(a: &MailboxServerArgs, starttls: bool) -> Result<Option<StoreSetup>, String> {
    match *a.lab.as_slice() {
        [_, _, ..] => Err(format!(
            "--lab {}: this workload runs on one store; `mailbox profile` compares several",
            a.lab.iter().map(|s| s.name()).collect::<Vec<_>>().join(",")
        )),
        [store] => Ok(Some(StoreSetup {
            store,
            options: store_options(store, &a.store, starttls)?,
        })),
        [] if store_flags_given(&a.store) => Err(format!(
            "--users, --user-template, --password-template, --mail-format, --storage and \
             --store-conf shape a lab store: give --lab {}, or drop them and list the \
             server's users in --users-file",
            Store::names()
        )),
        [] => Ok(None),
    }
}
