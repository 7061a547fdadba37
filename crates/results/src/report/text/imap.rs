//! An IMAP workload's summary: commands, what they moved, the state checks, on a store.

use std::fmt::Write as _;

use super::parts::store_report;
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

/// Renders the summary of an IMAP run; `steps` name its latency rows.
pub fn render_imap(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Imap(s) = &r.summary {
            imap_lines(out, r, s);
        }
    })
}

fn imap_lines(out: &mut String, r: &Results, s: &crate::stats::summary::ImapSummary) {
    let _ = writeln!(
        out,
        "  commands   {}  completed {}  refused (NO/BAD) {}  errors {}  aborted {}",
        s.commands, s.completed, s.refused, s.errors, s.aborted
    );
    if s.unstarted > 0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the server or -c connections could not keep up)",
            s.intended, s.unstarted
        );
    }
    // `populate --via imap` counts the octets it APPENDs: they went up, not down.
    let direction = if r.config["via"] == "append" {
        "uploaded"
    } else {
        "downloaded"
    };
    let _ = writeln!(
        out,
        "  messages   fetched {} whole (and {} sections)  appended {}  copied {}  expunged {}  moved out {}  {:.2} MB {direction}",
        s.fetched,
        s.fetched_parts,
        s.appended,
        s.copied,
        s.expunged,
        s.moved,
        s.bytes as f64 / 1e6
    );
    if s.expunges_shared > 0 {
        let _ = writeln!(
            out,
            "             (expunged is an upper bound: {} EXPUNGEs ran while another session of the same user was open, and their replies report its expunges too)",
            s.expunges_shared
        );
    }
    let kinds: Vec<String> = r
        .counters
        .mailbox
        .violations
        .0
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let checked = r.config["check_state"].as_bool().unwrap_or(true);
    let _ = match (checked, kinds.is_empty()) {
        (false, _) => writeln!(out, "  state      not checked (--no-state-check)"),
        (true, true) => writeln!(out, "  state      0 violations"),
        (true, false) => writeln!(
            out,
            "  state      {} VIOLATIONS: {}",
            s.violations,
            kinds.join(", ")
        ),
    };
    let _ = if s.completed + s.refused == 0 {
        writeln!(
            out,
            "  rate       0.0 commands/s (the server answered none)"
        )
    } else {
        writeln!(
            out,
            "  rate       {:.1} commands/s, over the active span ({:.3} s: to the last completed command)",
            s.commands_per_sec, s.active_s
        )
    };
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  sessions   {} logged in; connections {} (TLS {}), failed to connect {}, refused at login {}",
        s.sessions, c.connections, c.tls_connections, c.connect_failures, c.mailbox.login_failures
    );
}
