//! The validated description of a mailbox workload, built by `cli::mailbox`: whose
//! mailboxes, on which server, and what each session does in them.

use std::sync::Arc;
use std::time::Duration;

use crate::imap::proto::Phase;
use crate::lab::StoreUser;
use crate::load::LoadPlan;
use crate::transport::connect::ConnectOptions;
use crate::transport::count::NetTally;
use crate::transport::target::Target;
use crate::transport::tls::{TlsMode, TlsPlan};

/// How a POP3 session logs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pop3Login {
    /// USER and PASS.
    User,
    /// AUTH PLAIN (SASL).
    Plain,
    /// APOP (a digest of the greeting's timestamp and the password).
    Apop,
}

/// Whose sessions, against which server, and how they connect: what the session workloads
/// (POP3, IMAP) share.
#[derive(Debug, Clone)]
pub struct Sessions {
    /// The server; filled in from the lab when there is one.
    pub target: Option<Target>,
    /// The mailbox users, one per session in turn (or drawn at random); filled in from
    /// the lab too.
    pub users: Arc<Vec<StoreUser>>,
    /// Draw each session's user at random instead of in turn.
    pub random_users: bool,
    /// TLS on a share of the sessions.
    pub tls: TlsPlan,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Response limit.
    pub command_timeout: Duration,
    /// Where the sessions' bytes are counted, when the store is watched.
    pub count: Option<NetTally>,
}

/// How one session starts.
pub struct SessionStart<'a> {
    /// Its user's index in `users`.
    pub index: usize,
    /// Its user.
    pub user: &'a StoreUser,
    /// The server.
    pub target: &'a Target,
    /// Connection options, with TLS when this session drew it.
    pub opts: ConnectOptions,
    /// Upgrade with STARTTLS (or STLS) after the greeting.
    pub starttls: bool,
}

impl Sessions {
    /// The `n`-th session's start: its user (in turn or at random), and TLS drawn by its
    /// share; `None` without a server.
    pub fn start(&self, n: u64, rng: &mut fastrand::Rng) -> Option<SessionStart<'_>> {
        let index = self.user_for(n, rng);
        self.start_as(index, rng)
    }

    /// The `n`-th session's user: the next in turn, or one drawn at random.
    pub fn user_for(&self, n: u64, rng: &mut fastrand::Rng) -> usize {
        let count = self.users.len().max(1);
        match self.random_users {
            true => rng.usize(..count),
            false => (n % count as u64) as usize,
        }
    }

    /// A session's start as user `index`, with TLS drawn by its share; `None` without a
    /// server or such a user.
    pub fn start_as(&self, index: usize, rng: &mut fastrand::Rng) -> Option<SessionStart<'_>> {
        let target = self.target.as_ref()?;
        let user = self.users.get(index)?;
        let use_tls = self.tls.draw(rng);
        Some(SessionStart {
            index,
            user,
            target,
            opts: ConnectOptions {
                connect_timeout: self.connect_timeout,
                command_timeout: self.command_timeout,
                source_ip: None,
                tls: if use_tls {
                    self.tls.config.clone()
                } else {
                    None
                },
                implicit_tls: self.tls.mode == TlsMode::Implicit,
                count: self.count.clone(),
            },
            starttls: use_tls && self.tls.mode == TlsMode::Starttls,
        })
    }
}

/// A validated `mailbox pop3` run (rabid's job): sessions at a rate or a concurrency, each
/// logging in as the next user, downloading a share of the messages and deleting a share.
#[derive(Debug, Clone)]
pub struct Pop3Plan {
    /// How many sessions, how fast. A session is a unit of work: one per connection.
    pub load: LoadPlan,
    /// Whose sessions, against which server (STLS or POP3S on a share).
    pub sessions: Sessions,
    /// How to log in.
    pub login: Pop3Login,
    /// Share of a mailbox's messages each session downloads, 0–1.
    pub download: f64,
    /// Share of a mailbox's messages each session deletes, 0–1 (the first ones).
    pub delete: f64,
    /// Pipeline commands when the server offers it.
    pub pipelining: bool,
    /// Ask LIST after STAT.
    pub list: bool,
    /// Ask UIDL after STAT.
    pub uidl: bool,
    /// Download with TOP and this many body lines instead of RETR.
    pub top_lines: Option<u32>,
    /// At most this many downloads per session (rabid's `-c`).
    pub max_download: Option<u32>,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
}

/// How an IMAP session logs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImapLogin {
    /// LOGIN.
    Login,
    /// AUTHENTICATE PLAIN (SASL-IR).
    Plain,
}

/// Which commands an IMAP session runs, with what weights: each unit of work is one
/// command drawn from the mix (imaptest's `state=percent` idea, drawn per command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    /// Each command's phase and weight; weights are relative, zero ones are left out.
    pub weights: Vec<(Phase, u32)>,
}

/// The commands a mix may name.
pub const MIX_COMMANDS: [Phase; 16] = [
    Phase::Select,
    Phase::List,
    Phase::Status,
    Phase::Fetch,
    Phase::FetchBody,
    Phase::FetchPart,
    Phase::Search,
    Phase::Store,
    Phase::Delete,
    Phase::Expunge,
    Phase::Copy,
    Phase::Move,
    Phase::Append,
    Phase::Noop,
    Phase::Idle,
    Phase::Capability,
];

/// The default mix, modelled on imaptest's default profile: mostly listing and reading,
/// flag changes, and as many messages appended and copied as deleted and expunged, so
/// mailboxes keep their size over a long run.
pub const DEFAULT_MIX: &str = "fetch=25,fetch_body=20,store=15,delete=5,expunge=5,append=4,copy=1,search=5,list=5,status=5,select=5,noop=5";

impl Mix {
    /// Parses `name=weight,...` (names as in results files: fetch, fetch_body, store, ...).
    pub fn parse(spec: &str) -> Result<Mix, String> {
        let mut weights = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part.split_once('=').ok_or_else(|| {
                format!("--mix: {part:?} is not name=weight (e.g. fetch=30,store=10)")
            })?;
            let phase = MIX_COMMANDS
                .iter()
                .find(|p| p.name() == name.trim())
                .ok_or_else(|| {
                    let names: Vec<&str> = MIX_COMMANDS.iter().map(|p| p.name()).collect();
                    format!("--mix: unknown command {name:?}; use {}", names.join(", "))
                })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| format!("--mix: weight {weight:?} of {name} is not a whole number"))?;
            if weights.iter().any(|(p, _)| p == phase) {
                return Err(format!("--mix: {name} is given twice"));
            }
            if weight > 0 {
                weights.push((*phase, weight));
            }
        }
        if weights.is_empty() {
            return Err("--mix: give at least one command a weight above 0".into());
        }
        Ok(Mix { weights })
    }

    /// Draws the next command.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Phase {
        let total: u32 = self.weights.iter().map(|(_, w)| w).sum();
        let mut at = rng.u32(..total.max(1));
        for (p, w) in &self.weights {
            if at < *w {
                return *p;
            }
            at -= w;
        }
        self.weights[0].0
    }
}

/// A validated `mailbox imap` run (imaptest's job): sessions that log in, select a
/// mailbox and run commands drawn from a mix, each command a unit of work, at a rate or a
/// concurrency, with the state checks on every response.
#[derive(Debug, Clone)]
pub struct ImapPlan {
    /// How many commands, how fast, and how many per session (`per_conn`).
    pub load: LoadPlan,
    /// Whose sessions, against which server (STARTTLS or IMAPS on a share).
    pub sessions: Sessions,
    /// How to log in.
    pub login: ImapLogin,
    /// The commands and their weights.
    pub mix: Mix,
    /// The mailbox each session selects.
    pub mailbox: String,
    /// Most messages one metadata FETCH asks for.
    pub fetch_range: u32,
    /// Size of each appended message.
    pub append_size: usize,
    /// How long an `idle` command stays in IDLE.
    pub idle_for: Duration,
    /// Check every response against the session's model and the other sessions.
    pub check_state: bool,
    /// Use LITERAL+ for APPEND when the server offers it.
    pub literal_plus: bool,
    /// Commands in flight per session (`--pipeline`; 1: one at a time).
    pub pipeline: usize,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
}

/// Round-robin over a share: how many of `n` messages a share of `share` is, rounded to
/// the nearest (so 50 % of 3 is 2, and any share above 0 of 1 message is that message).
pub fn share_of(n: u32, share: f64) -> u32 {
    if n == 0 || share <= 0.0 {
        return 0;
    }
    ((f64::from(n) * share).round() as u32).clamp(1, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_to_whole_messages() {
        assert_eq!(share_of(0, 0.5), 0);
        assert_eq!(share_of(10, 0.0), 0);
        assert_eq!(share_of(10, 0.5), 5);
        assert_eq!(share_of(3, 0.5), 2);
        assert_eq!(share_of(1, 0.1), 1);
        assert_eq!(share_of(10, 1.0), 10);
    }

    #[test]
    fn a_mix_is_parsed_and_drawn_by_weight() {
        let mix = Mix::parse("fetch=3, noop=1,store=0").expect("valid");
        assert_eq!(mix.weights, [(Phase::Fetch, 3), (Phase::Noop, 1)]);
        let mut rng = fastrand::Rng::with_seed(7);
        let fetches = (0..4000)
            .filter(|_| mix.draw(&mut rng) == Phase::Fetch)
            .count();
        assert!(
            (2800..3200).contains(&fetches),
            "3 in 4 draws are fetch: {fetches}"
        );
        assert!(Mix::parse(DEFAULT_MIX).is_ok());
        for (bad, says) in [
            ("fetch", "not name=weight"),
            ("fetsh=1", "unknown command"),
            ("fetch=x", "not a whole number"),
            ("fetch=1,fetch=2", "twice"),
            ("fetch=0", "at least one"),
            ("logout=1", "unknown command"),
        ] {
            let e = Mix::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
