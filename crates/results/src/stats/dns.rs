//! `dns`'s summary: questions as the units of work, what the answers were, and how long
//! the server took (from the packet's arrival to its reply, injected delays included).

use serde::{Deserialize, Serialize};

use super::hist::ms;
use super::metric::{Metric, Steps};
use super::recorder::Recorder;

/// A DNS run's steps: the question classes, whose latencies are kept apart.
pub const STEPS: Steps = Steps(&["a", "aaaa", "mx", "txt", "ptr", "other"]);

/// The headline numbers of a `mailbench dns` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DnsSummary {
    /// Questions received (answered or dropped).
    pub questions: u64,
    /// Replies sent.
    pub answered: u64,
    /// Questions a rule dropped (no reply: the resolver times out).
    pub dropped: u64,
    /// Packets that were no query.
    pub ignored: u64,
    /// Replies with NOERROR.
    pub noerror: u64,
    /// Replies with NXDOMAIN.
    pub nxdomain: u64,
    /// Replies with SERVFAIL.
    pub servfail: u64,
    /// Replies with REFUSED (questions outside the zones, or a rule).
    pub refused: u64,
    /// Replies with FORMERR (unreadable queries).
    pub formerr: u64,
    /// UDP replies cut with the TC bit.
    pub truncated: u64,
    /// Questions over TCP.
    pub tcp: u64,
    /// Questions per second over the run.
    pub queries_per_sec: f64,
    /// Median time from a query's arrival to its reply, ms.
    pub p50_ms: f64,
    /// 99th percentile of the same, ms.
    pub p99_ms: f64,
    /// Zones served.
    pub zones: u64,
    /// Length of the run, seconds.
    pub duration_s: f64,
}

impl DnsSummary {
    /// The summary from the counts (`tally`, as `dns::tally` reports them) and the
    /// latencies recorded.
    pub fn new(tally: &serde_json::Value, total: &Recorder, zones: u64, duration_s: f64) -> Self {
        let n = |k: &str| tally[k].as_u64().unwrap_or(0);
        let code = |k: &str| tally["by_rcode"][k].as_u64().unwrap_or(0);
        let h = total.hist(Metric::Total);
        DnsSummary {
            questions: n("questions"),
            answered: n("questions") - n("dropped"),
            dropped: n("dropped"),
            ignored: n("ignored"),
            noerror: code("noerror"),
            nxdomain: code("nxdomain"),
            servfail: code("servfail"),
            refused: code("refused"),
            formerr: code("formerr"),
            truncated: n("truncated"),
            tcp: n("tcp"),
            queries_per_sec: n("questions") as f64 / duration_s.max(1e-9),
            p50_ms: ms(h, 0.5),
            p99_ms: ms(h, 0.99),
            zones,
            duration_s,
        }
    }
}
