//! The flags of the commands that serve packagers and shells rather than runs: `man` and
//! `completions`, generated from these very clap definitions so they never drift from
//! `--help`.

use std::path::PathBuf;

use clap::Args;

/// Flags of `mailbench completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell whose completion script to print.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Flags of `mailbench man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command into this directory (mailbench.1, mailbench-relay.1,
    /// mailbench-lab-postfix.1, …), as a package's share/man/man1 holds them; without it,
    /// the page of `mailbench` itself goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
