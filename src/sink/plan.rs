//! `SinkPlan`: the validated description of a `sink` run, built by `cli::sink`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::faults::FaultPlan;
use super::store::Store;
use crate::report::Outputs;
use crate::report::threshold::Threshold;
use crate::smtp::proto::server::ServerConfig;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// TCP.
    Tcp(SocketAddr),
    /// A unix socket path (replaced if it exists).
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A validated `sink` run.
pub struct SinkPlan {
    /// Listeners.
    pub listen: Vec<Listen>,
    /// Protocol and extensions.
    pub server: ServerConfig,
    /// TLS for STARTTLS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Faults to inject.
    pub faults: FaultPlan,
    /// Where messages go.
    pub store: Store,
    /// fsync each stored message before replying.
    pub fsync: bool,
    /// Concurrent connections; more are answered 421.
    pub max_connections: usize,
    /// A connection idle this long is closed (421).
    pub idle_timeout: Duration,
    /// Stop after this many messages.
    pub exit_after_messages: Option<u64>,
    /// Stop after no traffic for this long (once something arrived).
    pub exit_after_idle: Option<Duration>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Where DSNs for recipients flagged `b` are sent.
    pub bounce_to: Option<std::net::SocketAddr>,
    /// Delay between the bytes of every reply (dripping tarpit), zero for none.
    pub drip: Duration,
    /// Bytes per second per connection read from clients, 0 for unlimited.
    pub bandwidth: u64,
    /// Outputs.
    pub outputs: Outputs,
    /// Thresholds.
    pub thresholds: Vec<Threshold>,
    /// The configuration as recorded in the results.
    pub config_json: serde_json::Value,
}
