//! `mailbox imap`: commands on logged-in, selected sessions, with the store's state checked.

use super::{Kind, Layout, headline, units};
use crate::stats::metric::{Metric, Steps};
use crate::stats::summary::{Summary, Vocabulary};

/// IMAP's step names, in the order of its phases (`imap::proto::Phase::ALL`, which a test
/// there holds them to).
pub const STEPS: Steps = Steps(&[
    "connect",
    "banner",
    "capability",
    "starttls",
    "tls_handshake",
    "login",
    "select",
    "close",
    "list",
    "status",
    "fetch",
    "fetch_body",
    "fetch_part",
    "search",
    "store",
    "delete",
    "expunge",
    "copy",
    "create",
    "move",
    "append",
    "noop",
    "idle",
    "logout",
]);

/// `mailbox imap`.
pub const IMAP: Kind = Kind {
    name: "imap",
    steps: STEPS,
    units: units::COMMANDS,
    held_noun: "commands",
    decode: |v| serde_json::from_value(v).map(Summary::Imap),
    layout: Layout::Imap,
    thresholds: Vocabulary {
        keys: &[&[
            "intended",
            "commands",
            "unstarted",
            "completed",
            "refused",
            "errors",
            "aborted",
            "sessions",
            "connections",
            "fetched",
            "fetched_parts",
            "appended",
            "copied",
            "expunged",
            "expunges_shared",
            "moved",
            "bytes",
            "violations",
            "commands_per_sec",
            "duration_s",
            "active_s",
            "p50_ms",
            "p99_ms",
            "lag_p99_ms",
        ]],
        steps: STEPS,
        metrics: |m| m != Metric::E2e,
    },
    headline: &headline::IMAP,
    serves: false,
};

/// `mailbox populate --via imap`: APPEND sessions, summed up as an IMAP run (commands,
/// what they moved, the state checks). Its own name, so that reading its results back
/// (`report`, `compare`, `merge`) takes the IMAP summary it holds, not the LMTP fill's.
pub const POPULATE_IMAP: Kind = Kind {
    name: "populate_imap",
    ..IMAP
};
