//! `mailbox pop3`: sessions that log in, list, download and delete.

use super::{Kind, Layout, headline, units};
use crate::stats::metric::{Metric, Steps};
use crate::stats::summary::{Summary, Vocabulary};

/// POP3's step names, in the order of its phases (`pop3::proto::Phase::ALL`, which a test
/// there holds them to).
pub const STEPS: Steps = Steps(&[
    "connect",
    "banner",
    "capa",
    "stls",
    "tls_handshake",
    "auth",
    "stat",
    "list",
    "uidl",
    "retr",
    "top",
    "dele",
    "quit",
]);

/// `mailbox pop3`.
pub const POP3: Kind = Kind {
    name: "pop3",
    steps: STEPS,
    units: units::SESSIONS,
    held_noun: "sessions",
    decode: |v| serde_json::from_value(v).map(Summary::Pop3),
    layout: Layout::Pop3,
    thresholds: Vocabulary {
        keys: &[&[
            "intended",
            "sessions",
            "logins",
            "unstarted",
            "completed",
            "refused",
            "errors",
            "aborted",
            "retrieved",
            "deleted",
            "bytes",
            "sessions_per_sec",
            "retrieved_per_sec",
            "duration_s",
            "active_s",
            "p50_ms",
            "p99_ms",
            "lag_p99_ms",
        ]],
        steps: STEPS,
        metrics: |m| m != Metric::E2e,
    },
    headline: &headline::POP3,
    serves: false,
};
