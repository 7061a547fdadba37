//! Fault injection: what a difficult receiver does to a relay. Rules per command (delay,
//! 4xx/5xx with a probability, disconnect, 421), tarpit, greylisting, per-recipient faults
//! from a user list (BHM flags) or from the address itself, and per-client limits. Every
//! injected fault is counted by kind.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::message::users::User;
use crate::smtp::proto::server::{Command, Decision, Verdict, reply};

/// One rule: on `command`, with `probability`, do `action`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// Which command.
    pub command: Command,
    /// What to do.
    pub action: Action,
    /// Chance per command, 0–1.
    pub probability: f64,
}

/// What a rule does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reply with this code instead.
    Reply(u16),
    /// Wait a fixed or uniformly random time (min, max) before the normal reply.
    Delay(Duration, Duration),
    /// Close without replying.
    Disconnect,
    /// 421 and close.
    Shutdown,
}

/// The kinds of injected fault, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A rule replied 4xx.
    Reply4xx,
    /// A rule replied 5xx.
    Reply5xx,
    /// A rule delayed a reply.
    Delay,
    /// Disconnected without reply.
    Disconnect,
    /// 421 and close.
    Shutdown,
    /// Greylisted (451 4.7.1).
    Greylist,
    /// A recipient fault (user-list flag or address local part).
    Recipient,
    /// A connection or rate limit was hit.
    Limit,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Reply4xx,
        FaultKind::Reply5xx,
        FaultKind::Delay,
        FaultKind::Disconnect,
        FaultKind::Shutdown,
        FaultKind::Greylist,
        FaultKind::Recipient,
        FaultKind::Limit,
    ];
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Reply4xx => "reply_4xx",
            FaultKind::Reply5xx => "reply_5xx",
            FaultKind::Delay => "delay",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Shutdown => "shutdown_421",
            FaultKind::Greylist => "greylist",
            FaultKind::Recipient => "recipient",
            FaultKind::Limit => "limit",
        }
    }
}

/// Everything a sink does to its clients.
#[derive(Debug, Clone, Default)]
pub struct FaultPlan {
    /// Per-command rules, checked in order; the first that fires wins.
    pub rules: Vec<Rule>,
    /// Delay added to every reply.
    pub tarpit: Duration,
    /// Greylisting: a new (client IP, sender, recipient) gets 451 until retried after this.
    pub greylist: Option<Duration>,
    /// Users with BHM flags (d defer, r reject, g greylist, b bounce).
    pub users: HashMap<String, String>,
    /// When set, AUTH must match one of these (user → password); otherwise any is accepted.
    pub passwords: Option<HashMap<String, String>>,
    /// Concurrent connections per client IP.
    pub max_conns_per_ip: Option<u64>,
    /// Messages per connection.
    pub max_msgs_per_conn: Option<u64>,
    /// Messages per second per client IP.
    pub rate_per_ip: Option<f64>,
}

/// Parses `COMMAND:ACTION[:PROBABILITY%]`, e.g. `rcpt:451:30%`, `data_end:delay=200ms`,
/// `mail:delay=10ms-1s`, `quit:disconnect`, `ehlo:shutdown:5%`.
pub fn parse_rule(spec: &str) -> Result<Rule, String> {
    let bad = |why: &str| {
        format!(
            "bad --rule {spec:?}: {why}; write COMMAND:ACTION[:PERCENT%], e.g. rcpt:451:30% or data_end:delay=200ms"
        )
    };
    let mut parts = spec.split(':');
    let cmd = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let command = match cmd.as_str() {
        "connect" => Command::Connect,
        "ehlo" | "helo" | "lhlo" => Command::Ehlo,
        "auth" => Command::Auth,
        "mail" => Command::Mail,
        "rcpt" => Command::Rcpt,
        "data" => Command::Data,
        "data_end" | "dot" | "eod" => Command::DataEnd,
        "quit" => Command::Quit,
        _ => {
            return Err(bad(
                "unknown command (connect, ehlo, auth, mail, rcpt, data, data_end, quit)",
            ));
        }
    };
    let act = parts.next().ok_or_else(|| bad("no action"))?.trim();
    let action = if let Some(d) = act.strip_prefix("delay=") {
        let (lo, hi) = match d.split_once('-') {
            Some((a, b)) => (
                crate::cli::units::duration(a)?,
                crate::cli::units::duration(b)?,
            ),
            None => {
                let x = crate::cli::units::duration(d)?;
                (x, x)
            }
        };
        if lo > hi {
            return Err(bad("delay range minimum above maximum"));
        }
        Action::Delay(lo, hi)
    } else if act == "disconnect" {
        Action::Disconnect
    } else if act == "shutdown" || act == "421" {
        Action::Shutdown
    } else {
        match act.parse::<u16>() {
            Ok(c) if (400..600).contains(&c) => Action::Reply(c),
            _ => {
                return Err(bad(
                    "action must be a 4xx/5xx code, delay=DUR, disconnect or shutdown",
                ));
            }
        }
    };
    let probability = match parts.next() {
        Some(p) => crate::cli::units::percent(p)? / 100.0,
        None => 1.0,
    };
    if parts.next().is_some() {
        return Err(bad("too many ':' fields"));
    }
    Ok(Rule {
        command,
        action,
        probability,
    })
}

/// State shared by all connections: counts, greylist memory, per-IP limits.
pub struct FaultState {
    /// The plan.
    pub plan: FaultPlan,
    counts: [AtomicU64; FaultKind::ALL.len()],
    greylist: Mutex<HashMap<(IpAddr, String, String), Instant>>,
    per_ip: Mutex<HashMap<IpAddr, IpState>>,
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
        FaultState {
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
    fn greylisted(&self, ip: IpAddr, from: &str, rcpt: &str, after: Duration) -> bool {
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
                return with_delay(
                    Decision {
                        delay: Duration::ZERO,
                        verdict: Verdict::Shutdown,
                    },
                    d.delay,
                );
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
            && let Some(r) = self.recipient_fault(rng, ip, from, arg)
        {
            return with_delay(r, d.delay);
        }
        for rule in &plan.rules {
            if rule.command != cmd || (rule.probability < 1.0 && rng.f64() >= rule.probability) {
                continue;
            }
            match &rule.action {
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

    /// Faults a recipient asks for by its user-list flags or its local part:
    /// `tempfail@…` 450, `permfail@…` 550, `NNN-anything@…` reply NNN, `disconnect@…`,
    /// `shutdown@…` 421, `greylist@…` greylisted for the plan's time (default 60 s).
    fn recipient_fault(
        &self,
        rng: &mut fastrand::Rng,
        ip: Option<IpAddr>,
        from: &str,
        rcpt: &str,
    ) -> Option<Decision> {
        let _ = rng;
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
            return fault(
                FaultKind::Recipient,
                Decision {
                    delay: Duration::ZERO,
                    verdict: Verdict::Disconnect,
                },
            );
        }
        if local == "shutdown" {
            return fault(
                FaultKind::Recipient,
                Decision {
                    delay: Duration::ZERO,
                    verdict: Verdict::Shutdown,
                },
            );
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

fn with_delay(mut d: Decision, delay: Duration) -> Decision {
    d.delay = d.delay.saturating_add(delay);
    d
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

    fn ip() -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, 1]))
    }

    #[test]
    fn rules_parse() {
        let r = parse_rule("rcpt:451:30%").expect("valid");
        assert_eq!(
            (r.command, r.action, r.probability),
            (Command::Rcpt, Action::Reply(451), 0.3)
        );
        let r = parse_rule("data_end:delay=10ms-20ms").expect("valid");
        assert_eq!(
            r.action,
            Action::Delay(Duration::from_millis(10), Duration::from_millis(20))
        );
        assert_eq!(
            parse_rule("quit:disconnect").expect("valid").action,
            Action::Disconnect
        );
        for bad in [
            "nope:451",
            "rcpt",
            "rcpt:200",
            "rcpt:451:150%",
            "rcpt:delay=x",
        ] {
            assert!(parse_rule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_probability_fires_about_that_often_and_is_counted() {
        let st = FaultState::new(FaultPlan {
            rules: vec![parse_rule("rcpt:451:30%").expect("rule")],
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
