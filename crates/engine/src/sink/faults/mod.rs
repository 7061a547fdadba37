//! Fault injection: what a difficult receiver does to a relay. Rules per command (delay,
//! 4xx/5xx with a probability, disconnect, 421, a pace) are parsed in `rule`, a pace's turns
//! kept in `pace`; `state` holds what all
//! connections share (counts, greylist memory, per-client limits) and decides each reply;
//! `recipient` adds the faults a recipient asks for (BHM user-list flags, or the address
//! itself). Every injected fault is counted by kind.

mod pace;
mod recipient;
mod rule;
mod state;

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

pub use recipient::user_flags;
pub use rule::{Action, Rule, parse_rule};
pub use state::FaultState;

/// The kinds of injected fault, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A rule replied 4xx.
    Reply4xx,
    /// A rule replied 5xx.
    Reply5xx,
    /// A rule delayed a reply.
    Delay,
    /// Disconnected without reply.
    Disconnect,
    /// 421 and close.
    Shutdown,
    /// Greylisted (451 4.7.1).
    Greylist,
    /// A recipient fault (user-list flag or address local part).
    Recipient,
    /// A connection or rate limit was hit.
    Limit,
    /// A reply held for its turn by a pace (`pace=RATE`).
    Paced,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Reply4xx,
        FaultKind::Reply5xx,
        FaultKind::Delay,
        FaultKind::Disconnect,
        FaultKind::Shutdown,
        FaultKind::Greylist,
        FaultKind::Recipient,
        FaultKind::Limit,
        FaultKind::Paced,
    ];
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Reply4xx => "reply_4xx",
            FaultKind::Reply5xx => "reply_5xx",
            FaultKind::Delay => "delay",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Shutdown => "shutdown_421",
            FaultKind::Greylist => "greylist",
            FaultKind::Recipient => "recipient",
            FaultKind::Limit => "limit",
            FaultKind::Paced => "paced",
        }
    }
}

/// Everything a sink does to its clients.
#[derive(Debug, Clone, Default)]
pub struct FaultPlan {
    /// Per-command rules, checked in order; the first that fires wins.
    pub rules: Vec<Rule>,
    /// Delay added to every reply.
    pub tarpit: Duration,
    /// Greylisting: a new (client IP, sender, recipient) gets 451 until retried after this.
    pub greylist: Option<Duration>,
    /// Users with BHM flags (d defer, r reject, g greylist, b bounce).
    pub users: HashMap<String, String>,
    /// When set, AUTH must match one of these (user → password); otherwise any is accepted.
    pub passwords: Option<HashMap<String, String>>,
    /// Concurrent connections per client IP.
    pub max_conns_per_ip: Option<u64>,
    /// Messages per connection.
    pub max_msgs_per_conn: Option<u64>,
    /// Messages per second per client IP.
    pub rate_per_ip: Option<f64>,
}
