//! User-profile scenarios (the seed 001 method): user types, each with a client type and
//! how many of each action a user does per period, with message sizes. Read from TOML or
//! taken from a preset (`r6mail`, `rabid`, `imaptest`); presets are TOML too, parsed by the
//! same code.

use std::time::Duration;

use serde::Deserialize;

/// What a virtual user does; each is one timed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// SELECT INBOX and list its newest messages (UID, FLAGS, size, ENVELOPE of up to 20).
    OpenInbox,
    /// CLOSE the inbox (what a client does when the user leaves it).
    CloseInbox,
    /// FETCH a whole message (setting `\Seen`).
    Read,
    /// Mark a message `\Deleted` and EXPUNGE.
    Delete,
    /// Set or clear `\Flagged` on a message.
    Flag,
    /// Move a message to the Archive folder (MOVE where offered, else COPY, `\Deleted`,
    /// EXPUNGE).
    Move,
    /// UID SEARCH UNSEEN.
    Search,
    /// A message for this user delivered into the store over LMTP.
    Receive,
    /// A message from this user to `send_recipients` others, delivered to them over LMTP
    /// and saved in the user's Sent folder with APPEND (what a client does after SMTP).
    Send,
    /// A POP3 session: log in, STAT, download and delete every message, QUIT.
    Check,
}

impl Action {
    /// Every action, in the order of the results' latency rows.
    pub const ALL: [Action; 10] = [
        Action::OpenInbox,
        Action::CloseInbox,
        Action::Read,
        Action::Delete,
        Action::Flag,
        Action::Move,
        Action::Search,
        Action::Receive,
        Action::Send,
        Action::Check,
    ];

    /// The stable name used in scenarios, results and rules.
    pub fn name(self) -> &'static str {
        match self {
            Action::OpenInbox => "open_inbox",
            Action::CloseInbox => "close_inbox",
            Action::Read => "read",
            Action::Delete => "delete",
            Action::Flag => "flag",
            Action::Move => "move",
            Action::Search => "search",
            Action::Receive => "receive",
            Action::Send => "send",
            Action::Check => "check",
        }
    }

    /// True for what a POP3 client can do (the others need IMAP).
    pub fn pop3(self) -> bool {
        matches!(self, Action::Check | Action::Receive | Action::Send)
    }
}

/// How a virtual user's mail client talks to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// Keeps its IMAP session open for the whole run (logs in once).
    Caching,
    /// Logs in for every action and out after it.
    LoginPerAction,
    /// A POP3 client: each `check` is a session of its own.
    Pop3,
}

/// One user type.
#[derive(Debug, Clone, PartialEq)]
pub struct UserType {
    /// Its name, for the results.
    pub name: String,
    /// Its share of the users (relative to the other types').
    pub share: u32,
    /// Its client.
    pub client: Client,
    /// Actions per period, by action.
    pub actions: Vec<(Action, f64)>,
    /// Size of each message it receives.
    pub receive_size: usize,
    /// Size of each message it sends.
    pub send_size: usize,
    /// Recipients of each message it sends.
    pub send_recipients: u32,
}

impl UserType {
    /// Actions per second of one user of this type at time scale `scale`.
    pub fn rate(&self, period: Duration, scale: f64) -> f64 {
        let per_period: f64 = self.actions.iter().map(|(_, n)| n).sum();
        per_period / period.as_secs_f64() * scale
    }
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Its name (the preset's, or the file's).
    pub name: String,
    /// The period the action counts are per.
    pub period: Duration,
    /// The user types.
    pub types: Vec<UserType>,
}

/// The scenario file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    period: String,
    #[serde(rename = "user")]
    users: Vec<UserFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserFile {
    name: String,
    #[serde(default = "one")]
    share: u32,
    client: Client,
    actions: toml::Table,
    #[serde(default = "default_size")]
    receive_size: String,
    #[serde(default = "default_size")]
    send_size: String,
    #[serde(default = "one")]
    send_recipients: u32,
}

fn one() -> u32 {
    1
}

fn default_size() -> String {
    "50k".into()
}

/// seed 001's Domino R6Mail user, per 90 minutes: open the inbox 6 times, read 30
/// messages, delete 12, receive 12 of 50 KB, send 1 of 100 KB to 3 recipients, close the
/// inbox 6 times. Its two calendar actions have no IMAP or SMTP counterpart, so they are
/// the mail they cause: the invitation is one more message sent (to 3), the RSVP one more
/// message received (the reply): `send = 2`, `receive = 13`.
const R6MAIL: &str = r#"
period = "90m"
[[user]]
name = "r6mail"
client = "caching"
receive_size = "50k"
send_size = "100k"
send_recipients = 3
actions = { open_inbox = 6, read = 30, delete = 12, receive = 13, send = 2, close_inbox = 6 }
"#;

/// seed 002's rabid: POP3 users who check their mail and download and delete it all, fed
/// by deliveries (Postal's role) so there is mail to check.
const RABID: &str = r#"
period = "10m"
[[user]]
name = "rabid"
client = "pop3"
receive_size = "10k"
actions = { check = 1, receive = 3 }
"#;

/// Modelled on imaptest's default profile: IMAP users on caching clients who mostly list
/// and read, change flags, delete and expunge, and receive as much as they delete.
const IMAPTEST: &str = r#"
period = "1m"
[[user]]
name = "imaptest"
client = "caching"
receive_size = "10k"
send_size = "10k"
actions = { open_inbox = 1, read = 3, flag = 2, delete = 1, receive = 1, search = 1 }
"#;

/// The preset names.
pub const PRESETS: [&str; 3] = ["r6mail", "rabid", "imaptest"];

/// The servers a scenario's users talk to, so that a run asks only for those (a POP3-only
/// scenario needs no IMAP server, an IMAP one no POP3 server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Some user type is an IMAP client.
    pub imap: bool,
    /// Some user type is a POP3 client.
    pub pop3: bool,
    /// Some user receives, or sends without an MTA.
    pub lmtp: bool,
}

impl Scenario {
    /// The servers this scenario's actions use; `smtp` says whether sends go through an
    /// MTA (else they are LMTP deliveries).
    pub fn needs(&self, smtp: bool) -> Needs {
        let does = |t: &UserType, a: Action| t.actions.iter().any(|(x, n)| *x == a && *n > 0.0);
        Needs {
            imap: self.types.iter().any(|t| t.client != Client::Pop3),
            pop3: self.types.iter().any(|t| t.client == Client::Pop3),
            lmtp: self
                .types
                .iter()
                .any(|t| does(t, Action::Receive) || (!smtp && does(t, Action::Send))),
        }
    }

    /// A preset by name, or a TOML file at `spec`.
    pub fn load(spec: &str) -> Result<Scenario, String> {
        let (name, text) = match spec {
            "r6mail" => (spec.to_string(), R6MAIL.to_string()),
            "rabid" => (spec.to_string(), RABID.to_string()),
            "imaptest" => (spec.to_string(), IMAPTEST.to_string()),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "--scenario {path}: {e}; give a TOML file or a preset ({})",
                        PRESETS.join(", ")
                    )
                })?;
                (path.to_string(), text)
            }
        };
        Scenario::parse(&name, &text).map_err(|e| format!("--scenario {name}: {e}"))
    }

    /// Parses and validates a scenario's TOML.
    pub fn parse(name: &str, text: &str) -> Result<Scenario, String> {
        let f: File = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let period = crate::units::duration(&f.period).map_err(|e| format!("period: {e}"))?;
        if period.is_zero() {
            return Err("period must be above zero".into());
        }
        if f.users.is_empty() {
            return Err("no [[user]] types".into());
        }
        let mut types = Vec::new();
        for u in f.users {
            let mut actions = Vec::new();
            for (k, v) in &u.actions {
                let action = Action::ALL
                    .into_iter()
                    .find(|a| a.name() == k)
                    .ok_or_else(|| {
                        let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                        format!(
                            "user {}: unknown action {k:?}; use {}",
                            u.name,
                            names.join(", ")
                        )
                    })?;
                let n = v
                    .as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .filter(|n| n.is_finite() && *n >= 0.0)
                    .ok_or_else(|| {
                        format!("user {}: {k} must be a count per period, 0 or more", u.name)
                    })?;
                let fits = match u.client {
                    Client::Pop3 => action.pop3(),
                    _ => action != Action::Check,
                };
                if !fits && n > 0.0 {
                    return Err(format!(
                        "user {}: a {} client cannot {k}",
                        u.name,
                        serde_json::to_value(u.client)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    ));
                }
                if n > 0.0 {
                    actions.push((action, n));
                }
            }
            if actions.is_empty() {
                return Err(format!("user {}: no action has a count above 0", u.name));
            }
            let size = |what: &str, v: &str| {
                crate::units::size(v).map_err(|e| format!("user {}: {what}: {e}", u.name))
            };
            if u.share == 0 {
                return Err(format!("user {}: share must be at least 1", u.name));
            }
            types.push(UserType {
                name: u.name.clone(),
                share: u.share,
                client: u.client,
                actions,
                receive_size: size("receive_size", &u.receive_size)?,
                send_size: size("send_size", &u.send_size)?,
                send_recipients: u.send_recipients.max(1),
            });
        }
        Ok(Scenario {
            name: name.to_string(),
            period,
            types,
        })
    }

    /// The user type of virtual user `i`: types take users in proportion to their shares,
    /// interleaved (so every step of a ramp has each type in its share).
    pub fn type_of(&self, i: u64) -> &UserType {
        let total: u64 = self.types.iter().map(|t| u64::from(t.share)).sum();
        let mut at = i % total.max(1);
        for t in &self.types {
            if at < u64::from(t.share) {
                return t;
            }
            at -= u64::from(t.share);
        }
        &self.types[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 item 20: a run asks only for the servers its scenario's users talk to
    /// (the profile help's own example has no --pop3, and every run without one stopped
    /// with "no pop3 server").
    #[test]
    fn a_scenario_needs_only_the_servers_its_users_use() {
        let needs = |spec: &str, smtp: bool| Scenario::load(spec).expect(spec).needs(smtp);
        let n = |imap, pop3, lmtp| Needs { imap, pop3, lmtp };
        assert_eq!(needs("r6mail", false), n(true, false, true));
        assert_eq!(needs("rabid", false), n(false, true, true));
        assert_eq!(needs("imaptest", true), n(true, false, true));
        let reader = "period = \"1h\"\n[[user]]\nname = \"r\"\nclient = \"caching\"\n\
                      actions = { read = 3, send = 1, receive = 0 }\n";
        let s = Scenario::parse("reader", reader).expect("parse");
        assert_eq!(
            s.needs(true),
            n(true, false, false),
            "sends through the MTA"
        );
        assert_eq!(s.needs(false), n(true, false, true), "sends over LMTP");
    }

    #[test]
    fn presets_parse_and_r6mail_is_seed_001s_mix() {
        for p in PRESETS {
            Scenario::load(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        let s = Scenario::load("r6mail").expect("r6mail");
        assert_eq!(s.period, Duration::from_secs(90 * 60));
        let t = &s.types[0];
        let count = |a: Action| t.actions.iter().find(|(x, _)| *x == a).map(|(_, n)| *n);
        assert_eq!(count(Action::Read), Some(30.0));
        assert_eq!(count(Action::Delete), Some(12.0));
        assert_eq!((t.receive_size, t.send_size), (50 << 10, 100 << 10));
        assert_eq!(t.send_recipients, 3);
        // The invitation is a send, the RSVP a receive: 12 + 1 received, 1 + 1 sent.
        assert_eq!(
            (count(Action::Receive), count(Action::Send)),
            (Some(13.0), Some(2.0))
        );
        // 69 actions per 90 minutes.
        let per_s = t.rate(s.period, 1.0);
        assert!((per_s - 69.0 / 5400.0).abs() < 1e-9, "{per_s}");
    }

    #[test]
    fn bad_scenarios_say_what_is_wrong() {
        for (text, says) in [
            ("period = \"1m\"\n", "user"),
            (
                "period = \"0s\"\n[[user]]\nname=\"a\"\nclient=\"caching\"\nactions={read=1}\n",
                "period",
            ),
            (
                "period = \"1m\"\n[[user]]\nname=\"a\"\nclient=\"caching\"\nactions={reed=1}\n",
                "unknown action \"reed\"",
            ),
            (
                "period = \"1m\"\n[[user]]\nname=\"a\"\nclient=\"pop3\"\nactions={read=1}\n",
                "pop3 client cannot read",
            ),
            (
                "period = \"1m\"\n[[user]]\nname=\"a\"\nclient=\"caching\"\nactions={read=-1}\n",
                "0 or more",
            ),
            (
                "period = \"1m\"\n[[user]]\nname=\"a\"\nclient=\"caching\"\nactions={read=0}\n",
                "no action",
            ),
            (
                "period = \"1m\"\n[[user]]\nname=\"a\"\nclient=\"fast\"\nactions={read=1}\n",
                "unknown variant",
            ),
            ("period = \"1m\"\nspeed = 2\n", "unknown field"),
        ] {
            let e = Scenario::parse("t", text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = Scenario::load("/no/such/file.toml").expect_err("missing");
        assert!(e.contains("r6mail"), "{e}");
    }

    #[test]
    fn types_take_users_by_share() {
        let s = Scenario::parse(
            "t",
            "period = \"1m\"\n[[user]]\nname=\"a\"\nshare=3\nclient=\"caching\"\nactions={read=1}\n\
             [[user]]\nname=\"b\"\nclient=\"pop3\"\nactions={check=1}\n",
        )
        .expect("valid");
        let names: Vec<&str> = (0..8).map(|i| s.type_of(i).name.as_str()).collect();
        assert_eq!(names, ["a", "a", "a", "b", "a", "a", "a", "b"]);
    }
}
