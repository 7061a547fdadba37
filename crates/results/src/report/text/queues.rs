//! The relay summary's line of a lab MTA's queues: each queue's most messages at an
//! interval's end, named as the MTA's own queue tool names them, so that a deferred queue
//! that grew or an active queue held at its limit is read without opening the series.

use std::fmt::Write as _;

use crate::stats::summary::RelaySummary;

/// `  MTA queues  most at an interval's end: incoming 0  active 100 …` (nothing when no
/// lab MTA was watched).
pub fn line(out: &mut String, s: &RelaySummary) {
    let Some(states) = &s.max_queue_states else {
        return;
    };
    let each: Vec<String> = states
        .iter()
        .map(|q| format!("{} {}", q.queue, q.messages))
        .collect();
    let _ = writeln!(
        out,
        "  MTA queues most messages at an interval's end: {}",
        each.join("  ")
    );
}
