//! A sink's summary: what arrived, what was refused, what the trace headers say.

use std::fmt::Write as _;

use super::parts::*;
use crate::stats::Results;
use crate::stats::summary::Summary;

/// Renders the summary of a sink run.
pub fn render_sink(r: &Results, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Sink(s) = &r.summary else {
        return out;
    };
    let _ = writeln!(
        out,
        "  received   messages {}  recipients {}  bytes {}  transactions {}",
        s.messages, s.recipients, s.bytes, s.transactions
    );
    let _ = writeln!(
        out,
        "  refused    transactions {}  negative replies {}  protocol errors {}  sessions {} (TLS {})",
        s.refused, s.rejected, s.protocol_errors, s.sessions, s.tls_sessions
    );
    let _ = writeln!(
        out,
        "  traced     missing {}  of them lost {}  duplicates {}  damaged {} (cut or altered)  given up by the client {}  reply never delivered {}  null sender {}",
        s.missing, s.lost, s.duplicates, s.damaged, s.abandoned, s.unconfirmed, s.null_sender
    );
    let _ = writeln!(
        out,
        "  rate       {:.1} msg/s   {:.0} msg/min, over the active span ({:.3} s: first client byte to last delivery)",
        s.msgs_per_sec, s.mpm, s.active_s
    );
    if let Some(h) = r.latency.get("e2e") {
        let _ = writeln!(
            out,
            "  end to end p50 {} ms  p99 {} ms  max {} ms ({} traced)",
            ms(h.p50_us),
            ms(h.p99_us),
            ms(h.max_us),
            h.count
        );
    }
    let mut injected: Vec<String> = s
        .faults
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    // A tarpit delays every reply rather than firing on some, so it has no count: named
    // when set, lest the slow replies look like the sink's own.
    if let Some(t) = r.config["tarpit_s"].as_f64().filter(|t| *t > 0.0) {
        injected.push(format!("tarpit {t} s before every reply"));
    }
    if !injected.is_empty() {
        let _ = writeln!(out, "  faults     {}", injected.join("  "));
    }
    render_tail(r, &mut out);
    out
}
