//! The thin command line, in one direction: `args` (the clap structs, by command and
//! flag group) ← `plan` (one planner per flag group, flags → validated plans) ← the
//! commands (`send`, `sink`, `relay`, `lab`, `mailbox`, `dns`, `doctor`, `report`), which
//! compose plans and call the engine. `finish` checks thresholds, writes outputs and
//! chooses the exit code (`exit`); `report` also reads finished runs back for `mailbench
//! report`, `compare` and `merge`; `vary` runs a relay lab under two settings or several
//! MTAs in alternating rounds; `install` prints the man pages and shell completions;
//! `misplaced` refuses a flag given to a command it does not belong to; `refusal` turns
//! any other command line clap refuses into one line.

pub mod args;
pub mod dns;
pub mod doctor;
pub mod exit;
pub mod finish;
pub mod install;
pub mod lab;
pub mod mailbox;
mod misplaced;
pub mod plan;
mod refusal;
pub mod relay;
pub mod report;
pub mod send;
pub mod sink;
pub mod vary;

use std::process::ExitCode;

use args::{Cli, Command};

pub use exit::{EXIT_FAILED, EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE};

/// The commands that run connections: they take `--threads` after their name too
/// (`mailbench send --threads 2 …`), as well as before it (`mailbench --threads 2 send …`).
const RUNS_CONNECTIONS: [&str; 6] = ["send", "relay", "sink", "dns", "lab", "mailbox"];

/// The commands that run none: `--threads` is not offered there, and refused in one line.
const NO_CONNECTIONS: [&str; 6] = ["report", "compare", "merge", "doctor", "completions", "man"];

/// The whole command line: the derived one, with `--threads` added to the commands that
/// run connections (the top-level flag is not global, so that report, compare, merge and
/// doctor do not list a flag that means nothing to them).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let threads = || {
        clap::Arg::new("threads")
            .long("threads")
            .value_name("N")
            .help(args::THREADS_HELP)
            .default_value("1")
            .value_parser(clap::value_parser!(u16).range(1..=1024))
    };
    let mut c = Cli::command();
    for name in RUNS_CONNECTIONS {
        c = c.mut_subcommand(name, |s| s.arg(threads().global(true)));
    }
    // Taken only to be refused with one clear line (not clap's usage block).
    for name in NO_CONNECTIONS {
        c = c.mut_subcommand(name, |s| s.arg(threads().hide(true)));
    }
    misplaced::take(c)
}

/// Parses the process's arguments with `command`; `--threads` after the command name
/// lands in `Cli::threads` like the top-level one (given in both places, the later wins).
/// A command line that cannot run is answered here: help and version as clap prints them
/// (exit 0), a mistake in one line on stderr (exit 1); the error is the exit code.
pub fn parse() -> Result<Cli, ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    parse_from(&args).map_err(|e| {
        let refused = |line: &str| {
            crate::run::live::say(line);
            ExitCode::from(EXIT_USAGE)
        };
        match e {
            Refused::Clap(e) => match refusal::line(&e, &command(), &args) {
                Some(line) => refused(&line),
                None => {
                    let _ = e.print();
                    // A bare `mailbench` (or `mailbench mailbox`) shows help, but ran nothing.
                    ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK })
                }
            },
            Refused::Misplaced(msg) => refused(&format!("mailbench: {msg}")),
        }
    })
}

/// Why `parse_from` could not give a command line to run.
enum Refused {
    /// clap's own error: help, version, or a mistake it found.
    Clap(clap::Error),
    /// A flag given to a command it does not belong to (`misplaced`), already in words.
    Misplaced(String),
}

impl From<clap::Error> for Refused {
    fn from(e: clap::Error) -> Self {
        Refused::Clap(e)
    }
}

/// `parse` on given arguments, without printing.
fn parse_from(args: &[std::ffi::OsString]) -> Result<Cli, Refused> {
    use clap::FromArgMatches;
    use clap::parser::ValueSource;
    let m = command().try_get_matches_from(args)?;
    if let Some(msg) = misplaced::refusal(&m) {
        return Err(Refused::Misplaced(msg));
    }
    let mut cli = Cli::from_arg_matches(&m)?;
    let given = |m: &clap::ArgMatches| {
        m.try_get_one::<u16>("threads")
            .ok()
            .flatten()
            .filter(|_| m.value_source("threads") == Some(ValueSource::CommandLine))
            .copied()
    };
    cli.threads_given = given(&m).is_some();
    let mut level = m.subcommand();
    while let Some((_, sub)) = level {
        if let Some(n) = given(sub) {
            cli.threads = n;
            cli.threads_given = true;
        }
        level = sub.subcommand();
    }
    Ok(cli)
}

/// The name of a command that opens no connections (one of `NO_CONNECTIONS`).
fn no_connections(c: &Command) -> Option<&'static str> {
    match c {
        Command::Report(_) => Some("report"),
        Command::Compare(_) => Some("compare"),
        Command::Merge(_) => Some("merge"),
        Command::Doctor(_) => Some("doctor"),
        Command::Completions(_) => Some("completions"),
        Command::Man(_) => Some("man"),
        _ => None,
    }
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    if let Some(name) = no_connections(&cli.command).filter(|_| cli.threads_given) {
        crate::run::live::say(&format!(
            "mailbench: --threads: {name} runs no connections, so it takes no threads; drop the flag"
        ));
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = || runtime(cli.threads);
    let result = match cli.command {
        Command::Send(a) => send::plan(&a, |v| std::env::var(v).ok())
            .map_err(|e| (EXIT_USAGE, e))
            .and_then(|(plan, outputs, rounds)| {
                runtime()
                    .map_err(|e| (EXIT_FAILED, e))?
                    .block_on(finish::send(plan, outputs, rounds))
            }),
        Command::Relay(a) => runtime()
            .map_err(|e| (EXIT_FAILED, e))
            .and_then(|rt| rt.block_on(relay::relay(*a))),
        Command::Lab(a) => runtime()
            .map_err(|e| (EXIT_FAILED, e))
            .and_then(|rt| rt.block_on(lab::lab(a))),
        Command::Mailbox(a) => runtime()
            .map_err(|e| (EXIT_FAILED, e))
            .and_then(|rt| rt.block_on(mailbox::mailbox(a))),
        Command::Report(a) => report::report(&a),
        Command::Doctor(a) => doctor::doctor(&a),
        Command::Compare(a) => report::compare(&a),
        Command::Merge(a) => report::merge(&a),
        Command::Completions(a) => install::completions(&a),
        Command::Man(a) => install::man(&a),
        Command::Dns(a) => dns::plan(&a, cli.threads)
            .map_err(|e| (EXIT_USAGE, e))
            .and_then(|(plan, outputs)| {
                runtime()
                    .map_err(|e| (EXIT_FAILED, e))?
                    .block_on(dns::dns(plan, outputs))
            }),
        Command::Sink(a) => {
            sink::plan(&a)
                .map_err(|e| (EXIT_USAGE, e))
                .and_then(|(plan, outputs)| {
                    runtime()
                        .map_err(|e| (EXIT_FAILED, e))?
                        .block_on(finish::sink(plan, outputs))
                })
        }
    };
    match result {
        Ok(code) => {
            plan::output::hold_metrics();
            ExitCode::from(code)
        }
        Err((code, msg)) => {
            crate::run::live::say(&format!("mailbench: {msg}"));
            ExitCode::from(code)
        }
    }
}

/// One thread runs everything on the calling thread; more use tokio's work-stealing pool.
fn runtime(threads: u16) -> Result<tokio::runtime::Runtime, String> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(usize::from(threads));
        b
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

#[cfg(test)]
mod tests {
    use super::command;

    /// clap checks the flag relations (conflicts, requirements) only when a command is
    /// parsed in a debug build; this parses them all.
    #[test]
    fn every_command_is_well_formed() {
        command().debug_assert();
    }
}
