//! The output flags every command shares, validated: where the results go and what they
//! must satisfy (for the output stage), and how the run shows itself (for the engine).

use super::args::OutputArgs;
use crate::report::Outputs;
use crate::report::threshold::Threshold;
use crate::run::Progress;
use crate::stats::summary::Vocabulary;

/// What the output stage does with a finished run's results.
#[derive(Debug, Clone, Default)]
pub struct OutputPlan {
    /// The files to write.
    pub files: Outputs,
    /// The thresholds to check.
    pub thresholds: Vec<Threshold>,
}

/// The output plan and the run's progress from their flags; `vocabulary` is what the
/// command's thresholds may name.
pub fn plan(
    o: &OutputArgs,
    postal_csv: Option<std::path::PathBuf>,
    vocabulary: &Vocabulary,
) -> Result<(OutputPlan, Progress), String> {
    let interval = crate::units::duration(&o.interval)?;
    if interval < std::time::Duration::from_millis(100) {
        return Err("--interval must be at least 100ms".into());
    }
    let thresholds = o
        .threshold
        .iter()
        .map(|t| Threshold::parse(t, vocabulary))
        .collect::<Result<Vec<_>, _>>()?;
    let files = Outputs {
        json: o.json.clone(),
        csv: o.csv.clone(),
        postal_csv,
        report: o.report.clone(),
    };
    Ok((
        OutputPlan { files, thresholds },
        Progress {
            interval,
            quiet: o.quiet,
        },
    ))
}
