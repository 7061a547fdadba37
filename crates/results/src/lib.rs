//! mailbench's results: what a run measured and how it is told — the statistics layer
//! (`stats`: metrics a protocol names the steps of, recorders, sharded collection, the
//! series, typed summaries and the results file, the system under test and its machine
//! read from /proc, the merge of a split run's results), the failure classes both share
//! (`error`), and the output stage (`report`: text summary, CSV, thresholds, the HTML
//! report, the comparison of runs with its noise test), which reads results only.
//! Nothing here knows a protocol's wire or starts a server: `report`, `compare` and
//! `merge` work on files from any machine.

pub mod error;
pub mod report;
pub mod stats;
