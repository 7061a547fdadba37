//! A POP3 workload's summary: sessions, what they downloaded, on a store.

use std::fmt::Write as _;

use super::parts::store_report;
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

/// Renders the summary of a POP3 run; `steps` name its latency rows.
pub fn render_pop3(r: &Results, steps: Steps, headline: &str) -> String {
    store_report(r, steps, headline, |out| {
        if let Summary::Pop3(s) = &r.summary {
            pop3_lines(out, r, s);
        }
    })
}

fn pop3_lines(out: &mut String, r: &Results, s: &crate::stats::summary::Pop3Summary) {
    let _ = writeln!(
        out,
        "  sessions   {}  completed {}  refused (-ERR) {}  errors {}  aborted {}",
        s.sessions, s.completed, s.refused, s.errors, s.aborted
    );
    if s.unstarted > 0 {
        let _ = writeln!(
            out,
            "  schedule   intended {}  never started {}  (the server or -c connections could not keep up)",
            s.intended, s.unstarted
        );
    }
    let _ = writeln!(
        out,
        "  messages   retrieved {}  deleted {}  {:.2} MB downloaded",
        s.retrieved,
        s.deleted,
        s.bytes as f64 / 1e6
    );
    let _ = if s.completed + s.refused == 0 {
        writeln!(
            out,
            "  rate       0.0 sessions/s (the server answered no session)"
        )
    } else {
        writeln!(
            out,
            "  rate       {:.1} sessions/s   {:.1} messages/s retrieved, over the active span ({:.3} s: to the last completed session)",
            s.sessions_per_sec, s.retrieved_per_sec, s.active_s
        )
    };
    let c = &r.counters;
    let _ = writeln!(
        out,
        "  connections {} (TLS {}), failed to connect {}, refused at login {}, logged in {}",
        c.connections,
        c.tls_connections,
        c.connect_failures,
        c.mailbox.login_failures,
        c.mailbox.logins
    );
}
