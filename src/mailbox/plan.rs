//! The validated description of a mailbox workload, built by `cli::mailbox`: whose
//! mailboxes, on which server, and what each session does in them.

use std::sync::Arc;
use std::time::Duration;

use crate::lab::StoreUser;
use crate::load::LoadPlan;
use crate::transport::target::Target;
use crate::transport::tls::TlsPlan;

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

/// A validated `mailbox pop3` run (rabid's job): sessions at a rate or a concurrency, each
/// logging in as the next user, downloading a share of the messages and deleting a share.
#[derive(Debug, Clone)]
pub struct Pop3Plan {
    /// How many sessions, how fast. A session is a unit of work: one per connection.
    pub load: LoadPlan,
    /// The POP3 server; filled in from the lab when there is one.
    pub target: Option<Target>,
    /// The mailbox users, one per session in turn (or drawn at random); filled in from
    /// the lab too.
    pub users: Arc<Vec<StoreUser>>,
    /// Draw each session's user at random instead of in turn.
    pub random_users: bool,
    /// How to log in.
    pub login: Pop3Login,
    /// TLS (STLS or POP3S) on a share of the sessions.
    pub tls: TlsPlan,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Response limit.
    pub command_timeout: Duration,
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
    use super::share_of;

    #[test]
    fn shares_round_to_whole_messages() {
        assert_eq!(share_of(0, 0.5), 0);
        assert_eq!(share_of(10, 0.0), 0);
        assert_eq!(share_of(10, 0.5), 5);
        assert_eq!(share_of(3, 0.5), 2);
        assert_eq!(share_of(1, 0.1), 1);
        assert_eq!(share_of(10, 1.0), 10);
    }
}
