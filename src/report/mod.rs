//! Turning results into things people read: the text summary (`text`), live progress
//! (`live`), CSV files (`csv`) and `--threshold` checks (`threshold`).

pub mod csv;
pub mod live;
pub mod text;
pub mod threshold;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// Where results go.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// Length of an interval line / series point.
    pub interval: Duration,
    /// Results JSON.
    pub json: Option<PathBuf>,
    /// Per-interval CSV.
    pub csv: Option<PathBuf>,
    /// Postal-style per-minute CSV.
    pub postal_csv: Option<PathBuf>,
    /// No live or interval lines.
    pub quiet: bool,
}

/// Writes to stdout. A reader that went away (`mailbench … | head`) is not an error: the
/// run's files are written either way, so what could not be printed is dropped instead
/// of panicking as `print!` would.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
