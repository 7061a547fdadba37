//! The human summary printed at the end of a run, rendered from the results document only
//! (so it shows exactly what the file holds).
//!
//! One file per layout a kind of run names (`generator`, `sink`, `relay`, `dns`, `pop3`,
//! `imap`, `profile`), built from shared pieces (`parts`, a lab MTA's queues: `queues`, and
//! a mail store's resources: `store`, the system under test's CPU by process name:
//! `processes`); [`summary`] picks the layout.

mod dns;
mod generator;
mod imap;
mod parts;
mod pop3;
mod processes;
mod profile;
mod queues;
mod relay;
mod sink;
pub mod store;
#[cfg(test)]
mod tests;

// Every command's end goes through [`summary`], which reads the kind of run from the
// results; the layouts are not called by name from outside.
use dns::render_dns;
use generator::render;
use imap::render_imap;
use pop3::render_pop3;
use profile::render_profile;
use relay::render_relay;
use sink::render_sink;

use crate::stats::Results;
use crate::stats::kind::{self, Layout};

/// Renders the summary of any run, in the layout and with the steps its kind of run names
/// (a command this version does not know is shown as a generator's, with SMTP's steps).
pub fn summary(r: &Results, headline: &str) -> String {
    let kind = kind::find(&r.command).unwrap_or(&kind::send::SEND);
    let steps = kind.steps;
    match kind.layout {
        Layout::Generator => render(r, steps, headline),
        Layout::Sink => render_sink(r, headline),
        Layout::Relay => render_relay(r, steps, headline),
        Layout::Dns => render_dns(r, headline),
        Layout::Pop3 => render_pop3(r, steps, headline),
        Layout::Imap => render_imap(r, steps, headline),
        Layout::Profile => render_profile(r, steps, headline),
    }
}
