//! `sink`: the receiver, which times end to end only and serves until it is stopped.

use super::{Kind, Layout, headline, units};
use crate::stats::metric::{Metric, Steps};
use crate::stats::summary::{Summary, Vocabulary};

/// `sink`.
pub const SINK: Kind = Kind {
    name: "sink",
    steps: Steps::NONE,
    units: units::MESSAGES,
    held_noun: "messages",
    decode: |v| serde_json::from_value(v).map(Summary::Sink),
    layout: Layout::Sink,
    thresholds: Vocabulary {
        keys: &[&[
            "sessions",
            "tls_sessions",
            "transactions",
            "messages",
            "recipients",
            "bytes",
            "rejected",
            "refused",
            "sessions_refused",
            "abandoned",
            "unconfirmed",
            "protocol_errors",
            "duplicates",
            "missing",
            "lost",
            "null_sender",
            "untracked",
            "damaged",
            "msgs_per_sec",
            "mpm",
            "active_s",
            "e2e_p50_ms",
            "e2e_p99_ms",
            "duration_s",
        ]],
        steps: Steps::NONE,
        metrics: |m| m == Metric::E2e,
    },
    headline: &headline::SINK,
    serves: true,
};
