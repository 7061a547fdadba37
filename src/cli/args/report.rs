//! The flags of the commands that read finished runs (`report`, `merge`, `compare`) and of `doctor`.

use std::path::PathBuf;

use clap::Args;

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const REPORT_EXAMPLES: &str = "\
Examples:
  mailbench report relay.json -o relay.html
  mailbench report tmpfs.json disk.json --label tmpfs --label disk -o queue.html
      both runs on the same charts, one colour per run";

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const COMPARE_EXAMPLES: &str = "\
Examples:
  mailbench compare before.json after.json
  mailbench compare --baseline a1.json a2.json a3.json a4.json \\
      --candidate b1.json b2.json b3.json b4.json
  mailbench compare old.json new.json --format md --fail-if-slower 5

Verdicts: faster/slower (rates and times), better/worse (failures and resources), 'within
noise' when a Mann-Whitney U test over the rounds gives p >= 0.05, 'too few rounds' with
fewer than 4 values per side, 'single runs' with one each (the primary rate of two single
runs is tested on 10 batch means of its per-interval series instead). Exit 3 with
--fail-if-slower when a candidate's primary rate is slower by more than the given %.";

/// Flags of `mailbench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results files (`--json` of any command).
    #[arg(required = true, value_name = "RUN.json")]
    pub files: Vec<PathBuf>,
    /// Write the page here.
    #[arg(short, long, default_value = "report.html", value_name = "FILE")]
    pub output: PathBuf,
    /// Name of each run on the charts, in the order of the files (default: file names).
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
}

/// Flags of `mailbench merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The agents' results files (merged files merge again).
    #[arg(value_name = "RUN.json", required = true)]
    pub files: Vec<PathBuf>,
    /// Write the merged results here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Merge files of different run ids or configurations, the same shard twice, a split
    /// run with shards missing (the output then says partial: extra.merge.partial) or
    /// agents with different --start-at (recorded in the output's extra.merge.forced).
    #[arg(long)]
    pub force: bool,
    /// Write the HTML report of the merged run here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// Flags of `mailbench doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Connections the planned run holds open at once.
    #[arg(short = 'c', long, default_value = "64", value_name = "N")]
    pub connections: u64,
    /// New connections per second the planned run opens (e.g. its --rate without
    /// connection reuse).
    #[arg(long, value_name = "RATE")]
    pub new_per_sec: Option<String>,
    /// The planned run is a relay: this process holds both ends of each connection.
    #[arg(long)]
    pub relay: bool,
    /// The planned run's target is not on loopback.
    #[arg(long)]
    pub remote: bool,
    /// Sample CPU steal over this long.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub steal_over: String,
}

/// Flags of `mailbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Results files, each its own side; the first is the baseline.
    #[arg(value_name = "RUN.json", conflicts_with_all = ["baseline", "candidate"])]
    pub files: Vec<PathBuf>,
    /// The baseline's runs (one value per file or per round).
    #[arg(long, num_args = 1.., value_name = "RUN.json", requires = "candidate")]
    pub baseline: Vec<PathBuf>,
    /// The candidate's runs.
    #[arg(long, num_args = 1.., value_name = "RUN.json", requires = "baseline")]
    pub candidate: Vec<PathBuf>,
    /// Name of each side, in order (default: file names, or baseline and candidate).
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::compare::render::Format,
    /// Also write the comparison to this file (in --format).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 3 when a candidate's primary rate is slower than the baseline's by more than
    /// this many percent (and not within the noise).
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,
    /// Compare even when the workloads differ (the differing keys are printed).
    #[arg(long)]
    pub force: bool,
}
