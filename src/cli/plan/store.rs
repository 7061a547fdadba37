//! Where a mailbox workload runs and as whom: a lab store (filled first) or a server of
//! one's own with its users file, and the client's TLS.

use std::path::Path;
use std::sync::Arc;

use super::client::Timeouts;
use super::lab::store_setup;
use super::output::OutputPlan;
use crate::cli::args::{LabFillArgs, MailboxServerArgs, TlsArgs};
use crate::lab::{Store, StoreUser};
use crate::mailbox::bench::{Fill, StoreSetup, Workload};
use crate::mailbox::plan::Sessions;
use crate::transport::target::{Target, parse_target};
use crate::transport::tls::{TlsMode, TlsPlan};

/// A planned session workload (`pop3`, `imap`, `profile`): what runs, the lab store and
/// its filling, the processes observed, where the results go; the command runs it
/// without looking at a flag again.
pub struct Planned {
    /// The workload.
    pub work: Workload,
    /// The lab store to start, if any.
    pub setup: Option<StoreSetup>,
    /// How the lab store is filled first.
    pub fill: Option<Fill>,
    /// `--sut-pid`: process trees observed besides the lab's.
    pub sut_pids: Vec<u32>,
    /// Results files and thresholds.
    pub outputs: OutputPlan,
}

/// Where a mailbox workload runs, as every workload's flags say it: a lab store (filled
/// first) or a server of one's own with its users, and TLS.
pub struct Where {
    /// The lab store to start, if any.
    pub setup: Option<StoreSetup>,
    /// A server of one's own (the lab's is known once it runs).
    pub target: Option<Target>,
    /// The users of a server of one's own (the lab makes its own).
    pub users: Vec<StoreUser>,
    /// How the lab store is filled first, if at all.
    pub fill: Option<Fill>,
    /// The client's TLS.
    pub tls: TlsPlan,
}

impl Where {
    /// The planned workload `work` runs where this says (the lab store and its filling),
    /// watching `sut_pids` besides the lab's and writing `outputs`: every session workload
    /// ends its planning here.
    pub fn planned(self, work: Workload, sut_pids: &[u32], outputs: OutputPlan) -> Planned {
        Planned {
            work,
            setup: self.setup,
            fill: self.fill,
            sut_pids: sut_pids.to_vec(),
            outputs,
        }
    }

    /// `ports` are the protocol's plain and implicit-TLS defaults.
    pub fn plan(
        server: &MailboxServerArgs,
        target: &Option<String>,
        lab_fill: &LabFillArgs,
        tls: &TlsArgs,
        ports: (u16, u16),
    ) -> Result<Where, String> {
        let tls = super::client::tls(tls)?;
        // The lab offers STARTTLS and implicit TLS together when asked for TLS.
        let setup = store_setup(server, tls.mode != TlsMode::None)?;
        let (target, users) = match (target, &server.users_file) {
            (Some(t), Some(f)) => {
                let port = if tls.mode == TlsMode::Implicit {
                    ports.1
                } else {
                    ports.0
                };
                (
                    Some(parse_target(t, port).map_err(super::flagged("--target"))?),
                    users_file(f)?,
                )
            }
            _ => (None, Vec::new()),
        };
        let fill = super::fill::lab_fill(lab_fill, setup.is_some())?;
        Ok(Where {
            setup,
            target,
            users,
            fill,
            tls,
        })
    }

    /// The sessions' part of a plan (the lab fills in its server and users later).
    pub fn sessions(&mut self, random_users: bool, t: &Timeouts) -> Sessions {
        Sessions {
            target: self.target.take(),
            users: Arc::new(std::mem::take(&mut self.users)),
            random_users,
            tls: self.tls.clone(),
            connect_timeout: t.connect,
            command_timeout: t.command,
            count: None,
        }
    }

    /// Adds the store, its fill and TLS to a results file's configuration.
    pub fn describe(&self, config: &mut serde_json::Value, server: &MailboxServerArgs) {
        config["lab"] = server.lab.first().copied().map(Store::name).into();
        config["tls"] = serde_json::to_value(self.tls.mode).unwrap_or_default();
        config["tls_percent"] = self.tls.percent.into();
        config["store"] = self
            .setup
            .as_ref()
            .map(|s| {
                serde_json::json!({
                    "users": s.options.users,
                    "mail_format": s.options.mail_format,
                    "storage": s.options.placement,
                    "store_conf": server.store.store_conf,
                })
            })
            .into();
        config["fill"] = self
            .fill
            .as_ref()
            .map(|f| {
                serde_json::json!({
                    "per_user": f.per_user,
                    "folders": f.folders,
                    "size": f.send.config_json["size"],
                })
            })
            .into();
    }
}

/// The users of a server of one's own, from a Postal user list; each needs its password.
pub fn users_file(path: &Path) -> Result<Vec<StoreUser>, String> {
    crate::message::users::read(path, "address password", store_users)
}

/// Parses a mailbox user list: `address password` per line (Postal's format without the
/// sink's d/r/g/b flags, which mean nothing to a store); blank lines and lines starting
/// with '#' are skipped. Errors carry the 1-based line number.
fn store_users(text: &str) -> Result<Vec<StoreUser>, (usize, String)> {
    let mut users = Vec::new();
    for entry in crate::message::users::entries(text) {
        let (line, address, mut parts) = entry?;
        let Some(password) = parts.next() else {
            return Err((
                line,
                format!("{address} has no password; write 'address password' per line"),
            ));
        };
        if let Some(extra) = parts.next() {
            return Err((
                line,
                format!("{extra:?} after the password; write 'address password' per line"),
            ));
        }
        users.push(StoreUser {
            address: address.to_string(),
            password: password.to_string(),
        });
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::store_users;

    /// Issue 25 item 20: a mailbox user list is `address password`; its errors do not
    /// offer the sink's d/r/g/b flags, which mean nothing to a store.
    #[test]
    fn store_user_lists_are_address_and_password() {
        let users = store_users("# users\nu1@s.test secret1\n\nu2@s.test p2\n").expect("parse");
        assert_eq!(users.len(), 2);
        assert_eq!(
            (users[1].address.as_str(), users[1].password.as_str()),
            ("u2@s.test", "p2")
        );
        for (text, line, said) in [
            (
                "u1@s.test\n",
                1,
                "u1@s.test has no password; write 'address password' per line",
            ),
            (
                "u1@s.test p dr\n",
                1,
                "\"dr\" after the password; write 'address password' per line",
            ),
            (
                "\nnot-an-address p\n",
                2,
                "\"not-an-address\" is not a mail address",
            ),
        ] {
            let (l, why) = store_users(text).expect_err(text);
            assert_eq!(l, line, "{text:?}");
            assert!(
                why.contains(said),
                "{text:?}: expected {said:?}, got {why:?}"
            );
            assert!(!why.contains("flags"), "{text:?}: {why}");
        }
    }
}
