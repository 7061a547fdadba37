//! The load flags `send` and `relay` share → a `SendPlan`: the shape, the messages, their
//! DKIM signing and the SMTP client, each planned from its own group, then put together.

use std::sync::Arc;

use super::load::Defaults;
use super::output::{self, OutputPlan};
use crate::cli::args::LoadArgs;
use crate::send::plan::SendPlan;
use crate::transport::target::Target;
use crate::units;

/// Values the command sets in place of load and message flags (see each `Implied`).
#[derive(Debug, Default)]
pub struct Implied {
    /// The load's.
    pub load: super::load::Implied,
    /// The messages'.
    pub message: super::message::Implied,
}

/// Validates the load flags; the run goes to `targets` (empty for a relay's lab, which
/// fills them in). `target` is how the user wrote them, for the results.
pub fn plan(
    targets: Vec<Target>,
    target: Option<&str>,
    a: &LoadArgs,
    defaults: &Defaults,
    implied: &Implied,
) -> Result<(SendPlan, OutputPlan), String> {
    let (outputs, progress) = output::plan(&a.out, a.postal_csv.clone(), &defaults.thresholds)?;
    if !(1..=1000).contains(&a.rounds) {
        return Err(format!(
            "--rounds {}: give how many times to run the benchmark, 1 to 1000",
            a.rounds
        ));
    }
    let (load, load_json) =
        super::load::shape_implied(&a.shape, defaults, &implied.load, progress)?;
    let (mut message, mut message_json) =
        super::message::message_implied(&a.message, defaults.size, &implied.message)?;
    if let Some((signer, json)) = super::dkim::signer(&a.dkim, &a.message.from)? {
        message_json["dkim"] = json;
        message.dkim = Some(Arc::new(signer));
    }
    let (client, client_json) = super::client::smtp(targets, &a.client, &message)?;
    let mut config_json = serde_json::json!({
        "target": target,
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.out.threshold,
    });
    super::config::merge(&mut config_json, [load_json, message_json, client_json]);
    let warmup = match &a.warmup {
        Some(d) => match units::duration(d).map_err(|e| format!("--warmup: {e}"))? {
            d if d.is_zero() => None,
            d => Some(d),
        },
        None => None,
    };
    config_json["warmup_s"] = warmup.map(|d| d.as_secs_f64()).into();
    let plan = SendPlan {
        load,
        client,
        message,
        accept_log: None,
        data_end_log: None,
        warmup,
        config_json,
    };
    Ok((plan, outputs))
}
