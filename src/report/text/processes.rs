//! The system under test's CPU by process name over the whole run: which of its processes
//! was busy, as `top` would have shown it (smtpd, cleanup, qmgr, smtp; qmail-send,
//! qmail-remote; imap).

use std::fmt::Write as _;

/// How many names are listed; the rest are summed on one line.
const TOP: usize = 8;

/// The block `{what} cost by process` from `extra.sut.by_process`, when there is one:
/// each name's CPU seconds, its share of the tree's CPU and its busiest interval, the
/// names past the [`TOP`] summed, and the CPU no name was found for. Names with under
/// 5 ms of CPU are left out.
pub(super) fn by_process(out: &mut String, sut: &serde_json::Value, what: &str) {
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(0.0);
    // Names that used no CPU worth printing (Postfix's idle `pickup`) are left out.
    let rows: Vec<&serde_json::Value> = sut["by_process"]
        .as_array()
        .map(|r| r.iter().filter(|r| f(r, "cpu_s") >= 0.005).collect())
        .unwrap_or_default();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<26} {:>8} {:>7} {:>12}",
        format!("{what} cost by process"),
        "cpu s",
        "share",
        "peak % core"
    );
    for r in rows.iter().take(TOP) {
        let _ = writeln!(
            out,
            "    {:<24} {:>8.2} {:>5.1} % {:>12.0}",
            r["name"].as_str().unwrap_or("?"),
            f(r, "cpu_s"),
            f(r, "share_pct"),
            f(r, "cpu_peak_pct"),
        );
    }
    if rows.len() > TOP {
        let rest = &rows[TOP..];
        let _ = writeln!(
            out,
            "    {:<24} {:>8.2} {:>5.1} %",
            format!("({} more)", rest.len()),
            rest.iter().map(|r| f(r, "cpu_s")).sum::<f64>(),
            rest.iter().map(|r| f(r, "share_pct")).sum::<f64>(),
        );
    }
    let unnamed = sut["cpu_unnamed_s"].as_f64().unwrap_or(0.0);
    if unnamed.abs() >= 0.005 {
        let _ = writeln!(out, "    {:<24} {unnamed:>8.2}", "(unnamed)");
    }
}
