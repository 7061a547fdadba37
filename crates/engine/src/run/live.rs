//! Progress while a run goes: a live panel on a terminal, or one plain line per interval
//! otherwise. It only reads series points; it never touches workers, so it costs the hot
//! path nothing.

use std::io::IsTerminal;

use crate::stats::{Counters, IntervalPoint};

/// Writes one line to stderr. A closed stderr (a reader that went away) must never stop a
/// run, so errors are ignored instead of panicking as `eprintln!` would.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// More for the live line and `/metrics`, computed from the totals so far: a relay run
/// adds what has arrived at its sink and the backlog to the generator's figures.
#[derive(Clone)]
pub struct LiveExtra(pub std::sync::Arc<ExtraFigures>);

/// What a [`LiveExtra`] computes from the totals: the text for the live line, the gauges
/// for `/metrics`.
pub type ExtraFigures = dyn Fn(&Counters) -> (String, Vec<super::exporter::Gauge>) + Send + Sync;

impl LiveExtra {
    /// The text to append to the live line (starting with spaces), and the gauges.
    pub fn figures(&self, total: &Counters) -> (String, Vec<super::exporter::Gauge>) {
        (self.0)(total)
    }
}

impl std::fmt::Debug for LiveExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveExtra")
    }
}

/// What a generator's units of work are called on its live line: its kind of run's words,
/// which `/metrics` reads too.
pub use crate::stats::kind::Units;

/// Messages (send, relay, populate).
pub const MESSAGES: Units = crate::stats::kind::units::MESSAGES;

/// Where progress goes.
pub enum Live {
    /// Nothing (`--quiet`).
    Off,
    /// A panel on a terminal, redrawn each interval.
    Screen(Screen),
    /// One line per interval on stderr.
    Lines,
}

impl Live {
    /// Picks the form for stderr.
    pub fn new(quiet: bool) -> Live {
        if quiet {
            Live::Off
        } else if std::io::stderr().is_terminal() {
            Live::Screen(Screen::enter())
        } else {
            Live::Lines
        }
    }

    /// Shows one closed interval and the totals so far, counted in `u`.
    pub fn update(&self, p: &IntervalPoint, total: &Counters, u: Units, extra: &str) {
        let figures = [
            ("rate", format!("{:>9.1} {}", p.msgs_per_sec, u.rate)),
            (
                "counts",
                format!(
                    "{} {} {} {} {} {} errors {}",
                    u.started,
                    total.sent,
                    u.done,
                    total.accepted,
                    u.refused,
                    total.rejected,
                    total.errors
                ),
            ),
            (
                "latency",
                format!("p50 {:.2} ms p99 {:.2} ms", p.p50_ms, p.p99_ms),
            ),
            ("tool", format!("cpu {:.0}%{extra}", p.cpu_pct)),
        ];
        self.show(p.t_s, &figures);
    }

    /// Shows one closed interval of a sink, counted in `u`.
    pub fn update_sink(&self, p: &IntervalPoint, total: &Counters, u: Units, extra: &str) {
        let figures = [
            ("rate", format!("{:>9.1} {}", p.msgs_per_sec, u.rate)),
            (
                "counts",
                format!(
                    "{} {} recipients {} {} {}",
                    u.noun, total.accepted, total.rcpts.delivered, u.refused, total.rejected
                ),
            ),
            ("sessions", format!("sessions {}", total.connections)),
            ("tool", format!("cpu {:.0}%{extra}", p.cpu_pct)),
        ];
        self.show(p.t_s, &figures);
    }

    /// A DNS server's interval: questions per second, totals (counted in `u`), the tool's
    /// CPU.
    pub fn update_dns(&self, p: &IntervalPoint, total: &Counters, u: Units) {
        let figures = [
            ("rate", format!("{:>9.1} {}", p.msgs_per_sec, u.rate)),
            (
                "counts",
                format!(
                    "{} {} {} {} {} {} ignored {}",
                    u.started,
                    total.sent,
                    u.done,
                    total.accepted,
                    u.refused,
                    total.aborted,
                    total.errors
                ),
            ),
            ("tool", format!("cpu {:.0}%", p.cpu_pct)),
        ];
        self.show(p.t_s, &figures);
    }

    /// Shows a line of the caller's own (e.g. a relay's drain progress).
    pub fn line(&self, text: &str) {
        match self {
            Live::Off => {}
            Live::Screen(s) => s.draw(&[text.trim_start()]),
            Live::Lines => say(text),
        }
    }

    /// An interval's figures: one line in Lines form, one labelled row each on screen.
    fn show(&self, t_s: f64, figures: &[(&str, String)]) {
        let shard = super::exporter::shard().map_or(String::new(), |s| format!(" [shard {s}]"));
        match self {
            Live::Off => {}
            Live::Screen(s) => {
                let rows: Vec<String> = std::iter::once(format!("mailbench   {t_s:.1} s{shard}"))
                    .chain(
                        figures
                            .iter()
                            .map(|(label, f)| format!("{label:<10}  {}", f.trim())),
                    )
                    .collect();
                s.draw(&rows.iter().map(String::as_str).collect::<Vec<_>>());
            }
            Live::Lines => {
                let line: Vec<&str> = figures.iter().map(|(_, f)| f.as_str()).collect();
                say(&format!("{t_s:>7.1}s{shard} {}", line.join("  ")));
            }
        }
    }

    /// Leaves the panel before the summary is printed.
    pub fn finish(&self) {
        if let Live::Screen(s) = self {
            s.leave();
        }
    }
}

/// The live panel: drawn on the terminal's alternate screen, each row cut to the window's
/// width and the whole panel redrawn from the top every interval, so a resize never leaves
/// pieces of old lines; leaving it (at the end, or when dropped on any other way out)
/// restores the screen as it was, and the summary is printed on it intact.
pub struct Screen {
    left: std::sync::atomic::AtomicBool,
}

impl Screen {
    fn enter() -> Screen {
        write_err("\x1b[?1049h\x1b[?25l");
        Screen {
            left: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn draw(&self, rows: &[&str]) {
        if self.left.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let width = terminal_size::terminal_size_of(std::io::stderr())
            .map_or(80, |(w, _)| usize::from(w.0));
        let mut out = String::from("\x1b[H");
        for row in rows {
            out.push_str("\x1b[2K");
            out.extend(row.chars().take(width.saturating_sub(1)));
            out.push_str("\r\n");
        }
        out.push_str("\x1b[J");
        write_err(&out);
    }

    fn leave(&self) {
        if !self.left.swap(true, std::sync::atomic::Ordering::Relaxed) {
            write_err("\x1b[?25h\x1b[?1049l");
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Writes to stderr, ignoring a closed stderr (as `say` does).
fn write_err(s: &str) {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(s.as_bytes()).and_then(|()| e.flush());
}
