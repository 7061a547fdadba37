//! `SendPlan`: the validated description of a `send` run. Built by `cli::send` from flags;
//! nothing downstream sees a raw flag.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::load::LoadPlan;
use crate::message::address::AddrTemplate;
use crate::message::template::Content;
use crate::message::users::User;
use crate::smtp::proto::Credentials;
use crate::transport::target::Target;
use crate::transport::tls::TlsPlan;

/// What a given run id is XORed with for its warm-up's: a different run for the sinks,
/// the same for every agent.
const WARMUP_RUN_ID_MASK: u64 = 0x7761_726d_7570;

/// Where envelope addresses come from.
#[derive(Debug, Clone)]
pub enum Addresses {
    /// Rendered from a template per message.
    Template(AddrTemplate),
    /// Taken from a Postal-format user list, round-robin.
    List(Arc<Vec<User>>),
}

/// Whether and how the generator authenticates after EHLO (`--auth`).
#[derive(Debug, Clone)]
pub enum Auth {
    /// No AUTH: an MTA that relays for the generator's address.
    None,
    /// The same credentials on every connection.
    Fixed(Credentials),
    /// Each connection logs in as one user of `--senders` (with its password) and sends as it.
    Senders,
}

/// A validated `send` run: the load's shape, the SMTP client, the messages.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// How many, how fast, over how many connections.
    pub load: LoadPlan,
    /// How to connect and speak.
    pub client: ClientPlan,
    /// What each message is.
    pub message: MessagePlan,
    /// When set, the wall-clock time each message was accepted (relay runs measure
    /// accept → arrival with it).
    pub accept_log: Option<Arc<crate::stats::timelog::TimeLog>>,
    /// When set, the wall-clock time each accepted message's content was written to its
    /// end (relay runs time end to end from it: an MTA may deliver before its 250 reaches
    /// the client).
    pub data_end_log: Option<Arc<crate::stats::timelog::TimeLog>>,
    /// Load this long first, kept out of the statistics (recorded apart): servers start
    /// processes and fill caches under the first load.
    pub warmup: Option<Duration>,
    /// The configuration as recorded in the results file (the targets are added when the
    /// run starts: a relay's lab is only known then).
    pub config_json: serde_json::Value,
}

/// The SMTP client: where, how to connect, which extensions to use.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// Targets, used round-robin per connection. A relay with a lab fills them in when
    /// the lab has started.
    pub targets: Vec<Target>,
    /// Speak LMTP.
    pub lmtp: bool,
    /// Local addresses to bind, round-robin per connection.
    pub source_ips: Vec<IpAddr>,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Reply limit.
    pub command_timeout: Duration,
    /// TLS: how, on which share of the connections.
    pub tls: TlsPlan,
    /// SMTP AUTH, as a submission server would ask for it.
    pub auth: Auth,
    /// Use PIPELINING when offered.
    pub pipelining: bool,
    /// Use BDAT when offered.
    pub chunking: bool,
    /// EHLO name.
    pub helo: String,
    /// Where the connections' bytes are counted below TLS (a relay's network in), if anywhere.
    pub count: Option<crate::transport::count::NetTally>,
}

/// What each message is.
#[derive(Debug, Clone)]
pub struct MessagePlan {
    /// Reverse-path source.
    pub from: Addresses,
    /// Forward-path source.
    pub to: Addresses,
    /// Recipients per message.
    pub rcpts: u32,
    /// Message content.
    pub content: Arc<Content>,
    /// Signs each message with DKIM, when asked.
    pub dkim: Option<Arc<crate::message::dkim::Signer>>,
}

impl SendPlan {
    /// The warm-up's plan: the same load for `d`, on its own run id (derived from a given
    /// one, so that split agents warm up on one shared schedule too), without warming up
    /// again.
    pub fn warm_up_for(&self, d: Duration) -> SendPlan {
        let mut p = self.clone();
        p.load.duration = Some(d);
        p.load.count = u64::MAX;
        p.load.run_id = self.load.run_id.map(|id| id ^ WARMUP_RUN_ID_MASK);
        p.warmup = None;
        p
    }

    /// The configuration for the results file, with the targets as they are now.
    pub fn config(&self) -> serde_json::Value {
        let mut c = self.config_json.clone();
        let targets: Vec<String> = self.client.targets.iter().map(|t| t.to_string()).collect();
        if c["target"].is_null() {
            c["target"] = targets.join(",").into();
        }
        c["targets"] = targets.into();
        c["concurrency"] = self.load.concurrency.into();
        c
    }
}
