//! `relay` (send → MTA under test → sink) and `mailbox arrival` (SMTP in, each message
//! timed until IMAP shows it): an injection over SMTP and what arrived at the far end.

use super::send::{INJECTION_KEYS, SMTP_STEPS};
use super::{Kind, Layout, headline, units};
use crate::stats::metric::Metric;
use crate::stats::summary::{Summary, Vocabulary};

/// `relay`.
pub const RELAY: Kind = Kind {
    name: "relay",
    steps: SMTP_STEPS,
    units: units::MESSAGES,
    held_noun: "messages",
    decode: |v| serde_json::from_value(v).map(Summary::Relay),
    layout: Layout::Relay,
    thresholds: Vocabulary {
        keys: &[
            INJECTION_KEYS,
            &[
                "expected_recipients",
                "delivered",
                "delivered_messages",
                "lost",
                "damaged",
                "undelivered",
                "drain_aborted",
                "duplicates",
                "aborted_delivered",
                "bounced",
                "bounces",
                "delay_notices",
                "untraced",
                "drained",
                "inject_mpm",
                "drain_mpm",
                "drain_s",
                "delivery_per_sec",
                "drain_per_recipient",
                "e2e_p50_ms",
                "e2e_p99_ms",
                "delivered_before_accept",
                "before_accept_max_ms",
                "max_backlog",
                "max_queue",
                "maillog_sent",
                "maillog_bounced",
                "queued_left",
                "receiver_rejected",
                "max_sustainable_per_sec",
                "max_sustainable_mpm",
                "flush_held",
                "release_at_s",
                "e2e_recipient_p50_ms",
                "e2e_recipient_p99_ms",
                "dns_queries",
                "dns_queries_per_message",
                "dns_p50_ms",
                "dns_p99_ms",
                "dns_deferred",
                "lookups",
                "lookups_failed",
                "lookups_per_msg",
                "lookup_p50_ms",
                "lookup_p99_ms",
                "fsyncs_per_msg",
                "files_created_per_msg",
                "renames_per_msg",
                "unlinks_per_msg",
                "bytes_written_per_msg",
                "ctx_switches_per_msg",
                // `--fault` (issue 42)
                "fault_at_s",
                "fault_accepted_before",
                "fault_down_s",
                "fault_duplicated_messages",
                "fault_unsynced_files",
                "fault_made_up",
                "fault_refused_4xx",
                "restart_first_delivery_s",
                "restart_last_delivery_s",
                // seed 003's "+s to flush" and the MTA's network bytes (issue 43)
                "last_arrival_after_injection_s",
                "last_arrival_before_injection_end_s",
                "drain_end_after_injection_s",
                "net_to_mta_bytes",
                "net_from_mta_bytes",
            ],
        ],
        steps: SMTP_STEPS,
        metrics: |_: Metric| true,
    },
    headline: &headline::RELAY,
    serves: false,
};

/// `mailbox arrival`: a relay whose far end is a store's IMAP view.
pub const ARRIVAL: Kind = Kind {
    name: "arrival",
    ..RELAY
};
