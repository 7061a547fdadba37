//! A generator's summary (`send`, `populate`, and the injection detail of a relay).

use std::fmt::Write as _;

use super::parts::*;
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

/// Renders the summary of a generator's results; `steps` name its latency rows.
pub fn render(r: &Results, steps: Steps, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  messages   sent {}  accepted {}  rejected {}  errors {}  aborted {}",
        c.sent, c.accepted, c.rejected, c.errors, c.aborted
    );
    let unstarted = num(r, "unstarted");
    if unstarted > 0.0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the target or -c connections could not keep up)",
            num(r, "intended"),
            unstarted
        );
    }
    let _ = writeln!(
        out,
        "  recipients accepted {}  refused {}",
        c.rcpts.accepted, c.rcpts.refused
    );
    // Every rate of the line over one span, named (results before it had no span: then
    // the bytes are put over the same span as the messages, the active one if known).
    let span_s = r
        .summary
        .number("rate_span_s")
        .filter(|s| *s > 0.0)
        .or_else(|| r.summary.number("active_s"))
        .unwrap_or(r.duration_s)
        .max(1e-9);
    let span_name = match r.summary {
        Summary::Relay(_) => "the injection",
        _ => "the active span",
    };
    let _ = writeln!(
        out,
        "  rate       {:.1} msg/s   {:.0} msg/min   {:.2} MB accepted ({:.2} MB/s), over {span_name} ({:.3} s)",
        num(r, "msgs_per_sec"),
        num(r, "mpm"),
        c.bytes as f64 / 1e6,
        c.bytes as f64 / 1e6 / span_s,
        span_s
    );
    let _ = writeln!(
        out,
        "  connections {} (TLS {}), failed to connect {}",
        c.connections, c.tls_connections, c.connect_failures
    );
    let _ = writeln!(out);
    latency_table(&mut out, r, steps);
    let _ = writeln!(out);
    error_table(&mut out, r);
    render_tail(r, &mut out);
    out
}
