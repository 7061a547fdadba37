//! `mailbox populate`: fill a store's mailboxes over LMTP, or over IMAP APPEND with
//! flags, and report the rate.

use crate::cli::args::{PopulateArgs, ViaArg};
use crate::cli::exit::{self, EXIT_USAGE};
use crate::cli::finish::deliver;
use crate::cli::plan::{fill, lab, output, store};
use crate::lab::{Store, StoreUser};
use crate::mailbox::bench::StoreSetup;
use crate::relay::fault::{FaultKind, FaultPlan, FaultWhen};
use crate::shutdown::Shutdown;
use crate::transport::target::{Target, parse_target};
use crate::units;

/// Where `populate` delivers.
enum Destination {
    /// A lab store, started for the run.
    Lab(StoreSetup),
    /// A store of one's own: its LMTP server and users.
    Own(Target, Vec<StoreUser>),
}

/// Runs `mailbox populate`. Errors carry their exit code.
pub(super) async fn populate(a: PopulateArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let mut setup = lab::store_setup(&a.server, false).map_err(usage)?;
    let fault = store_fault(&a, setup.as_mut()).map_err(usage)?;
    let per_user = units::count(&a.per_user).map_err(|e| usage(format!("--per-user: {e}")))?;
    if per_user == 0 {
        return Err(usage("--per-user must be at least 1".into()));
    }
    if a.via == ViaArg::Imap || a.imap.is_some() {
        return populate_imap(&a, setup, per_user, fault).await;
    }
    if a.flags.is_some() {
        return Err(usage(
            "--flags are set over IMAP: give --via imap (LMTP delivers without flags)".into(),
        ));
    }
    let (outputs, progress) =
        output::plan(&a.out, None, &crate::send::THRESHOLDS).map_err(usage)?;
    let mut fill = fill::fill(&a.filling, per_user).map_err(usage)?;
    fill.send.load.progress = progress;
    fill.send.config_json["interval_s"] = progress.interval.as_secs_f64().into();
    fill.send.config_json["thresholds"] = a.out.threshold.clone().into();
    fill.send.config_json["per_user"] = per_user.into();
    if let Some(f) = &fault {
        fill.send.config_json["fault"] = f.label().into();
    }
    let into = match (setup, &a.lmtp, &a.server.users_file) {
        (Some(mut setup), _, _) => {
            setup.keep_logs = outputs.files.json.clone();
            Destination::Lab(setup)
        }
        (None, Some(lmtp), Some(file)) => {
            let target = parse_target(lmtp, 24).map_err(|e| usage(format!("--lmtp: {e}")))?;
            let users = store::users_file(file).map_err(usage)?;
            fill.send.config_json["target"] = lmtp.clone().into();
            Destination::Own(target, users)
        }
        _ => {
            return Err(usage(format!(
                "give --lab {}, or --lmtp ADDR and --users-file FILE",
                Store::names()
            )));
        }
    };
    if matches!(into, Destination::Lab(_)) {
        crate::cli::lab::clean_leftovers("mailbox");
    }
    let shutdown = Shutdown::install();
    let results = match into {
        Destination::Lab(setup) => {
            crate::mailbox::bench::populate(setup, fill, fault, shutdown).await
        }
        Destination::Own(target, users) => {
            crate::mailbox::bench::populate_own(fill, target, &users, shutdown).await
        }
    }
    .map_err(exit::mailbox)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox populate: {} messages over LMTP in {:.2} s",
            r.counters.sent, r.duration_s
        );
        crate::report::text::summary(r, &headline) + &crate::report::text::store::fault_line(r)
    })
}

/// `--fault`: parsed as relay's, and only `crash` or `power-loss` at a count, on a lab
/// store that takes them; `power-loss` puts the store's mail on LazyFS.
fn store_fault(
    a: &PopulateArgs,
    setup: Option<&mut StoreSetup>,
) -> Result<Option<FaultPlan>, String> {
    let Some(spec) = &a.fault else {
        return Ok(None);
    };
    let f = crate::cli::plan::fault::parse(spec)?;
    let label = f.label();
    if !matches!(f.when, FaultWhen::Accepted(_)) || matches!(f.kind, FaultKind::DiskFull { .. }) {
        return Err(format!(
            "--fault {label}: a store takes crash@N or power-loss@N (after N accepted messages)"
        ));
    }
    let Some(setup) = setup else {
        return Err(format!(
            "--fault {label}: a fault acts on a lab store started here; add --lab dovecot"
        ));
    };
    if !setup.store.takes_faults() {
        let takers: Vec<&str> = crate::lab::STORES
            .iter()
            .filter(|s| s.takes_faults())
            .map(|s| s.name())
            .collect();
        return Err(format!(
            "--fault {label}: the {} lab cannot take this fault yet; it runs on {}",
            setup.store.name(),
            takers.join(", ")
        ));
    }
    if f.kind == FaultKind::PowerLoss {
        setup.options.placement = crate::lab::QueueKind::Lazyfs;
    }
    Ok(Some(f))
}

/// `populate --via imap`: APPEND with flags, into the lab or a store of one's own.
async fn populate_imap(
    a: &PopulateArgs,
    setup: Option<StoreSetup>,
    per_user: u64,
    fault: Option<FaultPlan>,
) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    if a.filling.eml.is_some() {
        return Err(usage(
            "--eml fills over LMTP only; drop --via imap, or use generated messages".into(),
        ));
    }
    let (outputs, _) =
        output::plan(&a.out, None, &crate::mailbox::IMAP_THRESHOLDS).map_err(usage)?;
    let flags = match &a.flags {
        Some(spec) => crate::mailbox::append::parse_flags(spec).map_err(usage)?,
        None => Vec::new(),
    };
    let folders = units::count(&a.filling.folders).map_err(|e| usage(format!("--folders: {e}")))?;
    if folders == 0 || folders > 100 {
        return Err(usage("--folders must be between 1 and 100".into()));
    }
    let size =
        units::size_range(&a.filling.fill_size).map_err(|e| usage(format!("--fill-size: {e}")))?;
    let concurrency = units::count(&a.filling.fill_concurrency)
        .map_err(|e| usage(format!("--fill-concurrency: {e}")))?;
    if concurrency == 0 {
        return Err(usage("--fill-concurrency must be at least 1".into()));
    }
    let (imap, users) = match (&setup, &a.imap, &a.server.users_file) {
        (Some(_), _, _) => (None, Vec::new()),
        (None, Some(t), Some(f)) => (
            Some(parse_target(t, 143).map_err(|e| usage(format!("--imap: {e}")))?),
            store::users_file(f).map_err(usage)?,
        ),
        _ => {
            return Err(usage(format!(
                "give --lab {}, or --imap HOST:PORT and --users-file FILE",
                Store::names()
            )));
        }
    };
    let plan = crate::mailbox::append::AppendPlan {
        imap,
        users,
        per_user,
        folders: folders as u32,
        size,
        flags: flags.clone(),
        concurrency: concurrency as usize,
        connect: crate::mailbox::profile::user::connect_options(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_secs(60),
        ),
        config_json: serde_json::json!({
            "protocol": "imap",
            "via": "append",
            "per_user": per_user,
            "folders": folders,
            "size": a.filling.fill_size,
            "flags": flags.iter().map(|(f, s)| serde_json::json!({"flag": f, "share": s})).collect::<Vec<_>>(),
            "fill_concurrency": concurrency,
            "lab": a.server.lab.first().copied().map(Store::name),
            "thresholds": a.out.threshold,
            "fault": fault.map(|f| f.label()),
        }),
        accept_log: None,
    };
    let mut setup = setup;
    crate::cli::lab::clean_before_store(&setup);
    crate::cli::lab::keep_store_logs(&mut setup, outputs.files.json.as_deref());
    let shutdown = Shutdown::install();
    let results = crate::mailbox::bench::append(plan, setup, fault, shutdown)
        .await
        .map_err(exit::mailbox)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox populate: {} messages over IMAP APPEND in {:.2} s",
            r.counters.sent, r.duration_s
        );
        crate::report::text::summary(r, &headline) + &crate::report::text::store::fault_line(r)
    })
}
