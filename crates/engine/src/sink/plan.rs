//! `SinkPlan`: the validated description of a `sink` run, built by `cli::sink`.

use std::sync::Arc;
use std::time::Duration;

use super::faults::FaultPlan;
use super::store::Store;
use crate::run::Progress;
use crate::smtp::proto::server::ServerConfig;

/// A validated `sink` run.
pub struct SinkPlan {
    /// Where it accepts connections: TCP addresses and Unix sockets, each bound before the run.
    pub listen: Vec<crate::transport::listen::Listen>,
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
    /// Verify each accepted message's DKIM signatures against this key and count them.
    pub dkim: Option<Arc<super::dkim::Verifier>>,
    /// Intervals and the live line.
    pub progress: Progress,
    /// The run id of the sink's results (`--run-id`; a fresh random one when `None`).
    pub run_id: Option<u64>,
    /// The configuration as recorded in the results.
    pub config_json: serde_json::Value,
    /// Where the accepted TCP connections' bytes are counted below TLS (a relay's network
    /// out), if anywhere.
    pub count: Option<crate::transport::count::NetTally>,
}

/// Defaults a sink has whether it runs alone or inside a relay, in the form the flags
/// take them.
pub mod defaults {
    /// The name in the greeting.
    pub const HOSTNAME: &str = crate::smtp::proto::server::HOSTNAME;
    /// Concurrent connections; more are answered 421.
    pub const MAX_CONNECTIONS: &str = "100000";
    /// A connection idle this long is closed.
    pub const IDLE_TIMEOUT: &str = "300s";
}

impl SinkPlan {
    /// The sink embedded in a relay run: every extension a relaying MTA uses on, TLS and
    /// AUTH off (the lab relays in clear text without logging in), no size limit below the
    /// generator's own (512 MiB), messages discarded, the `faults` the relay asks for.
    pub fn embedded(
        listen: crate::transport::listen::Listen,
        faults: FaultPlan,
        progress: Progress,
    ) -> Result<SinkPlan, String> {
        Ok(SinkPlan {
            listen: vec![listen],
            server: ServerConfig {
                max_message_size: 512 << 20,
                starttls: false,
                auth: false,
                smtputf8: false,
                ..ServerConfig::default()
            },
            tls: None,
            faults,
            store: Store::Discard,
            fsync: false,
            max_connections: crate::units::count(defaults::MAX_CONNECTIONS)? as usize,
            idle_timeout: crate::units::duration(defaults::IDLE_TIMEOUT)?,
            exit_after_messages: None,
            exit_after_idle: None,
            duration: None,
            bounce_to: None,
            drip: Duration::ZERO,
            bandwidth: 0,
            dkim: None,
            progress: Progress {
                quiet: true,
                ..progress
            },
            run_id: None,
            config_json: serde_json::Value::Null,
            count: None,
        })
    }
}
