//! Where results go and what they must satisfy: every command's output flags.

use std::path::PathBuf;

use clap::Args;

/// Where results go and what they must satisfy; the same for every command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Seconds per interval line and series point.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub interval: String,
    /// Write the results (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the per-interval series as CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No live or interval lines (the summary is still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Fail with exit code 3 unless this holds, e.g. 'p99(total)<500ms', 'errors<1%' (a
    /// key the command does not report is refused, with the list of valid ones).
    #[arg(long, value_name = "EXPR")]
    pub threshold: Vec<String>,
    /// Write the HTML report (as `mailbench report`) here at the end of the run.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Serve the run's figures at http://ADDR/metrics for Prometheus while it goes,
    /// updated every --interval.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,
    /// Keep serving /metrics (with the results file's final figures) this long after the
    /// run, so that a scraper sees the end; Ctrl-C ends the wait.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0s",
        requires = "prometheus"
    )]
    pub prometheus_hold: String,
}
