//! What a lab MTA's recipient lookups cost during one run (`--mta-lookup ldap`), from the
//! lab directory's proxy, and which source the delivered count rests on when the MTA runs
//! without its log (`--mta-logging off`). Called by `run` before and after a run.

use crate::lab::ldap::proxy::Counts;
use crate::stats::Results;
use crate::stats::summary::Summary;

/// Puts the run's lookups (`after` − `before`) in the summary: how many reached the
/// directory, how many met it down, per message the generator sent (refused ones were
/// looked up too), and their latency as the MTA waited for them.
pub fn record(results: &mut Results, before: Option<Counts>, after: Option<Counts>) {
    let (Some(before), Some(mut after)) = (before, after) else {
        return;
    };
    let sent = results.counters.sent;
    let Summary::Relay(s) = &mut results.summary else {
        return;
    };
    let lookups = after.lookups.saturating_sub(before.lookups);
    let _ = after.latency.subtract(&before.latency);
    s.lookups = Some(lookups);
    s.lookups_failed = Some(after.failed.saturating_sub(before.failed));
    s.lookups_per_msg = (sent > 0).then(|| lookups as f64 / sent as f64);
    if !after.latency.is_empty() {
        s.lookup_p50_ms = Some(after.latency.value_at_quantile(0.5) as f64 / 1000.0);
        s.lookup_p99_ms = Some(after.latency.value_at_quantile(0.99) as f64 / 1000.0);
    }
}

/// Says where the delivered count came from: the sink, checked against the MTA's log, or
/// the sink alone when the MTA wrote none.
pub fn delivered_source(results: &mut Results, logged: bool) {
    let source = if logged {
        "sink, checked against the MTA log"
    } else {
        "sink (MTA logging off)"
    };
    results
        .extra
        .insert("delivered_source".into(), source.into());
}
