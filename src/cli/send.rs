//! `send`: the target and load flags, planned by the shared planners, plus the split-run
//! flags; `finish::send` runs it.

use super::args::SendArgs;
use super::plan::load::Defaults;
use super::plan::output::OutputPlan;
use crate::send::SendPlan;

/// `send`'s defaults.
pub const SEND_DEFAULTS: Defaults = Defaults {
    concurrency: "16",
    size: "1k",
    messages: 1000,
    thresholds: crate::send::THRESHOLDS,
};

/// A planned `send`: the run, its outputs, and how many rounds of it.
pub type Planned = (SendPlan, OutputPlan, u32);

/// Validates `send`'s flags; `env` looks up the launcher's variables for `--shard auto/N`.
pub fn plan(a: &SendArgs, env: impl Fn(&str) -> Option<String>) -> Result<Planned, String> {
    let targets = crate::transport::target::parse_targets(&a.target, 25)?;
    let (mut plan, outputs) = super::plan::send::plan(
        targets,
        Some(&a.target),
        &a.load,
        &SEND_DEFAULTS,
        &Default::default(),
    )?;
    super::plan::scale::apply(&mut plan, &a.scale, a.load.rounds, env)?;
    Ok((plan, outputs, a.load.rounds))
}
