//! The `mailbench` binary: parse the command line and hand over to `mailbench::cli`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    mailbench::cli::run(mailbench::cli::args::Cli::parse())
}
