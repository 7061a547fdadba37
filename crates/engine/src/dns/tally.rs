//! What the DNS server counts beyond the shared counters: questions by class, replies by
//! code, transports, truncations, drops, ignored packets, queries per client address
//! (bounded), and how often each fault rule fired.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::{Value, json};

use super::answer::{Answer, Outcome, Transport};
use super::faults::QClass;

/// Client addresses counted one by one; more are summed as `other` (a flood from many
/// addresses must not grow memory without bound).
pub const MAX_CLIENTS: usize = 4096;

/// The counts of one server, for the whole run.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Questions by class ([`QClass::ALL`] order).
    pub by_class: [u64; 6],
    /// Replies by code, extended codes included (BADVERS, 16); codes above 31 count at 31.
    pub by_rcode: [u64; 32],
    /// Questions over UDP and over TCP.
    pub udp: u64,
    /// See `udp`.
    pub tcp: u64,
    /// Replies cut with the TC bit.
    pub truncated: u64,
    /// Questions a rule dropped.
    pub dropped: u64,
    /// Packets that were no query (no reply).
    pub ignored: u64,
    /// Delayed answers sent at once because too many were already waiting.
    pub shed: u64,
    /// Questions by client address.
    pub clients: HashMap<IpAddr, u64>,
    /// Questions from clients beyond [`MAX_CLIENTS`].
    pub other_clients: u64,
    /// Times each rule decided an answer or added a delay, by rule index.
    pub fired: Vec<u64>,
}

/// Reply code names, by value (RFC 1035, 2136 and 6891's BADVERS at 16).
const RCODES: [&str; 17] = [
    "noerror", "formerr", "servfail", "nxdomain", "notimp", "refused", "yxdomain", "yxrrset",
    "nxrrset", "notauth", "notzone", "rcode11", "rcode12", "rcode13", "rcode14", "rcode15",
    "badvers",
];

impl Tally {
    /// Counts one packet from `from`.
    pub fn count(&mut self, a: &Answer, transport: Transport, from: IpAddr) {
        if a.outcome == Outcome::Ignored {
            self.ignored += 1;
            return;
        }
        match transport {
            Transport::Udp => self.udp += 1,
            Transport::Tcp => self.tcp += 1,
        }
        if let Some(c) = a.class {
            self.by_class[c.index()] += 1;
        }
        match a.outcome {
            Outcome::Dropped => self.dropped += 1,
            _ => self.by_rcode[usize::from(a.rcode).min(31)] += 1,
        }
        self.truncated += u64::from(a.truncated);
        for i in a.fired.iter().flatten() {
            if self.fired.len() <= *i {
                self.fired.resize(i + 1, 0);
            }
            self.fired[*i] += 1;
        }
        if let Some(n) = self.clients.get_mut(&from) {
            *n += 1;
        } else if self.clients.len() < MAX_CLIENTS {
            self.clients.insert(from, 1);
        } else {
            self.other_clients += 1;
        }
    }

    /// Questions answered or dropped (ignored packets are not questions).
    pub fn questions(&self) -> u64 {
        self.udp + self.tcp
    }

    /// Replies with `code`.
    pub fn rcode(&self, code: u16) -> u64 {
        self.by_rcode[usize::from(code).min(31)]
    }

    /// Questions of one class.
    pub fn class(&self, c: QClass) -> u64 {
        self.by_class[c.index()]
    }

    /// The counts as the results file's `extra.dns` holds them; `rules` name the fired
    /// counts.
    pub fn report(&self, rules: &[String]) -> Value {
        let classes: serde_json::Map<String, Value> = QClass::ALL
            .iter()
            .map(|c| (c.name().to_string(), self.class(*c).into()))
            .collect();
        let rcodes: serde_json::Map<String, Value> = self
            .by_rcode
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let name = RCODES
                    .get(i)
                    .map_or_else(|| format!("rcode{i}"), |s| s.to_string());
                (name, (*n).into())
            })
            .collect();
        let mut clients: Vec<(&IpAddr, &u64)> = self.clients.iter().collect();
        clients.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let clients: serde_json::Map<String, Value> = clients
            .into_iter()
            .map(|(ip, n)| (ip.to_string(), (*n).into()))
            .collect();
        let faults: Vec<Value> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| json!({"rule": r, "fired": self.fired.get(i).copied().unwrap_or(0)}))
            .collect();
        json!({
            "questions": self.questions(),
            "by_type": classes,
            "by_rcode": rcodes,
            "udp": self.udp,
            "tcp": self.tcp,
            "truncated": self.truncated,
            "dropped": self.dropped,
            "ignored": self.ignored,
            "shed": self.shed,
            "clients": clients,
            "other_clients": self.other_clients,
            "faults": faults,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn answer(class: QClass, rcode: u16, outcome: Outcome) -> Answer {
        Answer {
            reply: None,
            delay: Duration::ZERO,
            outcome,
            class: Some(class),
            rcode,
            truncated: false,
            fired: [Some(1), None],
            question: None,
        }
    }

    #[test]
    fn counts_add_up_and_clients_stay_bounded() {
        let mut t = Tally::default();
        let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x7f00_0000 + i));
        for i in 0..(MAX_CLIENTS as u32 + 10) {
            t.count(
                &answer(QClass::Mx, 0, Outcome::Answered),
                Transport::Udp,
                ip(i),
            );
        }
        t.count(
            &answer(QClass::A, 3, Outcome::Answered),
            Transport::Tcp,
            ip(0),
        );
        t.count(
            &answer(QClass::A, 0, Outcome::Dropped),
            Transport::Udp,
            ip(0),
        );
        t.count(
            &answer(QClass::A, 0, Outcome::Ignored),
            Transport::Udp,
            ip(0),
        );
        assert_eq!(t.clients.len(), MAX_CLIENTS);
        assert_eq!(t.other_clients, 10);
        assert_eq!(t.questions(), MAX_CLIENTS as u64 + 12);
        let r = t.report(&["mx:drop".into(), "a:servfail".into()]);
        assert_eq!(r["by_type"]["mx"], MAX_CLIENTS as u64 + 10);
        assert_eq!(r["by_type"]["a"], 2);
        assert_eq!(r["by_rcode"]["nxdomain"], 1);
        assert_eq!(r["by_rcode"]["noerror"], MAX_CLIENTS as u64 + 10);
        assert_eq!(
            (r["dropped"].as_u64(), r["ignored"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(r["clients"]["127.0.0.0"], 3, "the busiest client first");
        assert_eq!(r["faults"][1]["fired"], MAX_CLIENTS as u64 + 12);
        assert_eq!(r["faults"][0]["fired"], 0);
        assert!(r["by_rcode"].get("badvers").is_none());
    }

    /// An EDNS version the server does not speak is answered BADVERS (16, RFC 6891): counted
    /// as that, not folded into its low four bits (NOERROR).
    #[test]
    fn badvers_is_counted_as_badvers() {
        let mut t = Tally::default();
        let ip = IpAddr::from(std::net::Ipv4Addr::LOCALHOST);
        t.count(
            &answer(QClass::Mx, 16, Outcome::Answered),
            Transport::Udp,
            ip,
        );
        t.count(
            &answer(QClass::Mx, 0, Outcome::Answered),
            Transport::Udp,
            ip,
        );
        let r = t.report(&[]);
        assert_eq!(
            (&r["by_rcode"]["badvers"], &r["by_rcode"]["noerror"]),
            (&1.into(), &1.into()),
            "{r}"
        );
    }
}
