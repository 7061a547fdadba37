//! `mailbox profile`: virtual users' actions, and the capacity in users found.

use super::{Kind, Layout, headline, units};
use crate::stats::metric::{Metric, Steps};
use crate::stats::summary::{Summary, Vocabulary};

/// A profile run's latency rows: logins, each action (in `mailbox::profile`'s
/// `Action::ALL` order), and every action together.
pub const STEPS: Steps = Steps(&[
    "login",
    "open_inbox",
    "close_inbox",
    "read",
    "delete",
    "flag",
    "move",
    "search",
    "receive",
    "send",
    "check",
    "action",
]);

/// `mailbox profile`.
pub const PROFILE: Kind = Kind {
    name: "profile",
    steps: STEPS,
    units: units::ACTIONS,
    held_noun: "actions",
    decode: |v| serde_json::from_value(v).map(Summary::Profile),
    layout: Layout::Profile,
    thresholds: Vocabulary {
        keys: &[&[
            "users",
            "capacity_users",
            "actions",
            "completed",
            "refused",
            "errors",
            "late",
            "overdue",
            "unstarted",
            "stuck_users",
            "sent",
            "actions_per_min",
            "mean_ms",
            "p95_ms",
            "p99_ms",
            "sut_cpu",
            "duration_s",
        ]],
        steps: STEPS,
        metrics: |m| matches!(m, Metric::Step(_) | Metric::Lag),
    },
    headline: &headline::PROFILE,
    serves: false,
};

/// A step's verdict in words, from what the results keep of it: cut short (not judged),
/// no action due (not judged), broke (the rules that broke, the failed actions, the users
/// left waiting), or ok.
pub fn verdict_text(
    cut_short: bool,
    seconds: f64,
    planned_s: f64,
    mut why: Vec<String>,
    failed: u64,
    stuck_users: u64,
    actions: u64,
) -> String {
    if cut_short {
        return format!("CUT SHORT after {seconds:.1} s of {planned_s:.0} s: not judged");
    }
    if failed > 0 {
        why.push(format!("{failed} of {actions} actions failed"));
    }
    if stuck_users > 0 {
        why.push(format!(
            "{stuck_users} user{} not served for half the step (an action not begun: a login not answered, or the one before it still running)",
            if stuck_users == 1 { "" } else { "s" }
        ));
    }
    if why.is_empty() && actions == 0 {
        "NO ACTION was due: not judged".into()
    } else if why.is_empty() {
        "ok".into()
    } else {
        format!("BROKE {}", why.join(", "))
    }
}
