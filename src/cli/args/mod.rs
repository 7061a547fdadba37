//! The clap structures: raw flags as typed, before cross-flag validation (`cli::plan`),
//! one file per command or shared flag group. Commands: `send` (with the flags that split
//! a run over agents), `sink`, `relay`, `dns`, `mailbox` (its workloads and `populate`),
//! `sessions` (`mailbox pop3` and `imap`), `profile` (`mailbox profile` and `arrival`),
//! `report` (`report`, `merge`, `compare`, `doctor`), `install` (`man`, completions).
//! Shared groups: `load` (shape, messages, DKIM), `client` (the SMTP client, TLS),
//! `server` (the store a mailbox workload runs against), `lab` (which lab MTA or store and
//! its shape), `output` (where results go, what they must satisfy). Nothing here imports
//! another part of the CLI: the planners and commands build on these, never the reverse.
// Doc comments here are also clap help text, where [brackets] mean "optional".
#![allow(rustdoc::broken_intra_doc_links)]

use clap::{Parser, Subcommand};

/// Benchmark suite for mail servers.
#[derive(Debug, Parser)]
#[command(name = "mailbench", version = VERSION, about = ABOUT, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
    /// Threads that run connections. Also taken after the commands that run connections
    /// (`cli::command` adds it there); `cli::parse` keeps the one given.
    #[arg(long, value_name = "N", default_value_t = 1, help = THREADS_HELP,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Whether `--threads` was given, before or after the command name (set by
    /// `cli::parse`): the commands that open no connections refuse it.
    #[arg(skip)]
    pub threads_given: bool,
}

/// `--threads`' help, at the top level and on every command that runs connections.
pub const THREADS_HELP: &str = "Threads that run connections. One (the default) is the \
cheapest per message: no wakeups cross threads, so more of a shared machine is left to the \
server under test. Raise it only when the run warns that mailbench saturates its core. For \
`dns`: the threads that serve each UDP socket";

/// `mailbench --version`: the release and the commit it was built from (`build.rs`;
/// `unknown` from a source tarball), so that a results file sent in names its source.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MAILBENCH_COMMIT"),
    ")"
);

/// What `mailbench --help` says the tool is.
const ABOUT: &str = "Benchmark suite for mail servers: SMTP/LMTP load and sink, relay through an MTA, \
POP3/IMAP mail-store workloads (users, profiles, arrival time), test DNS; report, compare and \
merge results";

/// `--threshold`'s help with a command's own examples (keys that command accepts; the
/// examples test runs each).
macro_rules! threshold_help {
    ($examples:literal) => {
        concat!(
            "Fail with exit code 3 unless this holds, e.g. ",
            $examples,
            " (a key the command does not report is refused, with the list of valid ones)"
        )
    };
}

mod client;
mod dns;
mod install;
mod lab;
mod load;
mod mailbox;
mod output;
mod profile;
mod relay;
mod report;
mod send;
mod server;
mod sessions;
mod sink;

use dns::DNS_EXAMPLES;
use relay::RELAY_EXAMPLES;
use report::{COMPARE_EXAMPLES, REPORT_EXAMPLES};
use send::SEND_EXAMPLES;
use sink::SINK_EXAMPLES;

pub use client::{ClientArgs, Switch, TlsArg, TlsArgs};
pub use dns::{DnsArgs, ZoneArgs};
pub use install::{CompletionsArgs, ManArgs};
pub use lab::{
    DovecotLabArgs, FillArgs, LabCommand, LabShape, LoggingArg, LookupArg, MailFormatArg,
    MtaLabArgs, PlacementArg, StoreArgs,
};
pub use load::{ArrivalsArg, DEFAULT_TO, DkimArgs, LoadArgs, MessageArgs, ShapeArgs};
pub use mailbox::{MailboxCommand, PopulateArgs, ViaArg};
pub use output::OutputArgs;
pub use profile::{ArrivalArgs, ArrivalMtaArg, ProfileArgs};
pub use relay::RelayArgs;
pub use report::{CompareArgs, DoctorArgs, MergeArgs, ReportArgs};
pub use send::{ScaleArgs, SendArgs};
pub use server::{LabFillArgs, MailboxClientArgs, MailboxServerArgs};
pub use sessions::{ImapArgs, ImapLoginArg, Pop3Args, Pop3LoginArg};
pub use sink::SinkArgs;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// SMTP/LMTP load generator: fixed rate (open loop) or as fast as possible (closed loop).
    #[command(after_help = SEND_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p99(total)<500ms', 'errors<1%', 'msgs_per_sec>100'"))))]
    Send(Box<SendArgs>),
    /// End-to-end relay benchmark: send → MTA under test → embedded sink, every message
    /// correlated; with --lab postfix on a disposable Postfix.
    #[command(after_help = RELAY_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p99(e2e)<2s', 'lost==0', 'drained==1'"))))]
    Relay(Box<RelayArgs>),
    /// Start a disposable lab server (an MTA or a mail store) for manual use until Ctrl-C.
    #[command(subcommand)]
    Lab(LabCommand),
    /// Mail-store workloads: fill mailboxes (populate), POP3 and IMAP users, virtual users
    /// of a scenario up to the store's capacity (profile), SMTP-in to IMAP-visible time
    /// (arrival); with --lab dovecot on a disposable Dovecot.
    #[command(subcommand)]
    Mailbox(MailboxCommand),
    /// Check this machine for what would distort a benchmark (descriptor limits, ports,
    /// conntrack, tmpfs, CPU scaling and steal, swap): one line per check, with the fix.
    /// Changes nothing; every send and relay run does the same checks first.
    Doctor(DoctorArgs),
    /// SMTP/LMTP receiver that discards (or stores) mail, with fault injection.
    #[command(after_help = SINK_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p99(e2e)<1s', 'rejected==0', 'msgs_per_sec>100'"))))]
    Sink(Box<SinkArgs>),
    /// One self-contained HTML page (charts and tables, opens offline) from results files;
    /// several files overlay on the same charts.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// The same figures of several runs side by side: change against the first in %, and
    /// whether it stands out from the noise of repeated rounds.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Merge the results files of the agents of one split run (send --shard), or of
    /// several sinks, into the results one agent would have recorded.
    Merge(MergeArgs),
    /// Authoritative test DNS for thousands of synthetic domains (MX, A/AAAA, SPF and DKIM
    /// TXT, PTR) or zone files, with fault rules and per-type counters; never recursive.
    #[command(after_help = DNS_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p99(total)<5ms', 'servfail==0', 'queries_per_sec>1000'"))))]
    Dns(Box<DnsArgs>),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell);
    /// scripts/install.sh puts each where its shell looks.
    Completions(CompletionsArgs),
    /// Print the man page in roff (`mailbench man | man -l -`), or write one page per
    /// command with --dir.
    Man(ManArgs),
}
