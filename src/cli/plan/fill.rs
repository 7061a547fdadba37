//! Filling a store's mailboxes before a workload (`--fill`, `--folders`, `--fill-size`,
//! `--eml`, `--fill-concurrency`): a quiet LMTP `send` plan, aimed at the store once it
//! is known.

use crate::cli::args::{FillArgs, LabFillArgs};
use crate::lab::Store;
use crate::mailbox::bench::Fill;
use crate::send::SendPlan;
use crate::units;

/// How mailboxes are filled with `per_user` messages each.
pub fn fill(a: &FillArgs, per_user: u64) -> Result<Fill, String> {
    let folders = units::count(&a.folders).map_err(|e| format!("--folders: {e}"))?;
    if folders == 0 || folders > 100 {
        return Err("--folders must be between 1 and 100".into());
    }
    let concurrency =
        units::count(&a.fill_concurrency).map_err(super::flagged("--fill-concurrency"))?;
    if concurrency == 0 {
        return Err("--fill-concurrency must be at least 1".into());
    }
    let progress = crate::run::Progress {
        interval: std::time::Duration::from_secs(1),
        quiet: true,
    };
    let (load, load_json) = super::load::closed(concurrency as usize, 1, progress);
    // --eml conflicts with --fill-size, which then keeps its default.
    let (message, message_json) = super::message::fixed(
        "filler@mailbench.test",
        "user@store.test",
        ("--fill-size", &a.fill_size),
        a.eml.as_deref(),
    )?;
    let mut config_json = serde_json::json!({"protocol": "lmtp", "folders": folders});
    super::config::merge(&mut config_json, [load_json, message_json]);
    Ok(Fill {
        send: SendPlan {
            load,
            client: super::client::plain(true),
            message,
            accept_log: None,
            data_end_log: None,
            warmup: None,
            config_json,
        },
        per_user,
        folders: folders as u32,
    })
}

/// [`fill`] with `per_user` messages, none for 0: the filling flags are checked either
/// way (a typo in `--fill-size` is refused, not ignored because nothing is filled).
pub fn optional(a: &FillArgs, per_user: u64) -> Result<Option<Fill>, String> {
    let planned = fill(a, per_user.max(1))?;
    Ok((per_user > 0).then_some(planned))
}

/// How a lab store is filled before a workload: `--fill N` messages per user (10 when not
/// given, none with 0); `--fill` without a lab is refused.
pub fn lab_fill(a: &LabFillArgs, lab: bool) -> Result<Option<Fill>, String> {
    let filling = &a.filling;
    match (&a.fill, lab) {
        (Some(n), true) => optional(
            filling,
            units::count(n).map_err(|e| format!("--fill: {e}"))?,
        ),
        (None, true) => Ok(Some(fill(filling, 10)?)),
        (Some(_), false) => Err(format!(
            "--fill fills a lab store: give --lab {}, or fill your own with `mailbox populate --lmtp`",
            Store::names()
        )),
        (None, false) => Ok(None),
    }
}
