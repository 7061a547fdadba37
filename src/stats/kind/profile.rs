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
