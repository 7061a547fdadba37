//! `mailbench report`: one self-contained HTML page from one or more results files. It
//! opens offline from a file: uPlot (MIT, vendored from npm's `uplot` 1.6.32 with its
//! licence in `vendor/`), the page's own small script, its style and the data are all
//! inlined, and a Content-Security-Policy forbids any network load. Tables are static
//! HTML (`tables`), under the answer of each run at the top (`headline`, the figures its
//! kind names; with several runs, the best per figure first: `winners`); charts are data
//! made here (`charts`; seed 001's against users, `users`; a lab MTA's queues, `queues`)
//! that the script only draws; values are written one way everywhere (`format`). Built on
//! the results file alone, so every command's results get a report.

pub mod charts;
pub mod format;
pub mod headline;
pub mod queues;
pub mod tables;
pub mod users;
pub mod winners;

use std::fmt::Write as _;

use crate::stats::results::Results;
use crate::stats::summary::Summary;

/// uPlot's minified script, vendored unchanged (checksum pinned by a test).
const UPLOT_JS: &str = include_str!("vendor/uPlot.iife.min.js");
/// uPlot's stylesheet, vendored unchanged.
const UPLOT_CSS: &str = include_str!("vendor/uPlot.min.css");
/// The page's own script: builds the charts and marks the page when done.
const PAGE_JS: &str = include_str!("page.js");
/// The page's own style, light and dark, screen and print.
const PAGE_CSS: &str = include_str!("page.css");

/// The report of `runs` (a label and a results document each) as one HTML page.
pub fn render(runs: &[(String, &Results)]) -> String {
    let mut charts = charts::all(runs);
    charts.extend(users::charts(runs));
    charts.extend(queues::chart(runs));
    // Inside <script type="application/json"> only "</" could end the block early.
    let data = serde_json::to_string(&charts)
        .unwrap_or_else(|_| "[]".into())
        .replace("</", "<\\/");
    let title = title(runs);
    let subtitle = runs
        .iter()
        .map(|(label, r)| subtitle(label, r))
        .collect::<Vec<_>>()
        .join(" · ");
    let mut page = String::with_capacity(UPLOT_JS.len() + data.len() + 64 * 1024);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    page.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    page.push_str(&format!("<title>{}</title>\n", format::escape(&title)));
    page.push_str("<style>");
    page.push_str(UPLOT_CSS);
    page.push_str(PAGE_CSS);
    page.push_str("</style></head>\n<body data-report-status=\"loading\">\n");
    page.push_str(&format!(
        "<h1>{}</h1><p class=\"muted\">{}</p>\n",
        format::escape(&title),
        format::escape(&subtitle)
    ));
    page.push_str(&winners::section(runs));
    page.push_str(&headline::section(runs));
    page.push_str("<div class=\"head\">");
    page.push_str(&tables::head(runs));
    page.push_str("</div>");
    page.push_str("<h2>Charts</h2><section id=\"charts\"></section>\n");
    page.push_str(&tables::details(runs));
    page.push_str("<script type=\"application/json\" id=\"report-data\">");
    page.push_str(&data);
    page.push_str("</script>\n<script>");
    page.push_str(UPLOT_JS);
    page.push_str("</script>\n<script>");
    page.push_str(PAGE_JS);
    page.push_str("</script>\n</body></html>\n");
    page
}

/// The page's title: the command, the MTA a relay went through or the lab store a mailbox
/// workload ran on, and the run's label when
/// it says more than the command does.
fn title(runs: &[(String, &Results)]) -> String {
    let [(label, r)] = runs else {
        // Runs of one command (an MTA comparison, a setting's two values): what was
        // compared, by name.
        let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
        return match runs.first() {
            Some((_, first)) if runs.iter().all(|(_, r)| r.command == first.command) => {
                format!("mailbench {}: {}", first.command, labels.join(" against "))
            }
            _ => format!("mailbench · {} runs", runs.len()),
        };
    };
    let mut t = format!("mailbench {}", r.command);
    if let Some(mta) = r.config.pointer("/relay/lab").and_then(|v| v.as_str()) {
        let _ = write!(t, " through {mta}");
    }
    if let Some(store) = r.config.get("lab").and_then(|v| v.as_str()) {
        let _ = write!(t, " on {store}");
    }
    if *label != r.command {
        let _ = write!(t, " · {label}");
    }
    t
}

/// When a run started and how long it took; a relay's injection and its drain each with
/// their own length, since the drain goes on after the last message is sent.
fn subtitle(label: &str, r: &Results) -> String {
    let took = match &r.summary {
        Summary::Relay(s) => match s.drain_s {
            Some(d) => format!(
                "injected for {:.1} s, last delivery {d:.2} s after the {}",
                r.duration_s,
                if s.release_at_s.is_some() {
                    "release"
                } else {
                    "first injection"
                }
            ),
            None => format!("injected for {:.1} s, no message arrived", r.duration_s),
        },
        _ => format!("for {:.1} s", r.duration_s),
    };
    format!(
        "{label}: {} started {} {took}{}",
        r.command,
        r.started_at,
        if r.interrupted { " (interrupted)" } else { "" }
    )
}

/// Writes the report of `runs` to `path`.
pub fn write(runs: &[(String, &Results)], path: &std::path::Path) -> Result<(), String> {
    std::fs::write(path, render(runs))
        .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_uplot_is_the_published_one() {
        // sha256 of npm's uplot-1.6.32 dist files; a changed file must be re-vendored on
        // purpose, with its checksum, not edited.
        let sha = |s: &str| {
            ring::digest::digest(&ring::digest::SHA256, s.as_bytes())
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(
            sha(UPLOT_JS),
            "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f"
        );
        assert_eq!(
            sha(UPLOT_CSS),
            "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04"
        );
        assert!(
            !UPLOT_JS.contains("</script"),
            "the inlined script must not end its block"
        );
    }
}
