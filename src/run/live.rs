//! Progress while a run goes: a live line on a terminal (indicatif), or one plain line per
//! interval otherwise. It only reads series points; it never touches workers.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::stats::{Counters, IntervalPoint};

/// Writes one line to stderr. A closed stderr (a reader that went away) must never stop a
/// run, so errors are ignored instead of panicking as `eprintln!` would.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// More for the live line, computed from the totals so far; a relay run adds what has
/// arrived at its sink and the backlog to the generator's line.
#[derive(Clone)]
pub struct LiveExtra(pub std::sync::Arc<dyn Fn(&Counters) -> String + Send + Sync>);

impl LiveExtra {
    /// The text to append (starting with spaces).
    pub fn line(&self, total: &Counters) -> String {
        (self.0)(total)
    }
}

impl std::fmt::Debug for LiveExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveExtra")
    }
}

/// What a generator's units of work are called on its live line.
#[derive(Debug, Clone, Copy)]
pub struct Units {
    /// The rate's unit.
    pub rate: &'static str,
    /// Units started.
    pub started: &'static str,
    /// Units that succeeded.
    pub done: &'static str,
    /// Units the server refused.
    pub refused: &'static str,
}

/// Messages (send, relay, populate).
pub const MESSAGES: Units = Units {
    rate: "msg/s",
    started: "sent",
    done: "accepted",
    refused: "rejected",
};

/// Sessions (mailbox workloads).
pub const SESSIONS: Units = Units {
    rate: "sessions/s",
    started: "started",
    done: "completed",
    refused: "refused",
};

/// Commands (IMAP).
pub const COMMANDS: Units = Units {
    rate: "cmd/s",
    started: "started",
    done: "completed",
    refused: "refused",
};

/// Where progress goes.
pub enum Live {
    /// Nothing (`--quiet`).
    Off,
    /// A redrawn status line on a terminal.
    Bar(ProgressBar),
    /// One line per interval on stderr.
    Lines,
}

impl Live {
    /// Picks the form for stderr.
    pub fn new(quiet: bool) -> Live {
        if quiet {
            Live::Off
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            Live::Bar(bar)
        } else {
            Live::Lines
        }
    }

    /// Shows one closed interval and the totals so far, counted in `u`.
    pub fn update(&self, p: &IntervalPoint, total: &Counters, u: Units, extra: &str) {
        let line = format!(
            "{:>7.1}s {:>9.1} {}  {} {} {} {} {} {} errors {}  p50 {:.2} ms p99 {:.2} ms  cpu {:.0}%{extra}",
            p.t_s,
            p.msgs_per_sec,
            u.rate,
            u.started,
            total.sent,
            u.done,
            total.accepted,
            u.refused,
            total.rejected,
            total.errors,
            p.p50_ms,
            p.p99_ms,
            p.cpu_pct
        );
        self.show(line);
    }

    /// Shows one closed interval of a sink.
    pub fn update_sink(&self, p: &IntervalPoint, total: &Counters, extra: &str) {
        let line = format!(
            "{:>7.1}s {:>9.1} msg/s  messages {} recipients {} rejected {}  sessions {}  cpu {:.0}%{extra}",
            p.t_s,
            p.msgs_per_sec,
            total.accepted,
            total.rcpts.delivered,
            total.rejected,
            total.connections,
            p.cpu_pct
        );
        self.show(line);
    }

    /// Shows a line of the caller's own (e.g. a relay's drain progress).
    pub fn line(&self, text: &str) {
        self.show(text.to_string());
    }

    fn show(&self, line: String) {
        match self {
            Live::Off => {}
            Live::Bar(b) => {
                b.set_message(line);
                b.tick();
            }
            Live::Lines => say(&line),
        }
    }

    /// Removes the live line before the summary is printed.
    pub fn finish(&self) {
        if let Live::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}
