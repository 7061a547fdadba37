//! The output stage: turning a finished run's results into things people read — the text
//! summary (`text`), CSV files (`csv`) — and checking `--threshold`s (`threshold`). It reads
//! the results document only; progress while a run goes is `run::live`.

pub mod csv;
pub mod text;
pub mod threshold;

use std::io::Write as _;
use std::path::PathBuf;

/// The files a finished run's results are written to.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// Results JSON.
    pub json: Option<PathBuf>,
    /// Per-interval CSV.
    pub csv: Option<PathBuf>,
    /// Postal-style per-minute CSV.
    pub postal_csv: Option<PathBuf>,
}

/// Writes to stdout. A reader that went away (`mailbench … | head`) is not an error: the
/// run's files are written either way, so what could not be printed is dropped instead
/// of panicking as `print!` would.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
