//! What all connections of a sink share: fault counts, greylist memory and per-client
//! limits, and the decision for each command.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::pace::Pace;
use super::{Action, FaultKind, FaultPlan};
use crate::smtp::proto::server::{Command, Decision, Verdict, reply};

/// State shared by all connections: counts, greylist memory, per-IP limits.
pub struct FaultState {
    /// The plan.
    pub plan: FaultPlan,
    counts: [AtomicU64; FaultKind::ALL.len()],
    greylist: Mutex<HashMap<(IpAddr, String, String), Instant>>,
    per_ip: Mutex<HashMap<IpAddr, IpState>>,
    /// The turns of each `pace=` rule, by the rule's place in the plan.
    paces: Vec<Option<Pace>>,
}

#[derive(Default)]
struct IpState {
    conns: u64,
    tokens: f64,
    last: Option<Instant>,
}

/// Upper bound on remembered greylist triples (hostile clients cannot grow it further).
const GREYLIST_CAP: usize = 1_000_000;

impl FaultState {
    /// Shared state for a plan.
    pub fn new(plan: FaultPlan) -> Self {
        let paces = plan
            .rules
            .iter()
            .map(|r| match r.action {
                Action::Pace(per_s) => Some(Pace::new(per_s)),
                _ => None,
            })
            .collect();
        FaultState {
            paces,
            plan,
            counts: Default::default(),
            greylist: Mutex::new(HashMap::new()),
            per_ip: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one fault.
    pub fn count(&self, k: FaultKind) {
        self.counts[k as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Fault counts by kind name.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        FaultKind::ALL
            .iter()
            .map(|k| (k.name(), self.counts[*k as usize].load(Ordering::Relaxed)))
            .collect()
    }

    /// A connection from `ip` opens; false when its per-IP limit is exceeded.
    pub fn conn_open(&self, ip: Option<IpAddr>) -> bool {
        let (Some(ip), Some(max)) = (ip, self.plan.max_conns_per_ip) else {
            return true;
        };
        let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let st = m.entry(ip).or_default();
        st.conns += 1;
        st.conns <= max
    }

    /// A connection from `ip` closed.
    pub fn conn_close(&self, ip: Option<IpAddr>) {
        let (Some(ip), Some(_)) = (ip, self.plan.max_conns_per_ip) else {
            return;
        };
        let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(st) = m.get_mut(&ip) {
            st.conns = st.conns.saturating_sub(1);
        }
    }

    /// Token bucket per IP (burst of one second's worth); false when over the rate.
    fn rate_ok(&self, ip: IpAddr, rate: f64) -> bool {
        let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let st = m.entry(ip).or_default();
        let now = Instant::now();
        let elapsed = st
            .last
            .map_or(rate, |l| now.duration_since(l).as_secs_f64() * rate);
        st.tokens = (st.tokens + elapsed).min(rate.max(1.0));
        st.last = Some(now);
        if st.tokens >= 1.0 {
            st.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// True when the triple must be greylisted now.
    pub(super) fn greylisted(&self, ip: IpAddr, from: &str, rcpt: &str, after: Duration) -> bool {
        let mut m = self.greylist.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= GREYLIST_CAP {
            m.clear();
        }
        let now = Instant::now();
        let first = *m
            .entry((ip, from.to_string(), rcpt.to_ascii_lowercase()))
            .or_insert(now);
        now.duration_since(first) < after
    }

    /// The decision for a command on one connection.
    pub fn decide(
        &self,
        rng: &mut fastrand::Rng,
        cmd: Command,
        ip: Option<IpAddr>,
        from: &str,
        arg: &str,
        msgs_on_conn: u64,
    ) -> Decision {
        let plan = &self.plan;
        let mut d = Decision::ACCEPT;
        d.delay = plan.tarpit;
        if cmd == Command::Mail {
            if let Some(max) = plan.max_msgs_per_conn
                && msgs_on_conn >= max
            {
                self.count(FaultKind::Limit);
                return with_delay(Decision::at_once(Verdict::Shutdown), d.delay);
            }
            if let (Some(rate), Some(ip)) = (plan.rate_per_ip, ip)
                && !self.rate_ok(ip, rate)
            {
                self.count(FaultKind::Limit);
                return with_delay(
                    reply(451, "4.7.0", "rate limit exceeded, try later"),
                    d.delay,
                );
            }
        }
        if cmd == Command::Auth
            && let Some(pw) = &plan.passwords
        {
            let (user, pass) = arg.split_once('\0').unwrap_or((arg, ""));
            if pw.get(&user.to_ascii_lowercase()).is_none_or(|p| p != pass) {
                return with_delay(
                    reply(535, "5.7.8", "authentication credentials invalid"),
                    d.delay,
                );
            }
        }
        if cmd == Command::Rcpt
            && let Some(r) = self.recipient_fault(ip, from, arg)
        {
            return with_delay(r, d.delay);
        }
        for (i, rule) in plan.rules.iter().enumerate() {
            if rule.command != cmd || (rule.probability < 1.0 && rng.f64() >= rule.probability) {
                continue;
            }
            match &rule.action {
                Action::Pace(_) => {
                    let wait = self.paces[i].as_ref().map_or(Duration::ZERO, Pace::turn);
                    if !wait.is_zero() {
                        self.count(FaultKind::Paced);
                    }
                    d.delay = d.delay.saturating_add(wait);
                    continue; // a pace does not change the reply
                }
                Action::Delay(lo, hi) => {
                    self.count(FaultKind::Delay);
                    let extra = if lo == hi {
                        *lo
                    } else {
                        lo.saturating_add(hi.saturating_sub(*lo).mul_f64(rng.f64()))
                    };
                    d.delay = d.delay.saturating_add(extra);
                    continue; // a delay does not change the reply
                }
                Action::Reply(code) => {
                    self.count(if *code < 500 {
                        FaultKind::Reply4xx
                    } else {
                        FaultKind::Reply5xx
                    });
                    let (esc, text) = if *code < 500 {
                        ("4.3.0", "temporary failure (injected)")
                    } else {
                        ("5.3.0", "permanent failure (injected)")
                    };
                    return with_delay(reply(*code, esc, text), d.delay);
                }
                Action::Disconnect => {
                    self.count(FaultKind::Disconnect);
                    d.verdict = Verdict::Disconnect;
                    return d;
                }
                Action::Shutdown => {
                    self.count(FaultKind::Shutdown);
                    d.verdict = Verdict::Shutdown;
                    return d;
                }
            }
        }
        d
    }
}

fn with_delay(mut d: Decision, delay: Duration) -> Decision {
    d.delay = d.delay.saturating_add(delay);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::faults::parse_rule;

    fn ip() -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, 1]))
    }

    #[test]
    fn a_probability_fires_about_that_often_and_is_counted() {
        let st = FaultState::new(FaultPlan {
            rules: vec![parse_rule("--rule", "rcpt:451:30%").expect("rule")],
            ..FaultPlan::default()
        });
        let mut rng = fastrand::Rng::with_seed(1);
        let n = (0..10_000)
            .filter(|_| {
                st.decide(&mut rng, Command::Rcpt, ip(), "a@x", "b@x", 0)
                    .verdict
                    != Verdict::Accept
            })
            .count();
        assert!((2700..3300).contains(&n), "{n} of 10000 refused");
        assert_eq!(
            st.counts().iter().find(|c| c.0 == "reply_4xx").map(|c| c.1),
            Some(n as u64)
        );
    }

    #[test]
    fn greylisting_lets_a_retry_through_after_the_time() {
        let st = FaultState::new(FaultPlan {
            greylist: Some(Duration::from_millis(50)),
            ..FaultPlan::default()
        });
        let mut rng = fastrand::Rng::with_seed(1);
        let first = st.decide(&mut rng, Command::Rcpt, ip(), "a@x", "b@x", 0);
        assert!(matches!(first.verdict, Verdict::Reply(451, ..)));
        let early = st.decide(&mut rng, Command::Rcpt, ip(), "a@x", "b@x", 0);
        assert!(matches!(early.verdict, Verdict::Reply(451, ..)));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            st.decide(&mut rng, Command::Rcpt, ip(), "a@x", "b@x", 0)
                .verdict,
            Verdict::Accept
        );
        let other = st.decide(&mut rng, Command::Rcpt, ip(), "a@x", "c@x", 0);
        assert!(
            matches!(other.verdict, Verdict::Reply(451, ..)),
            "a new triple is greylisted"
        );
    }

    #[test]
    fn per_connection_message_limit_closes_with_421() {
        let st = FaultState::new(FaultPlan {
            max_msgs_per_conn: Some(2),
            ..FaultPlan::default()
        });
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(
            st.decide(&mut rng, Command::Mail, ip(), "", "a@x", 1)
                .verdict,
            Verdict::Accept
        );
        assert_eq!(
            st.decide(&mut rng, Command::Mail, ip(), "", "a@x", 2)
                .verdict,
            Verdict::Shutdown
        );
    }
}
