//! The lab flags → lab options: which MTA or store `--lab` names, the MTA's shape and
//! settings (`relay --lab`, `lab postfix`), the store's users and settings
//! (`mailbox --lab`, `lab dovecot`).

use std::net::SocketAddr;

use crate::cli::args::{
    LabShape, LoggingArg, LookupArg, MailFormatArg, MailboxServerArgs, PlacementArg, StoreArgs,
};
use crate::lab::ldap::proxy::Faults;
use crate::lab::{
    Features, LabOptions, LookupBackend, MailFormat, Mta, MtaLimits, MtaLogging, QueueKind,
    RecipientLookup, Store, StoreOptions,
};
use crate::mailbox::bench::StoreSetup;
use crate::message::address::AddrTemplate;
use crate::send::plan::Addresses;
use crate::units;

/// Refuses what the MTA's lab does not declare (STARTTLS on its entry, DKIM signing
/// through a milter, LMTP onward), naming the flag and the labs that do.
pub fn entry_features(mta: Mta, opts: &LabOptions) -> Result<(), String> {
    type Has = fn(&Features) -> bool;
    let asked: [(bool, &str, Has); 3] = [
        (opts.starttls, "--tls starttls (--starttls)", |f| f.starttls),
        (opts.dkim.is_some(), "--mta-dkim-key", |f| f.dkim),
        (opts.relay_lmtp, "--relay lmtp:", |f| f.lmtp_onward),
    ];
    match asked
        .iter()
        .find(|(on, _, has)| *on && !has(&mta.features()))
    {
        Some((_, flag, has)) => Err(format!(
            "{flag}: the {} lab does not do this yet; only {} does",
            mta.name(),
            Mta::having(*has)
        )),
        None => Ok(()),
    }
}

/// Refuses `--mta-logging off` for an MTA whose lab cannot run without its log, and
/// `multilog` for one that does not declare it.
pub fn logging_knob(mta: Mta, opts: &LabOptions) -> Result<(), String> {
    let has = mta.features();
    match opts.logging {
        MtaLogging::On => Ok(()),
        MtaLogging::Off if has.logging_off => Ok(()),
        MtaLogging::Off => Err(format!(
            "--mta-logging off: the {} lab cannot run without its log yet; only {} can",
            mta.name(),
            Mta::having(|f| f.logging_off)
        )),
        MtaLogging::Multilog if has.multilog => {
            if std::path::Path::new("/usr/bin/multilog").exists() {
                Ok(())
            } else {
                Err("--mta-logging multilog: multilog is missing; run scripts/install-deps.sh --mtas (Debian's daemontools)".into())
            }
        }
        MtaLogging::Multilog => Err(format!(
            "--mta-logging multilog: the {} lab does not log through multilog; only {} does",
            mta.name(),
            Mta::having(|f| f.multilog)
        )),
    }
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
                // A key OpenDKIM cannot sign with is refused before anything starts.
                let pem = std::fs::read(key).map_err(|e| {
                    format!("--mta-dkim-key {}: cannot read it: {e}", key.display())
                })?;
                crate::lab::opendkim::key_kind(&pem, &key.display().to_string())?;
                Some(crate::lab::DkimSigning {
                    key: key.clone(),
                    domain: shape.mta_dkim_domain.clone(),
                    selector: shape.mta_dkim_selector.clone(),
                })
            }
            None => None,
        },
        starttls,
        lookup: None,
        logging: match shape.mta_logging {
            LoggingArg::On => MtaLogging::On,
            LoggingArg::Off => MtaLogging::Off,
            LoggingArg::Multilog => MtaLogging::Multilog,
        },
        between: None,
    })
}

/// The most recipients the lab's lookup table is built with.
const MAX_LOOKUP_RECIPIENTS: u64 = 1_000_000;

/// `--mta-lookup` and `--ldap-fault` for `mtas`: the backend with the run's recipients
/// (`to` rendered for messages 0..`messages`, `rcpts` each), or none.
pub fn lookup(
    shape: &LabShape,
    mtas: &[Mta],
    to: &Addresses,
    rcpts: u32,
    messages: u64,
) -> Result<Option<RecipientLookup>, String> {
    let faults = ldap_faults(&shape.ldap_fault)?;
    let backend = match shape.mta_lookup {
        LookupArg::None if faults != Faults::default() => {
            return Err(
                "--ldap-fault: the lab has no LDAP directory; add --mta-lookup ldap".into(),
            );
        }
        LookupArg::None => return Ok(None),
        LookupArg::Hash if faults != Faults::default() => {
            return Err(
                "--ldap-fault: the hash table takes no faults; use --mta-lookup ldap".into(),
            );
        }
        LookupArg::Hash => LookupBackend::Hash,
        LookupArg::Ldap => {
            crate::lab::ldap::check()?;
            LookupBackend::Ldap(faults)
        }
    };
    if let Some(other) = mtas.iter().find(|m| !m.features().lookups) {
        return Err(format!(
            "--mta-lookup: the {} lab has no recipient lookups yet; only {} does",
            other.name(),
            Mta::having(|f| f.lookups)
        ));
    }
    Ok(Some(RecipientLookup {
        backend,
        recipients: std::sync::Arc::new(recipients(to, rcpts, messages)?),
    }))
}

/// Every distinct recipient of the run, in first-use order.
fn recipients(to: &Addresses, rcpts: u32, messages: u64) -> Result<Vec<String>, String> {
    let template: &AddrTemplate = match to {
        Addresses::List(users) => return Ok(users.iter().map(|u| u.address.clone()).collect()),
        Addresses::Template(t) => t,
    };
    if template.is_random() {
        return Err("--mta-lookup: --to with {rand:N} cannot be listed in the lookup table; use {mod:N} or {seq}".into());
    }
    let total = messages.saturating_mul(rcpts as u64);
    if total > MAX_LOOKUP_RECIPIENTS {
        return Err(format!(
            "--mta-lookup: the run's recipients are too many for the lab's table ({messages} messages x {rcpts}); give -n with at most {MAX_LOOKUP_RECIPIENTS} recipients in all"
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut rng = fastrand::Rng::with_seed(0);
    let mut out = Vec::new();
    for seq in 0..messages {
        for i in 0..rcpts {
            let a = template.render(seq, i, &mut rng);
            if seen.insert(a.clone()) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// `--ldap-fault delay=DURATION` and `down=LENGTH@FROM`.
fn ldap_faults(list: &[String]) -> Result<Faults, String> {
    let mut f = Faults::default();
    for spec in list {
        let bad = || {
            format!(
                "--ldap-fault {spec:?}: write delay=DURATION (delay=200ms) or down=LENGTH@FROM (down=5s@10s)"
            )
        };
        match spec.split_once('=').ok_or_else(bad)? {
            ("delay", d) => {
                f.delay = Some(
                    crate::units::duration(d).map_err(|e| format!("--ldap-fault {spec:?}: {e}"))?,
                )
            }
            ("down", w) => {
                let (length, from) = w.split_once('@').ok_or_else(bad)?;
                let d = |t: &str| {
                    crate::units::duration(t).map_err(|e| format!("--ldap-fault {spec:?}: {e}"))
                };
                let length = d(length)?;
                if length.is_zero() {
                    return Err(format!(
                        "--ldap-fault {spec:?}: a down window needs a length above 0"
                    ));
                }
                f.down = Some((length, d(from)?));
            }
            _ => return Err(bad()),
        }
    }
    Ok(f)
}

/// The store flags given (they only mean something with a lab store).
pub fn store_flags_given(a: &StoreArgs) -> Vec<&'static str> {
    [
        ("--users", a.users.is_some()),
        ("--user-template", a.user_template.is_some()),
        ("--password-template", a.password_template.is_some()),
        ("--mail-format", a.mail_format.is_some()),
        ("--storage", a.storage.is_some()),
        ("--store-conf", !a.store_conf.is_empty()),
        ("--server-stats", a.server_stats),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
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
            keep_logs: None,
        })),
        [] if !store_flags_given(&a.store).is_empty() => {
            let given = store_flags_given(&a.store);
            let them = if given.len() == 1 { "it" } else { "them" };
            Err(format!(
                "{}: only for a lab store, which mailbench starts and reads (a --target server is not one): give --lab {}, or drop {them} and list the server's users in --users-file",
                given.join(", "),
                Store::names()
            ))
        }
        [] => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ldap_faults_read_a_delay_and_a_down_window() {
        let f = ldap_faults(&["delay=200ms".into(), "down=5s@10s".into()]).expect("valid");
        assert_eq!(f.delay, Some(Duration::from_millis(200)));
        assert_eq!(
            f.down,
            Some((Duration::from_secs(5), Duration::from_secs(10)))
        );
        for bad in ["down=5s", "down=0s@1s", "slow=1s", "delay"] {
            assert!(ldap_faults(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_lookup_table_lists_each_recipient_of_the_run_once() {
        let t = AddrTemplate::parse("u{mod:3}@x.test").expect("template");
        let got = recipients(&Addresses::Template(t), 1, 10).expect("listed");
        assert_eq!(got, ["u0@x.test", "u1@x.test", "u2@x.test"]);
        let r = AddrTemplate::parse("u{rand:9}@x.test").expect("template");
        assert!(recipients(&Addresses::Template(r), 1, 10).is_err());
    }
}
