//! Faults a recipient asks for: by its flags in the `--users` list (BHM's d, r, g) or by
//! its own local part (`tempfail@`, `permfail@`, `NNN-anything@`, `disconnect@`,
//! `shutdown@`, `greylist@`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use super::{FaultKind, FaultState};
use crate::message::users::User;
use crate::smtp::proto::server::{Decision, Verdict, reply};

impl FaultState {
    /// Faults a recipient asks for by its user-list flags or its local part:
    /// `tempfail@…` 450, `permfail@…` 550, `NNN-anything@…` reply NNN, `disconnect@…`,
    /// `shutdown@…` 421, `greylist@…` greylisted for the plan's time (default 60 s).
    pub(super) fn recipient_fault(
        &self,
        ip: Option<IpAddr>,
        from: &str,
        rcpt: &str,
    ) -> Option<Decision> {
        let local = rcpt
            .split('@')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let flags = self
            .plan
            .users
            .get(&rcpt.to_ascii_lowercase())
            .map(String::as_str);
        let grey_after = self.plan.greylist;
        let fault = |kind: FaultKind, d: Decision| {
            self.count(kind);
            Some(d)
        };
        if flags.is_some_and(|f| f.contains('r')) || local == "permfail" {
            return fault(
                FaultKind::Recipient,
                reply(550, "5.1.1", "recipient rejected (injected)"),
            );
        }
        if flags.is_some_and(|f| f.contains('d')) || local == "tempfail" {
            return fault(
                FaultKind::Recipient,
                reply(450, "4.2.0", "recipient deferred (injected)"),
            );
        }
        if local == "disconnect" {
            return fault(FaultKind::Recipient, Decision::at_once(Verdict::Disconnect));
        }
        if local == "shutdown" {
            return fault(FaultKind::Recipient, Decision::at_once(Verdict::Shutdown));
        }
        if let Some((code, _)) = local.split_once('-')
            && let Ok(code) = code.parse::<u16>()
            && (400..600).contains(&code)
        {
            let esc = if code < 500 { "4.0.0" } else { "5.0.0" };
            return fault(
                FaultKind::Recipient,
                reply(code, esc, "requested by the address"),
            );
        }
        let grey = flags.is_some_and(|f| f.contains('g')) || local == "greylist";
        let after = match (grey, grey_after) {
            (_, Some(t)) => Some(t),
            (true, None) => Some(Duration::from_secs(60)),
            (false, None) => None,
        };
        if let (Some(after), Some(ip)) = (after, ip)
            && (grey || grey_after.is_some())
            && self.greylisted(ip, from, rcpt, after)
        {
            return fault(
                FaultKind::Greylist,
                reply(451, "4.7.1", "greylisted, try again later"),
            );
        }
        None
    }
}

/// Users with flags, keyed by lower-case address.
pub fn user_flags(users: &[User]) -> HashMap<String, String> {
    users
        .iter()
        .map(|u| (u.address.to_ascii_lowercase(), u.flags.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::faults::FaultPlan;
    use crate::smtp::proto::server::Command;

    fn ip() -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, 1]))
    }

    #[test]
    fn addresses_and_user_flags_ask_for_faults() {
        let users = vec![User {
            address: "d@x.test".into(),
            password: None,
            flags: "d".into(),
        }];
        let st = FaultState::new(FaultPlan {
            users: user_flags(&users),
            ..FaultPlan::default()
        });
        let mut rng = fastrand::Rng::with_seed(1);
        let mut code = |rcpt: &str| match st
            .decide(&mut rng, Command::Rcpt, ip(), "a@x", rcpt, 0)
            .verdict
        {
            Verdict::Reply(c, ..) => c,
            Verdict::Accept => 250,
            Verdict::Disconnect => 0,
            Verdict::Shutdown => 421,
        };
        assert_eq!(code("tempfail@x.test"), 450);
        assert_eq!(code("permfail@x.test"), 550);
        assert_eq!(code("452-full@x.test"), 452);
        assert_eq!(code("disconnect@x.test"), 0);
        assert_eq!(code("D@x.test"), 450);
        assert_eq!(code("fine@x.test"), 250);
    }
}
