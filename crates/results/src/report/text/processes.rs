//! The system under test's CPU by process name over the whole run: which of its processes
//! was busy, as `top` would have shown it (smtpd, cleanup, qmgr, smtp; qmail-send,
//! qmail-remote; imap).

use std::fmt::Write as _;

/// How many names are listed; the rest are summed on one line.
const TOP: usize = 8;

/// The block `{what} cost by process` from `extra.sut.by_process`, when there is one:
/// each name's CPU seconds, its share of the tree's CPU, its busiest interval and its
/// voluntary and involuntary context switches ('-' in a file without them), the names
/// past the [`TOP`] summed, and the CPU no name was found for. Names with under 5 ms of
/// CPU are left out.
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
        "  {:<26} {:>8} {:>7} {:>12} {:>11} {:>11}",
        format!("{what} cost by process"),
        "cpu s",
        "share",
        "peak % core",
        "vol ctxsw",
        "invol ctxsw"
    );
    let switches =
        |r: &serde_json::Value, k: &str| r[k].as_u64().map_or("-".to_string(), |n| n.to_string());
    for r in rows.iter().take(TOP) {
        // No peak where the run's intervals were not read by name (a profile's).
        let peak = r["cpu_peak_pct"]
            .as_f64()
            .map_or("-".to_string(), |p| format!("{p:.0}"));
        let _ = writeln!(
            out,
            "    {:<24} {:>8.2} {:>5.1} % {peak:>12} {:>11} {:>11}",
            r["name"].as_str().unwrap_or("?"),
            f(r, "cpu_s"),
            f(r, "share_pct"),
            switches(r, "vol_ctxt_switches"),
            switches(r, "invol_ctxt_switches"),
        );
    }
    if rows.len() > TOP {
        let rest = &rows[TOP..];
        let sum = |k: &str| {
            rest.iter()
                .map(|r| r[k].as_u64())
                .sum::<Option<u64>>()
                .map_or("-".to_string(), |n| n.to_string())
        };
        let _ = writeln!(
            out,
            "    {:<24} {:>8.2} {:>5.1} % {:>12} {:>11} {:>11}",
            format!("({} more)", rest.len()),
            rest.iter().map(|r| f(r, "cpu_s")).sum::<f64>(),
            rest.iter().map(|r| f(r, "share_pct")).sum::<f64>(),
            "",
            sum("vol_ctxt_switches"),
            sum("invol_ctxt_switches"),
        );
    }
    let unnamed = sut["cpu_unnamed_s"].as_f64().unwrap_or(0.0);
    if unnamed.abs() >= 0.005 {
        let _ = writeln!(out, "    {:<24} {unnamed:>8.2}", "(unnamed)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_lists_the_busiest_names_sums_the_rest_and_shows_what_no_name_took() {
        let row = |name: &str, cpu_s: f64, share_pct: f64, peak: f64| serde_json::json!({"name": name, "cpu_s": cpu_s, "share_pct": share_pct, "cpu_peak_pct": peak, "vol_ctxt_switches": (cpu_s * 1000.0).round() as u64, "invol_ctxt_switches": (cpu_s * 100.0).round() as u64});
        let mut rows = vec![
            row("smtp", 2.45, 39.1, 87.4),
            row("cleanup", 1.16, 18.5, 53.0),
        ];
        for i in 0..8 {
            rows.push(row(&format!("p{i}"), 0.1, 1.0, 2.0));
        }
        // Postfix's idle pickup: under 5 ms, left out (not even among the rest).
        rows.push(row("pickup", 0.004, 0.1, 0.4));
        let sut = serde_json::json!({"by_process": rows, "cpu_unnamed_s": 0.02});
        let mut out = String::new();
        by_process(&mut out, &sut, "MTA");
        let want =
            "  MTA cost by process           cpu s   share  peak % core   vol ctxsw invol ctxsw
    smtp                         2.45  39.1 %           87        2450         245
    cleanup                      1.16  18.5 %           53        1160         116
    p0                           0.10   1.0 %            2         100          10
    p1                           0.10   1.0 %            2         100          10
    p2                           0.10   1.0 %            2         100          10
    p3                           0.10   1.0 %            2         100          10
    p4                           0.10   1.0 %            2         100          10
    p5                           0.10   1.0 %            2         100          10
    (2 more)                     0.20   2.0 %                      200          20
    (unnamed)                    0.02
";
        assert_eq!(out, want, "got:\n{out}");
        let mut none = String::new();
        by_process(&mut none, &serde_json::json!({}), "MTA");
        assert_eq!(none, "", "no block for a file without the names");
        // A profile's intervals are not read by name: no peak, not a peak of 0.
        let sut = serde_json::json!({"by_process": [{"name": "imap", "cpu_s": 0.14, "share_pct": 40.0, "cpu_peak_pct": null}]});
        let mut out = String::new();
        by_process(&mut out, &sut, "store");
        assert!(
            out.ends_with("    imap                         0.14  40.0 %            -           -           -\n"),
            "got:\n{out}"
        );
    }
}
