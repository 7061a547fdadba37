//! The output stage: turning results into things people read — the text summary
//! (`text`), CSV files (`csv`), the HTML report (`html`), the comparison of several runs
//! (`compare`), several rounds kept as one (`rounds`), a profile's capacity judged on its steps (`capacity`) — and checking `--threshold`s (`threshold`). It reads results documents
//! only; progress while a run goes is `run::live`.

pub mod capacity;
pub mod compare;
pub mod csv;
pub mod html;
pub mod rounds;
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
    /// HTML report.
    pub report: Option<PathBuf>,
}

/// Reads results files for `report` and `compare`, each with its label: the one given
/// in the same position of `labels`, else the file's name without `.json` (numbered when
/// two files share one).
pub fn load(
    files: &[PathBuf],
    labels: &[String],
) -> Result<Vec<(String, crate::stats::results::Results)>, String> {
    if !labels.is_empty() && labels.len() != files.len() {
        return Err(format!(
            "--label given {} times for {} files; give one per file, in the same order, or none",
            labels.len(),
            files.len()
        ));
    }
    let mut out: Vec<(String, crate::stats::results::Results)> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let r = crate::stats::results::Results::read(f)?;
        // A comparison of several servers in one file: one run per server.
        let sides = r
            .sides()
            .map_err(|e| format!("results file {}: {e}", f.display()))?;
        if !sides.is_empty() {
            out.extend(sides);
            continue;
        }
        let mut label = labels.get(i).cloned().unwrap_or_else(|| {
            f.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("run {}", i + 1))
        });
        if out.iter().any(|(l, _)| *l == label) {
            label = format!("{label} ({})", i + 1);
        }
        out.push((label, r));
    }
    Ok(out)
}

/// Writes to stdout. A reader that went away (`mailbench … | head`) is not an error: the
/// run's files are written either way, so what could not be printed is dropped instead
/// of panicking as `print!` would.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
