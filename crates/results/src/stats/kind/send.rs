//! The SMTP generators: `send`, and `mailbox populate` filling mailboxes over LMTP; both
//! time SMTP's phases and sum up as an injection.

use super::{Kind, Layout, headline, units};
use crate::stats::metric::{Metric, Steps};
use crate::stats::summary::{Summary, Vocabulary};

/// SMTP's step names, in the order of its phases (`smtp::proto::Phase::ALL`, which a test
/// there holds them to): every SMTP kind of run times these.
pub const SMTP_STEPS: Steps = Steps(&[
    "connect",
    "banner",
    "ehlo",
    "starttls",
    "tls_handshake",
    "auth",
    "mail",
    "rcpt",
    "data",
    "data_end",
    "rset",
    "quit",
]);

/// The summary keys of the injection, shared by `send` and `relay`.
pub const INJECTION_KEYS: &[&str] = &[
    "intended",
    "sent",
    "unstarted",
    "accepted",
    "rejected",
    "errors",
    "aborted",
    "failed",
    "msgs_per_sec",
    "mpm",
    "bytes",
    "bytes_per_sec",
    "rate_span_s",
];

/// The numeric keys of `send`'s summary, and its metrics: what `--threshold` may name.
const THRESHOLDS: Vocabulary = Vocabulary {
    keys: &[
        INJECTION_KEYS,
        &[
            "duration_s",
            "active_s",
            "connections",
            "rcpts_accepted",
            "p50_ms",
            "p99_ms",
            "lag_p99_ms",
        ],
    ],
    steps: SMTP_STEPS,
    metrics: |m| m != Metric::E2e,
};

/// `send`: SMTP or LMTP load against a server.
pub const SEND: Kind = Kind {
    name: "send",
    steps: SMTP_STEPS,
    units: units::MESSAGES,
    held_noun: "messages",
    decode: |v| serde_json::from_value(v).map(Summary::Send),
    layout: Layout::Generator,
    thresholds: THRESHOLDS,
    headline: &headline::SEND,
    serves: false,
};

/// `mailbox populate` over LMTP: a `send` whose recipients are a store's users.
pub const POPULATE: Kind = Kind {
    name: "populate",
    ..SEND
};
