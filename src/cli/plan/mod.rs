//! Flags → validated plans, one planner per flag group: `load` (the shape), `message`,
//! `dkim`, `client` (TLS, the SMTP client, mailbox timeouts), `send` (the load groups put
//! together), `output`, `scale` (split runs), `dns` (zones and faults), `lab` (lab MTAs
//! and stores), `fault` (a relay's `--fault` on its lab MTA), `link` (a relay's `--link`, a hop's shape), `sink_faults` (the sink's
//! faults, read once for `sink` and for a relay's embedded sink), `fill` (filling a store) and `store` (where a mailbox workload runs and
//! as whom), with `config` putting their parts of the results' configuration record
//! together. Planners take typed defaults and name their own flags, so commands compose
//! them without building flag structs or rewording errors; nothing here runs anything.

pub mod client;
pub mod config;
pub mod dkim;
pub mod dns;
pub mod fault;
pub mod fill;
pub mod lab;
pub mod link;
pub mod load;
pub mod message;
pub mod output;
pub mod scale;
pub mod send;
pub mod sink_faults;
pub mod store;

/// Puts the flag's name before an error about its value (`units` and the other parsers
/// know the value, not the flag it came from): `--duration: invalid duration "soon"; …`.
pub fn flagged(flag: &'static str) -> impl Fn(String) -> String {
    move |e| format!("{flag}: {e}")
}
