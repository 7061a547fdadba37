//! The thin command line: parse flags (`args`), validate them into a plan (`send`, `sink`,
//! `relay`, `lab`, `mailbox`, `dns`, with the output flags in `output`), run the engine, then check
//! thresholds, write outputs and choose the exit code (`finish`); `report` reads finished
//! runs back for `mailbench report` and `compare`; `vary` runs a relay lab under two
//! settings in alternating rounds.

pub mod args;
pub mod dns;
pub mod doctor;
pub mod finish;
pub mod lab;
pub mod mailbox;
pub mod output;
pub mod relay;
pub mod report;
pub mod scale;
pub mod send;
pub mod sink;
pub mod vary;

use std::process::ExitCode;

use args::{Cli, Command};

/// Exit code: the run completed and every threshold held.
pub const EXIT_OK: u8 = 0;
/// Exit code: bad usage or input; nothing was run.
pub const EXIT_USAGE: u8 = 1;
/// Exit code: the run could not be done or broke down.
pub const EXIT_FAILED: u8 = 2;
/// Exit code: the run completed but a threshold was breached.
pub const EXIT_THRESHOLD: u8 = 3;

/// The commands that run connections: they take `--threads` after their name too
/// (`mailbench send --threads 2 …`), as well as before it (`mailbench --threads 2 send …`).
const RUNS_CONNECTIONS: [&str; 6] = ["send", "relay", "sink", "dns", "lab", "mailbox"];

/// The commands that run none: `--threads` is not offered there, and refused in one line.
const NO_CONNECTIONS: [&str; 4] = ["report", "compare", "merge", "doctor"];

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
    c
}

/// Parses the process's arguments with `command`; `--threads` after the command name
/// lands in `Cli::threads` like the top-level one (given in both places, the later wins).
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let m = command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&m)?;
    if let Some(n) = m
        .subcommand()
        .and_then(|(_, sub)| sub.get_one::<u16>("threads"))
    {
        cli.threads = Some(*n);
    }
    Ok(cli)
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let threads = cli.threads;
    let runtime = || runtime(threads.unwrap_or(1));
    let no_threads = |name: &str| match threads {
        Some(_) => Err((
            EXIT_USAGE,
            format!("--threads: {name} runs no connections, so it takes no threads; drop the flag"),
        )),
        None => Ok(()),
    };
    let result = match cli.command {
        Command::Send(a) => crate::transport::target::parse_targets(&a.target, 25)
            .and_then(|t| send::plan(t, Some(&a.target), &a.load, &send::SEND_DEFAULTS))
            .and_then(|(mut plan, outputs)| {
                scale::apply(&mut plan, &a.scale, a.load.rounds, |v| {
                    std::env::var(v).ok()
                })?;
                Ok((plan, outputs))
            })
            .map_err(|e| (EXIT_USAGE, e))
            .and_then(|(plan, outputs)| {
                runtime()
                    .map_err(|e| (EXIT_FAILED, e))?
                    .block_on(finish::send(plan, outputs, a.load.rounds))
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
        Command::Report(a) => no_threads("report").and_then(|()| report::report(&a)),
        Command::Doctor(a) => no_threads("doctor").and_then(|()| doctor::doctor(&a)),
        Command::Compare(a) => no_threads("compare").and_then(|()| report::compare(&a)),
        Command::Merge(a) => no_threads("merge").and_then(|()| report::merge(&a)),
        Command::Dns(a) => {
            dns::plan(&a)
                .map_err(|e| (EXIT_USAGE, e))
                .and_then(|(plan, outputs)| {
                    runtime()
                        .map_err(|e| (EXIT_FAILED, e))?
                        .block_on(dns::dns(plan, outputs))
                })
        }
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
            output::hold_metrics();
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
