//! `dns`: the test DNS server, which times its answers by question type and serves until
//! it is stopped.

use super::{Kind, Layout, headline, units};
use crate::stats::dns::STEPS;
use crate::stats::metric::Metric;
use crate::stats::summary::{Summary, Vocabulary};

/// `dns`.
pub const DNS: Kind = Kind {
    name: "dns",
    steps: STEPS,
    units: units::QUESTIONS,
    held_noun: "messages",
    decode: |v| serde_json::from_value(v).map(Summary::Dns),
    layout: Layout::Dns,
    thresholds: Vocabulary {
        keys: &[&[
            "questions",
            "answered",
            "dropped",
            "ignored",
            "noerror",
            "nxdomain",
            "servfail",
            "refused",
            "formerr",
            "truncated",
            "tcp",
            "queries_per_sec",
            "p50_ms",
            "p99_ms",
            "zones",
            "duration_s",
        ]],
        steps: STEPS,
        metrics: |m| !matches!(m, Metric::Lag | Metric::E2e),
    },
    headline: &headline::DNS,
    serves: true,
};
