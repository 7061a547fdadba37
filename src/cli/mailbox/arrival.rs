//! `mailbox arrival`: SMTP in, IMAP out — each message timed until it is visible.

use crate::cli::args::{ArrivalArgs, ArrivalMtaArg};
use crate::cli::exit::{self, EXIT_USAGE};
use crate::cli::finish::deliver;
use crate::cli::plan::load::Defaults;
use crate::cli::plan::{client, lab, load, message, output, store};
use crate::lab::Store;
use crate::mailbox::arrival::{ArrivalPlan, Path as ArrivalPath};
use crate::mailbox::bench::StoreSetup;
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::transport::target::parse_target;
use crate::units;

/// `mailbox arrival`'s defaults: 1,000 messages of 10 KiB over 4 connections.
pub const ARRIVAL_DEFAULTS: Defaults = Defaults {
    concurrency: "4",
    size: "10k",
    messages: 1000,
    thresholds: crate::relay::THRESHOLDS,
};

/// Validates `mailbox arrival`'s flags.
fn arrival_plan(
    a: &ArrivalArgs,
) -> Result<(ArrivalPlan, Option<StoreSetup>, output::OutputPlan), String> {
    let (outputs, progress) = output::plan(&a.out, None, &ARRIVAL_DEFAULTS.thresholds)?;
    let setup = lab::store_setup(&a.server, false)?;
    let lab = setup.is_some();
    if !lab && (a.smtp.is_none() || a.imap.is_none()) {
        return Err(format!(
            "give --lab {}, or --smtp (an MTA that delivers into the store), --imap and --users-file",
            Store::names()
        ));
    }
    let users = match &a.server.users_file {
        Some(f) => store::users_file(f)?,
        None => Vec::new(),
    };
    let store_users = match &setup {
        Some(s) => s.options.users as usize,
        None => users.len(),
    };
    let watchers = match &a.watchers {
        Some(n) => units::count(n).map_err(|e| format!("--watchers: {e}"))? as usize,
        None => store_users.min(100),
    };
    if watchers == 0 || watchers > store_users {
        return Err(format!(
            "--watchers must be between 1 and the number of users ({store_users})"
        ));
    }
    let (load, load_json) = load::shape(&a.shape, &ARRIVAL_DEFAULTS, progress)?;
    let (message, message_json) = message::fixed(
        "sender@mailbench.test",
        "user@store.test",
        ("--size", &a.size),
        None,
    )?;
    let drain_timeout =
        units::duration(&a.drain_timeout).map_err(|e| format!("--drain-timeout: {e}"))?;
    let path = match (lab, a.mta) {
        (true, ArrivalMtaArg::Postfix) => ArrivalPath::Postfix,
        (true, ArrivalMtaArg::Lmtp) => ArrivalPath::Lmtp,
        (false, _) => ArrivalPath::Smtp,
    };
    let postconf = lab::settings("--postconf", &a.postconf, "default_process_limit=100")?;
    let target = |flag: &str, v: &Option<String>, port: u16| {
        v.as_deref()
            .map(|t| parse_target(t, port).map_err(|e| format!("--{flag}: {e}")))
            .transpose()
    };
    let mut config_json = serde_json::json!({
        "protocol": "smtp",
        "path": path,
        "target": a.smtp,
        "imap": a.imap,
        "lab": a.server.lab.first().copied().map(Store::name),
        "watchers": watchers,
        "drain_timeout_s": drain_timeout.as_secs_f64(),
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.out.threshold,
    });
    crate::cli::plan::config::merge(&mut config_json, [load_json, message_json]);
    let plan = ArrivalPlan {
        send: SendPlan {
            load,
            client: client::plain(false),
            message,
            accept_log: None,
            data_end_log: None,
            warmup: None,
            config_json: config_json.clone(),
        },
        path,
        postconf,
        smtp: target("smtp", &a.smtp, 25)?,
        imap: target("imap", &a.imap, 143)?,
        users,
        watchers,
        drain_timeout,
        sut_pids: a.sut_pid.clone(),
    };
    Ok((plan, setup, outputs))
}

/// Runs `mailbox arrival`. Errors carry their exit code.
pub(super) async fn arrival(a: ArrivalArgs) -> Result<u8, (u8, String)> {
    let (plan, mut setup, outputs) = arrival_plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    crate::cli::lab::clean_before_store(&setup);
    crate::cli::lab::keep_store_logs(&mut setup, outputs.files.json.as_deref());
    let shutdown = Shutdown::install();
    let results = crate::mailbox::arrival::run(plan, setup, shutdown)
        .await
        .map_err(exit::mailbox)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox arrival: {} messages over SMTP, each timed until IMAP shows it ({} watched mailboxes)",
            r.counters.sent, r.config["watchers"]
        );
        crate::report::text::summary(r, &headline)
    })
}
