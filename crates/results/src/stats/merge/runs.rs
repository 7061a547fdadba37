//! Per-run correlation across sinks: the sequence numbers each sink saw, united, so that
//! loss and duplicates are those of one sink that received everything.

use std::collections::BTreeMap;

use crate::stats::seen::{RunReport, ranges};

/// Sequence numbers listed below `max_seq` that never arrived, at most this many.
const MISSING_LISTED: usize = 1000;

/// The runs of several sinks' `extra.runs`, united. A sequence number seen by two sinks
/// is a duplicate (a message delivered twice), counted once per extra sink; within one
/// sink, its own duplicate count stands. Exact for one recipient per message; a message
/// whose recipients were split between sinks counts as duplicated.
pub fn merge(reports: &[BTreeMap<String, RunReport>]) -> BTreeMap<String, RunReport> {
    let mut by_run: BTreeMap<&str, Vec<&RunReport>> = BTreeMap::new();
    for report in reports {
        for (id, r) in report {
            by_run.entry(id.as_str()).or_default().push(r);
        }
    }
    by_run
        .into_iter()
        .map(|(id, parts)| (id.to_string(), unite(&parts)))
        .collect()
}

fn unite(parts: &[&RunReport]) -> RunReport {
    let seen = ranges(
        parts
            .iter()
            .flat_map(|r| r.seen.iter().flat_map(|[a, b]| *a..=*b)),
    );
    let distinct: u64 = seen.iter().map(|[a, b]| b - a + 1).sum();
    let seen_each: u64 = parts.iter().map(|r| r.distinct).sum();
    let max_seq = parts.iter().map(|r| r.max_seq).max().unwrap_or(0);
    let missing_count = (max_seq + 1).saturating_sub(distinct);
    let mut missing = Vec::new();
    let mut next = 0u64;
    for [a, b] in &seen {
        missing.extend((next..*a).take(MISSING_LISTED - missing.len()));
        next = b + 1;
    }
    missing.extend((next..=max_seq).take(MISSING_LISTED - missing.len()));
    RunReport {
        distinct,
        arrivals: parts.iter().map(|r| r.arrivals).sum(),
        duplicates: parts.iter().map(|r| r.duplicates).sum::<u64>()
            + seen_each.saturating_sub(distinct),
        max_seq,
        missing,
        missing_count,
        seen,
    }
}
