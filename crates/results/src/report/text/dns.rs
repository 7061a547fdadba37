//! The test DNS server's summary: questions, replies by code, latency by question type.

use std::fmt::Write as _;

use super::parts::*;
use crate::stats::Results;
use crate::stats::kind;
use crate::stats::summary::Summary;

/// `mailbench dns`'s report: questions, answers by code, latency by question type.
pub fn render_dns(r: &Results, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Dns(s) = &r.summary else {
        return out;
    };
    let _ = writeln!(
        out,
        "  questions  {}  answered {}  dropped {}  tcp {}  truncated {}  not queries {}   {:.1} per second",
        s.questions, s.answered, s.dropped, s.tcp, s.truncated, s.ignored, s.queries_per_sec
    );
    // The codes the summary has no key for (notimp, badvers, …), from the server's tally,
    // so that the line adds up to the answers.
    let others: String = r
        .extra
        .get("dns")
        .and_then(|d| d["by_rcode"].as_object())
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !["noerror", "nxdomain", "servfail", "refused", "formerr"].contains(&k.as_str())
        })
        .map(|(k, v)| format!("  {k} {}", v.as_u64().unwrap_or(0)))
        .collect();
    let _ = writeln!(
        out,
        "  replies    noerror {}  nxdomain {}  servfail {}  refused {}  formerr {}{others}   ({} zone{})",
        s.noerror,
        s.nxdomain,
        s.servfail,
        s.refused,
        s.formerr,
        s.zones,
        if s.zones == 1 { "" } else { "s" }
    );
    let _ = writeln!(out);
    latency_table(&mut out, r, kind::dns::DNS.steps);
    let _ = writeln!(out);
    render_tail(r, &mut out);
    out
}
