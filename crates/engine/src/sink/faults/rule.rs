//! Fault rules, `COMMAND:ACTION[:PERCENT%]`, as `--rule` and the rules file give them.
//! Besides replies, delays and disconnects, `pace=RATE` makes the sink a receiver of a
//! known capacity: that command's replies go out at most RATE a second, all connections
//! together, each waiting its turn.

use std::time::Duration;

use serde::Serialize;

use crate::smtp::proto::server::Command;

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
    /// At most this many of the command's replies per second, all connections together:
    /// each reply waits for its turn (none is refused).
    Pace(f64),
}

/// Parses `COMMAND:ACTION[:PROBABILITY%]`, e.g. `rcpt:451:30%`, `data_end:delay=200ms`,
/// `mail:delay=10ms-1s`, `quit:disconnect`, `ehlo:shutdown:5%`, `data_end:pace=300/s`;
/// `flag` (`--rule`, `--sink-rule`) is what an error names.
pub fn parse_rule(flag: &str, spec: &str) -> Result<Rule, String> {
    let bad = |why: &str| {
        format!(
            "bad {flag} {spec:?}: {why}; write COMMAND:ACTION[:PERCENT%], e.g. rcpt:451:30%, data_end:delay=200ms or data_end:pace=300/s"
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
        let (lo, hi) = crate::units::duration_range(d).map_err(|e| bad(&e))?;
        Action::Delay(lo, hi)
    } else if let Some(r) = act.strip_prefix("pace=") {
        Action::Pace(crate::units::rate(r).map_err(|e| bad(&e))?)
    } else if act == "disconnect" {
        Action::Disconnect
    } else if act == "shutdown" || act == "421" {
        Action::Shutdown
    } else {
        match act.parse::<u16>() {
            Ok(c) if (400..600).contains(&c) => Action::Reply(c),
            _ => {
                return Err(bad(
                    "action must be a 4xx/5xx code, delay=DUR, pace=RATE, disconnect or shutdown",
                ));
            }
        }
    };
    let probability = match parts.next() {
        Some(p) => crate::units::percent(p).map_err(|e| bad(&e))? / 100.0,
        None => 1.0,
    };
    if parts.next().is_some() {
        return Err(bad("too many ':' fields"));
    }
    if matches!(action, Action::Pace(_)) && probability < 1.0 {
        return Err(bad(
            "a pace holds every reply to its turn; it takes no percentage",
        ));
    }
    Ok(Rule {
        command,
        action,
        probability,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse() {
        let r = parse_rule("--rule", "rcpt:451:30%").expect("valid");
        assert_eq!(
            (r.command, r.action, r.probability),
            (Command::Rcpt, Action::Reply(451), 0.3)
        );
        let r = parse_rule("--rule", "data_end:delay=10ms-20ms").expect("valid");
        assert_eq!(
            r.action,
            Action::Delay(Duration::from_millis(10), Duration::from_millis(20))
        );
        assert_eq!(
            parse_rule("--rule", "quit:disconnect")
                .expect("valid")
                .action,
            Action::Disconnect
        );
        assert_eq!(
            parse_rule("--rule", "data_end:pace=300/s")
                .expect("valid")
                .action,
            Action::Pace(300.0)
        );
        assert_eq!(
            parse_rule("--rule", "data_end:pace=1200/min")
                .expect("valid")
                .action,
            Action::Pace(20.0)
        );
        for bad in [
            "nope:451",
            "rcpt",
            "rcpt:200",
            "rcpt:451:150%",
            "rcpt:delay=x",
            "data_end:pace=0/s",
            "data_end:pace=fast",
            "data_end:pace=300/s:50%",
        ] {
            let e = parse_rule("--sink-rule", bad).expect_err(bad);
            assert!(
                e.starts_with(&format!("bad --sink-rule {bad:?}: ")),
                "the error names the flag and the rule: {e}"
            );
        }
    }
}
