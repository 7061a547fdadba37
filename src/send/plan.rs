//! `SendPlan`: the validated description of a `send` run. Built by `cli::send` from flags;
//! nothing downstream sees a raw flag.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::message::address::AddrTemplate;
use crate::message::template::Content;
use crate::message::users::User;
use crate::report::Outputs;
use crate::report::threshold::Threshold;
use crate::smtp::proto::Credentials;
use crate::smtp::target::Target;

use super::schedule::Pacing;

/// Where envelope addresses come from.
#[derive(Debug, Clone)]
pub enum Addresses {
    /// Rendered from a template per message.
    Template(AddrTemplate),
    /// Taken from a Postal-format user list, round-robin.
    List(Arc<Vec<User>>),
}

/// TLS use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain text.
    None,
    /// STARTTLS after EHLO.
    Starttls,
    /// TLS from the first byte.
    Implicit,
}

/// Authentication.
#[derive(Debug, Clone)]
pub enum Auth {
    /// None.
    None,
    /// The same credentials on every connection.
    Fixed(Credentials),
    /// Each connection logs in as one user of `--senders` (with its password) and sends as it.
    Senders,
}

/// A validated `send` run.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// Targets, used round-robin per connection.
    pub targets: Vec<Target>,
    /// Speak LMTP.
    pub lmtp: bool,
    /// Open or closed loop.
    pub pacing: Pacing,
    /// Connections (closed loop) or the cap on connections (open loop).
    pub concurrency: usize,
    /// Stop after this many messages.
    pub max_messages: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Messages per connection: inclusive range, 0 = unlimited.
    pub per_conn: (u64, u64),
    /// Local addresses to bind, round-robin per connection.
    pub source_ips: Vec<IpAddr>,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Reply limit.
    pub command_timeout: Duration,
    /// Time in-flight transactions get to finish after a stop.
    pub grace: Duration,
    /// Reverse-path source.
    pub from: Addresses,
    /// Forward-path source.
    pub to: Addresses,
    /// Recipients per message.
    pub rcpts: u32,
    /// Message content.
    pub content: Arc<Content>,
    /// TLS mode.
    pub tls: TlsMode,
    /// Share of connections that use TLS, 0–100.
    pub tls_percent: f64,
    /// TLS client configuration (when TLS is used).
    pub tls_config: Option<Arc<rustls::ClientConfig>>,
    /// Authentication.
    pub auth: Auth,
    /// Use PIPELINING when offered.
    pub pipelining: bool,
    /// Use BDAT when offered.
    pub chunking: bool,
    /// EHLO name.
    pub helo: String,
    /// Stop after this many failed transactions.
    pub max_errors: Option<u64>,
    /// Outputs.
    pub outputs: Outputs,
    /// Thresholds to check at the end.
    pub thresholds: Vec<Threshold>,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
    /// When set, the wall-clock time each message was accepted (relay runs measure
    /// accept → arrival with it).
    pub accept_log: Option<Arc<TimeLog>>,
    /// The run id to use (a fresh random one when `None`).
    pub run_id: Option<u64>,
    /// More for the live line (a relay's deliveries and backlog).
    pub live_extra: Option<crate::report::live::LiveExtra>,
}

/// Wall-clock microseconds per sequence number, written by many tasks. Bounded: beyond
/// `TimeLog::CAP` entries nothing more is kept.
#[derive(Debug, Default)]
pub struct TimeLog(std::sync::Mutex<std::collections::HashMap<u64, u64>>);

impl TimeLog {
    /// Most entries kept.
    pub const CAP: usize = 4_000_000;

    /// Records now for `seq` (the first time only).
    pub fn record(&self, seq: u64) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.record_at(seq, now);
    }

    /// Records `us` for `seq` (the first time only).
    pub fn record_at(&self, seq: u64, us: u64) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() < Self::CAP {
            m.entry(seq).or_insert(us);
        }
    }

    /// The recorded time of `seq`.
    pub fn get(&self, seq: u64) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&seq)
            .copied()
    }

    /// Every (seq, time) pair.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }
}
