//! The clap structures: raw flags as typed, before cross-flag validation (`cli::send`).
// Doc comments here are also clap help text, where [brackets] mean "optional".
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::lab::{MTAS, Mta, STORES, Store};

/// Benchmark suite for mail servers.
#[derive(Debug, Parser)]
#[command(name = "mailbench", version, about = ABOUT, long_about = None, propagate_version = true)]
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
}

const DNS_EXAMPLES: &str = "\
Examples:
  mailbench dns --domains 'd{1..254}.example.test' --mx-address 127.0.2.1,127.0.2.2
      254 zones on 127.0.0.1:5353 (UDP and TCP), each with an MX host on one of two
      addresses; check with: dig @127.0.0.1 -p 5353 MX d1.example.test
  mailbench dns --domains 50 --rule 'mx:delay=200ms:10%' --rule 'a:servfail:5%' \\
      -z 60s --json dns.json
      domains d0..d49.example.test, slow MX answers and failing A answers, 60 s
  mailbench dns --zone-file lab.zone --listen 127.53.0.1:53 --query-log queries.log
      a zone file (RFC 1035 master format, one zone with its SOA) on port 53 of
      127.53.0.1, one line per question in queries.log

Rules: TYPE[@NAME-GLOB]:ACTION[:PERCENT%][:until=DURATION] with TYPE a|aaaa|mx|txt|ptr|other|any
and ACTION delay=DUR[-DUR], servfail, nxdomain, refused, drop (no answer) or truncate (TC bit).";

/// The zones a DNS server makes: `dns`'s flags, and the relay's with `--dns-domains`.
#[derive(Debug, Args, Clone)]
pub struct ZoneArgs {
    /// MX records per domain (preferences 10, 20, ...), each on its own host name.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=16))]
    pub mx_per_domain: u8,
    /// TTL of every synthetic record: how long resolvers may cache them.
    #[arg(long, default_value = "300s", value_name = "DURATION")]
    pub zone_ttl: String,
    /// Publish this DKIM public key (PEM, or the record `v=DKIM1; k=…; p=…`) at
    /// SELECTOR._domainkey of every synthetic domain.
    #[arg(long, value_name = "FILE")]
    pub dkim_txt: Option<PathBuf>,
    /// The selector of --dkim-txt.
    #[arg(long, default_value = "mailbench", value_name = "NAME")]
    pub dkim_txt_selector: String,
}

/// Flags of `mailbench dns`.
#[derive(Debug, Args)]
pub struct DnsArgs {
    /// Address to serve on, UDP and TCP (repeatable): host:port or [v6addr]:port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5353")]
    pub listen: Vec<String>,
    /// Synthetic domains: a count N (d0..dN-1.example.test) or names with one {A..B} range
    /// each, comma-separated: 'd{1..254}.example.test'.
    #[arg(long, value_name = "SPEC")]
    pub domains: Option<String>,
    /// Addresses of the synthetic MX hosts, comma-separated (IPv4 gives A records, IPv6
    /// AAAA); domains are spread over them.
    #[arg(long, value_name = "IP,...", default_value = "127.0.2.1")]
    pub mx_address: String,
    /// The synthetic zones' details.
    #[command(flatten)]
    pub zone: ZoneArgs,
    /// A standard zone file to serve (repeatable); needs $ORIGIN or absolute names, and
    /// an SOA.
    #[arg(long, value_name = "FILE")]
    pub zone_file: Vec<PathBuf>,
    /// Fault rule (repeatable): TYPE[@NAME-GLOB]:ACTION[:PERCENT%][:until=DURATION].
    #[arg(long, value_name = "RULE")]
    pub rule: Vec<String>,
    /// Write one line per query (time, client, transport, name, type, outcome, time taken)
    /// to this file; for debugging, it costs time per query.
    #[arg(long, value_name = "FILE")]
    pub query_log: Option<PathBuf>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

const REPORT_EXAMPLES: &str = "\
Examples:
  mailbench report relay.json -o relay.html
  mailbench report tmpfs.json disk.json --label tmpfs --label disk -o queue.html
      both runs on the same charts, one colour per run";

const COMPARE_EXAMPLES: &str = "\
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

const RELAY_EXAMPLES: &str = "\
Examples:
  mailbench relay --lab postfix
      the classic benchmark on a throwaway Postfix: 10,000 x 25 KiB, 64 sessions, tmpfs queue
  mailbench relay --lab postfix --queue disk --hops 2 --mta-conf default_process_limit=100
  mailbench relay --lab postfix --compare-postconf default_process_limit=100,20 -n 2000
      the two settings in alternating rounds, then the compare table with its verdicts
  mailbench relay --lab postfix,exim,opensmtpd,sendmail -n 2000 --json mtas.json
      the same load on four MTAs in rotating rounds, one table, one results file
  mailbench relay --lab postfix --sink-rule 'rcpt:451:30%' -n 2000
      the receiver defers 30 % of recipients; Postfix retries until all arrive
  mailbench relay --target 10.0.0.5:25 --sink 0.0.0.0:2525 --sut-pid 1234 --rate 200/s -z 5m
      your own MTA, pointed at this host's port 2525 as its relayhost

Summary keys: sent, accepted, delivered, bounced, lost, duplicates, errors, inject_mpm,
drain_mpm, e2e_p50_ms, e2e_p99_ms, max_backlog, drained ('lost==0' and 'drained==1' make
good thresholds). Lab runs need root and Postfix (scripts/install-deps.sh); Exim,
OpenSMTPD and Sendmail are unpacked beside it by scripts/install-deps.sh --mtas.";

const SINK_EXAMPLES: &str = "\
Examples:
  mailbench sink
      listen on 127.0.0.1:2525, accept and discard everything, print interval lines
  mailbench sink --listen 127.0.0.1:2525 --listen [::1]:2525 --store maildir:/tmp/md
  mailbench sink --rule 'rcpt:451:30%' --rule 'data_end:delay=50ms-200ms' --greylist 30s
      defer 30 % of recipients, slow down end of data, greylist new triples for 30 s
  mailbench sink --lmtp --listen unix:/tmp/lmtp.sock --exit-after-messages 10000 --json out.json

Faults asked for by the recipient address: tempfail@… (450), permfail@… (550),
451-anything@… (that code), disconnect@…, shutdown@… (421), greylist@….
Rules: COMMAND:ACTION[:PERCENT%] with COMMAND connect|ehlo|auth|mail|rcpt|data|data_end|quit
and ACTION a 4xx/5xx code, delay=DUR[-DUR], disconnect or shutdown.";

const SEND_EXAMPLES: &str = "\
Examples:
  mailbench send 127.0.0.1:2525 -n 10000 -c 64 --size 25k
      10,000 messages of 25 KiB over 64 connections, as fast as they go
  mailbench send 127.0.0.1:25 --rate 500/s -z 60s --arrivals poisson -c 200
      open loop: 500 messages/s for a minute; latency counts from the intended start
  mailbench send mx.test:25 --to 'user{seq}@d{mod:1000}.example.test' --rcpts 3
      three recipients per message spread over 1,000 domains
  mailbench send 127.0.0.1:587 --tls starttls --auth user:secret --json out.json
  mailbench send unix:/run/dovecot/lmtp --lmtp --recipients users.txt
  mailbench send 127.0.0.1:2525 -n 1000 --threshold 'p99(total)<200ms' --threshold 'errors<1%'
  mailbench send 127.0.0.1:25 --rate 1000/s -z 5m --threshold 'unstarted==0'

Trace header: every message carries
  X-Mailbench-Trace: run=<16 hex>; seq=<n>; t=<send time, µs since the epoch>
Exit codes: 0 ok, 1 bad input or unreachable target, 2 run failed or nothing accepted,
3 a threshold was breached.";

/// Spacing of open-loop arrivals.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalsArg {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (Poisson process).
    Poisson,
}

/// TLS use.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TlsArg {
    /// Plain text.
    None,
    /// Upgrade after the greeting: SMTP STARTTLS after EHLO, POP3 STLS, IMAP STARTTLS
    /// after CAPABILITY.
    Starttls,
    /// TLS from the first byte: SMTPS (465), POP3S (995), IMAPS (993).
    Implicit,
}

/// On or off.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Flags of `mailbench send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send: host[:port] (default port 25), [v6addr]:port, unix:/path; a
    /// comma-separated list is used round-robin.
    pub target: String,
    /// The load.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Splitting the run over several agents.
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// One run split over many agents, each a `mailbench send` started by a launcher people
/// already operate (Kubernetes, Slurm, Nomad, GNU parallel); `mailbench merge` adds their
/// results up.
#[derive(Debug, Clone, Default, Args)]
pub struct ScaleArgs {
    /// Be agent I of N (from 0): take every N-th message of the run (the same schedule
    /// as one agent would keep, striped), 1/N of -c and of --source-ip. auto/N takes I
    /// from JOB_COMPLETION_INDEX (Kubernetes Indexed Job), SLURM_ARRAY_TASK_ID,
    /// SLURM_PROCID, NOMAD_ALLOC_INDEX or PARALLEL_SEQ (GNU parallel, from 1).
    #[arg(long, value_name = "I/N|auto/N")]
    pub shard: Option<String>,
    /// Start the load at this time, so that agents started a little apart begin
    /// together: RFC 3339 in UTC (2026-11-25T17:00:00Z), or +30s from now.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// The run id (up to 16 hex digits) in every trace header and in the results: the
    /// same for all agents of a run, so that sinks and `merge` see one run.
    #[arg(long, value_name = "HEX")]
    pub run_id: Option<String>,
}

/// The flags `send` and `relay` share: the load, the messages, the SMTP client, outputs.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// How many, how fast.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// What each message is.
    #[command(flatten)]
    pub message: MessageArgs,
    /// DKIM signing of each message.
    #[command(flatten)]
    pub dkim: DkimArgs,
    /// How to connect and speak.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Write Postal's per-minute CSV here.
    #[arg(long, value_name = "FILE")]
    pub postal_csv: Option<PathBuf>,
    /// Run the load this long first and keep it out of the statistics (recorded apart in
    /// the results): servers start processes and fill caches under the first load, and
    /// seed 002 found two minutes of sustained load before the full picture shows.
    #[arg(long, value_name = "DURATION")]
    pub warmup: Option<String>,
    /// Run the whole benchmark this many times (relay: on a fresh lab each round) and keep
    /// every round in one results file, with the median and spread in the summary.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub rounds: u32,
}

/// The load's shape: how many units, how fast, over how many connections (every load
/// command's).
#[derive(Debug, Clone, Args)]
pub struct ShapeArgs {
    /// Connections: closed loop uses this many, open loop at most this many (default: 16
    /// for send, 64 for relay). relay also takes a list, 1,4,16,64,256, and runs once per
    /// level on the same lab (a sweep).
    #[arg(short = 'c', long, value_name = "N")]
    pub concurrency: Option<String>,
    /// Open loop: intended message rate, e.g. 500/s or 12000/min.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Open loop: how arrivals are spaced.
    #[arg(long, value_enum, default_value = "constant")]
    pub arrivals: ArrivalsArg,
    /// Open loop: ramp the rate linearly up to --rate over this long.
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<String>,
    /// Rate at the start of the ramp.
    #[arg(long, value_name = "RATE", default_value = "1/s")]
    pub ramp_from: String,
    /// Stop after this many messages (default when no --duration is given: 1000 for send,
    /// 10000 for relay).
    #[arg(short = 'n', long, value_name = "N")]
    pub messages: Option<String>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Messages per connection, N or MIN-MAX; 0 keeps each connection for the whole run.
    #[arg(long, default_value = "0", value_name = "N|MIN-MAX")]
    pub per_conn: String,
    /// After Ctrl-C or the end of --duration, how long transactions in flight may finish.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub grace: String,
    /// Stop the run after this many failed transactions.
    #[arg(long, value_name = "N")]
    pub max_errors: Option<String>,
}

/// DKIM-signing every message (what a signing MTA would do, so that its cost can be
/// measured, or a verifier loaded).
#[derive(Debug, Clone, Args)]
pub struct DkimArgs {
    /// Sign every message with this PEM private key (Ed25519 or RSA, PKCS#8 or PKCS#1),
    /// e.g. from `openssl genpkey -algorithm ed25519`.
    #[arg(long, value_name = "FILE")]
    pub dkim_key: Option<PathBuf>,
    /// The signature's selector (s=).
    #[arg(
        long,
        default_value = "mailbench",
        value_name = "NAME",
        requires = "dkim_key"
    )]
    pub dkim_selector: String,
    /// The signing domain (d=); default: the domain of --from.
    #[arg(long, value_name = "DOMAIN", requires = "dkim_key")]
    pub dkim_domain: Option<String>,
}

/// What each message is: envelope and content.
#[derive(Debug, Clone, Args)]
pub struct MessageArgs {
    /// Reverse-path; placeholders {seq}, {rcpt}, {mod:N}, {rand:N}.
    #[arg(long, default_value = "mailbench@example.org", value_name = "ADDR")]
    pub from: String,
    /// Forward-path template; placeholders {seq}, {rcpt}, {mod:N}, {rand:N}.
    #[arg(long, default_value = super::relay::DEFAULT_TO, value_name = "ADDR")]
    pub to: String,
    /// Senders from a Postal user list (address [password [flags]] per line).
    #[arg(long, value_name = "FILE")]
    pub senders: Option<PathBuf>,
    /// Recipients from a Postal user list.
    #[arg(long, value_name = "FILE")]
    pub recipients: Option<PathBuf>,
    /// Recipients per message.
    #[arg(long, default_value = "1", value_name = "N")]
    pub rcpts: String,
    /// Message size (headers included): 25k, or a range 0-10k (default: 1k for send, 25k
    /// for relay).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Send this message file (headers and body) instead of generated messages.
    #[arg(long, value_name = "FILE", conflicts_with = "eml")]
    pub body: Option<PathBuf>,
    /// Send the *.eml files of this directory, round-robin.
    #[arg(long, value_name = "DIR")]
    pub eml: Option<PathBuf>,
    /// Add a base64 attachment of this size to generated messages.
    #[arg(long, value_name = "SIZE")]
    pub attach: Option<String>,
}

/// A client's TLS: mode, share of connections, CA, resumption.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// TLS: none (the default), starttls or implicit.
    #[arg(long, value_enum)]
    pub tls: Option<TlsArg>,
    /// Share of connections that use TLS (postal's -s); alone it means STARTTLS on that
    /// share (default 100 when --tls is given).
    #[arg(long, value_name = "PERCENT")]
    pub tls_percent: Option<String>,
    /// Verify server certificates against this PEM CA file (default: trust any).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS session resumption between connections.
    #[arg(long, value_enum, default_value = "on")]
    pub tls_resume: Switch,
}

/// The SMTP client: connections, TLS, AUTH, extensions.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Local addresses to bind, comma-separated, used round-robin (beyond 64k connections).
    #[arg(long, value_name = "IP,...")]
    pub source_ip: Option<String>,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Timeout for each reply.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// TLS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// AUTH as user:pass, or 'senders' to log in as each --senders user with its password.
    #[arg(long, value_name = "USER:PASS|senders")]
    pub auth: Option<String>,
    /// Speak LMTP (LHLO; one reply per recipient after the body).
    #[arg(long)]
    pub lmtp: bool,
    /// Do not pipeline even when the server offers PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// Use BDAT instead of DATA when the server offers CHUNKING.
    #[arg(long)]
    pub chunking: bool,
    /// Name to send with EHLO.
    #[arg(long, default_value = "mailbench.test", value_name = "NAME")]
    pub helo: String,
}

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
    /// Merge files of different run ids or configurations, or the same shard twice
    /// (recorded in the output's extra.merge.forced).
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

/// Flags of `mailbench sink`.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// The run id (up to 16 hex digits) of this sink's results: give several sinks of one
    /// run the same, so that `mailbench merge` takes their files as one run.
    #[arg(long, value_name = "HEX")]
    pub run_id: Option<String>,
    /// Address to listen on (repeatable): host:port, [v6addr]:port or unix:/path.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:2525")]
    pub listen: Vec<String>,
    /// Speak LMTP (a reply per recipient after the content).
    #[arg(long)]
    pub lmtp: bool,
    /// Name in the greeting.
    #[arg(long, default_value = crate::sink::plan::defaults::HOSTNAME, value_name = "NAME")]
    pub hostname: String,
    /// Largest message accepted; larger ones get 552.
    #[arg(long, default_value = "50M", value_name = "SIZE")]
    pub max_size: String,
    /// Verify every accepted message's DKIM signatures against this public key (PEM, or
    /// the DNS record `v=DKIM1; k=…; p=…`) and count passes, failures and unsigned ones.
    #[arg(long, value_name = "FILE")]
    pub dkim_verify: Option<PathBuf>,
    /// Do not offer PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// Do not offer 8BITMIME.
    #[arg(long)]
    pub no_8bitmime: bool,
    /// Do not offer ENHANCEDSTATUSCODES.
    #[arg(long)]
    pub no_enhanced_status_codes: bool,
    /// Do not offer STARTTLS.
    #[arg(long)]
    pub no_starttls: bool,
    /// Do not offer AUTH.
    #[arg(long)]
    pub no_auth: bool,
    /// Do not offer CHUNKING (BDAT).
    #[arg(long)]
    pub no_chunking: bool,
    /// Do not offer SMTPUTF8.
    #[arg(long)]
    pub no_smtputf8: bool,
    /// Do not offer DSN.
    #[arg(long)]
    pub no_dsn: bool,
    /// PEM certificate for STARTTLS (default: a self-signed one made at start).
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Where messages go: discard, maildir:DIR, mbox:FILE or dir:DIR (one file each).
    #[arg(long, default_value = "discard", value_name = "STORE")]
    pub store: String,
    /// Make each stored message durable before replying 250.
    #[arg(long)]
    pub fsync: bool,
    /// Fault rule COMMAND:ACTION[:PERCENT%] (repeatable).
    #[arg(long, value_name = "RULE")]
    pub rule: Vec<String>,
    /// Fault rules from a TOML file (rules = ["rcpt:451:30%"], greylist = "30s", ...).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Greylist new (client IP, sender, recipient) triples for this long.
    #[arg(long, value_name = "DURATION")]
    pub greylist: Option<String>,
    /// Delay every reply by this much (tarpit).
    #[arg(long, value_name = "DURATION")]
    pub tarpit: Option<String>,
    /// Drip every reply a byte at a time with this delay between bytes.
    #[arg(long, value_name = "DURATION")]
    pub drip: Option<String>,
    /// Read at most this many bytes per second per connection.
    #[arg(long, value_name = "SIZE")]
    pub bandwidth: Option<String>,
    /// Recipients with BHM flags (address [password [flags]]: d defer, r reject, g greylist,
    /// b accept and bounce).
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Check AUTH against the --users list (address and password) instead of accepting any.
    #[arg(long)]
    pub auth_users: bool,
    /// Send DSNs for recipients flagged b to this SMTP server (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub bounce_to: Option<String>,
    /// Concurrent connections overall; more are answered 421.
    #[arg(long, default_value = crate::sink::plan::defaults::MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: String,
    /// Concurrent connections per client IP; more are answered 421.
    #[arg(long, value_name = "N")]
    pub max_conns_per_ip: Option<String>,
    /// Messages per connection; the next MAIL gets 421.
    #[arg(long, value_name = "N")]
    pub max_msgs_per_conn: Option<String>,
    /// Messages per second per client IP; more get 451.
    #[arg(long, value_name = "RATE")]
    pub rate_per_ip: Option<String>,
    /// Close connections idle this long.
    #[arg(long, default_value = crate::sink::plan::defaults::IDLE_TIMEOUT, value_name = "DURATION")]
    pub idle_timeout: String,
    /// Stop after this many messages.
    #[arg(long, value_name = "N")]
    pub exit_after_messages: Option<String>,
    /// Stop after no traffic for this long (counted from the first connection).
    #[arg(long, value_name = "DURATION")]
    pub exit_after_idle: Option<String>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Where results go and what they must satisfy; the same for every command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Seconds per interval line and series point.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub interval: String,
    /// Write the results (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the per-interval series as CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No live or interval lines (the summary is still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Fail with exit code 3 unless this holds, e.g. 'p99(total)<500ms', 'errors<1%' (a
    /// key the command does not report is refused, with the list of valid ones).
    #[arg(long, value_name = "EXPR")]
    pub threshold: Vec<String>,
    /// Write the HTML report (as `mailbench report`) here at the end of the run.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Serve the run's figures at http://ADDR/metrics for Prometheus while it goes,
    /// updated every --interval.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,
    /// Keep serving /metrics (with the results file's final figures) this long after the
    /// run, so that a scraper sees the end; Ctrl-C ends the wait.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0s",
        requires = "prometheus"
    )]
    pub prometheus_hold: String,
}

/// `--lab`'s values for an MTA: the lab registry's names, each with its help, so that a
/// new MTA needs no edit here.
fn mta_parser() -> impl TypedValueParser<Value = Mta> {
    let values = MTAS
        .iter()
        .map(|m| PossibleValue::new(m.name()).help(m.about()));
    PossibleValuesParser::new(values)
        .try_map(|name| Mta::named(&name).ok_or_else(|| format!("no lab MTA {name}")))
}

/// `--lab`'s values for a mail store: the lab registry's names, each with its help, so
/// that a new store needs no edit here.
fn store_parser() -> impl TypedValueParser<Value = Store> {
    let values = STORES
        .iter()
        .map(|s| PossibleValue::new(s.name()).help(s.about()));
    PossibleValuesParser::new(values)
        .try_map(|name| Store::named(&name).ok_or_else(|| format!("no lab store {name}")))
}

/// Where a lab keeps its queue or its mail.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlacementArg {
    /// RAM disk.
    Tmpfs,
    /// Directory on disk.
    Disk,
}

/// Flags that shape a lab.
#[derive(Debug, Args)]
pub struct LabShape {
    /// Queue on a RAM disk or on disk.
    #[arg(long, value_enum, default_value = "tmpfs")]
    pub queue: PlacementArg,
    /// Chain this many MTAs (MTA → MTA → sink).
    #[arg(long, default_value = "1", value_name = "N")]
    pub hops: u8,
    /// Override one of the MTA's own settings (repeatable): a main.cf parameter for
    /// Postfix (default_process_limit=100), a main option for Exim (smtp_accept_max=50),
    /// an smtpd.conf line `KEY VALUE` for OpenSMTPD, a sendmail.cf option `O KEY=VALUE`
    /// for Sendmail (MaxDaemonChildren=50). A setting the MTA refuses is an error.
    #[arg(long = "mta-conf", alias = "postconf", value_name = "KEY=VALUE")]
    pub mta_conf: Vec<String>,
    /// Processes or connections serving SMTP at once (Postfix default_process_limit, Exim
    /// smtp_accept_max, Sendmail MaxDaemonChildren; the lab's default is 512).
    #[arg(long, value_name = "N")]
    pub mta_processes: Option<u32>,
    /// Parallel deliveries to one destination (Postfix
    /// default_destination_concurrency_limit, OpenSMTPD max-conn-per-host; the lab's
    /// default is 100).
    #[arg(long, value_name = "N")]
    pub mta_dest_concurrency: Option<u32>,
    /// The lab MTA DKIM-signs every message it accepts with this PEM private key, through
    /// OpenDKIM as a milter (what does signing cost this MTA).
    #[arg(long, value_name = "FILE")]
    pub mta_dkim_key: Option<PathBuf>,
    /// The lab MTA's signing domain (d=).
    #[arg(
        long,
        default_value = "example.org",
        value_name = "DOMAIN",
        requires = "mta_dkim_key"
    )]
    pub mta_dkim_domain: String,
    /// The lab MTA's selector (s=).
    #[arg(
        long,
        default_value = "mailbench",
        value_name = "NAME",
        requires = "mta_dkim_key"
    )]
    pub mta_dkim_selector: String,
}

/// Flags of `mailbench relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Start a disposable MTA for the run. Several (`postfix,exim,opensmtpd,sendmail`)
    /// compare them: the same workload against each in turn, in rounds (at least 4; more
    /// with --rounds) whose order rotates, ending with one table.
    #[arg(
        long,
        value_parser = mta_parser(),
        value_delimiter = ',',
        value_name = "MTA[,MTA…]",
        conflicts_with = "target"
    )]
    pub lab: Vec<Mta>,
    /// Answer "what did this setting buy": run the lab with KEY=V1 and KEY=V2 in
    /// alternating rounds (at least 4 each; more with --rounds) and end with the compare
    /// table, e.g. default_process_limit=100,20.
    #[arg(long, value_name = "KEY=V1,V2", requires = "lab")]
    pub compare_postconf: Option<String>,
    /// The MTA under test (when not using --lab).
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "lab")]
    pub target: Option<String>,
    /// Where the embedded sink listens (the MTA's relayhost); default a free loopback port
    /// with --lab, 127.0.0.1:2525 otherwise.
    #[arg(long, value_name = "ADDR")]
    pub sink: Option<String>,
    /// Lab shape.
    #[command(flatten)]
    pub shape: LabShape,
    /// Fault rule for the embedded sink (repeatable), as `sink --rule`.
    #[arg(long, value_name = "RULE")]
    pub sink_rule: Vec<String>,
    /// Put DNS in the benchmark: the embedded DNS server serves these synthetic domains
    /// (a count N for d0..dN-1.example.test, or names with one {A..B} range each) whose MX
    /// hosts resolve to the embedded sink's addresses, and the lab MTA resolves through
    /// it instead of relaying to a fixed host. Without --to, recipients are spread over
    /// the domains (u{seq}@d{mod:N}.example.test).
    #[arg(long, value_name = "SPEC", requires = "lab")]
    pub dns_domains: Option<String>,
    /// Seed 002's list server: one message (-n 1 unless given) to one recipient in each of
    /// 254 domains (--dns-domains N for another count) that the lab MTA fans out through
    /// the test DNS; end to end per recipient, DNS questions per delivered recipient.
    #[arg(long, requires = "lab")]
    pub list_server: bool,
    /// Sink addresses (127.0.2.1, .2, ...) the MX hosts are spread over, so that the
    /// MTA's per-destination limits apply as with real receivers.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=64))]
    pub dns_sinks: u8,
    /// DNS fault rule (repeatable), as `mailbench dns --rule`: e.g. 'mx:delay=200ms:10%',
    /// 'a:servfail:5%', 'mx:servfail:100%:until=5s'.
    #[arg(long, value_name = "RULE")]
    pub dns_rule: Vec<String>,
    /// The synthetic zones' details.
    #[command(flatten)]
    pub dns_zone: ZoneArgs,
    /// Longest wait for deliveries after injection; what has not arrived is lost.
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    pub drain_timeout: String,
    /// Find the highest open-loop rate the MTA sustains: double the rate per step until it
    /// falls behind, then narrow down; prints the evidence per step.
    #[arg(long, conflicts_with = "rate")]
    pub find_max: bool,
    /// --find-max: length of each step.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub step: String,
    /// --find-max: first rate tried.
    #[arg(long, default_value = "50/s", value_name = "RATE")]
    pub start_rate: String,
    /// --find-max: a step fails when end-to-end p99 passes this.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub max_e2e_p99: String,
    /// Sample this shell command per interval and keep its first number beside the
    /// backlog (e.g. 'mailq | tail -1').
    #[arg(long, value_name = "CMD")]
    pub queue_cmd: Option<String>,
    /// The block device holding the MTA's queue (a name such as vda, or a path on it):
    /// its operations per second and busy share are sampled per interval (a lab's is
    /// found by itself).
    #[arg(long, value_name = "DEVICE|PATH", conflicts_with = "lab")]
    pub queue_device: Option<String>,
    /// Verify every relayed message's DKIM signatures at the embedded sink against this
    /// public key (PEM, or the DNS record `v=DKIM1; k=…; p=…`).
    #[arg(long, value_name = "FILE")]
    pub dkim_verify: Option<PathBuf>,
    /// The flush benchmark (seed 003): the lab holds everything injected, then releases
    /// it all at once; the acceptance rate and the drain (time to empty, delivery MPM,
    /// backlog) are reported apart.
    #[arg(long, requires = "lab", conflicts_with_all = ["find_max", "compare_postconf"])]
    pub flush: bool,
    /// Count the MTA's fsyncs, files created, renamed and unlinked, bytes written and
    /// context switches per delivered message, from the kernel's tracepoints (root).
    #[arg(long)]
    pub trace_io: bool,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// The load.
    #[command(flatten)]
    pub load: LoadArgs,
}

/// `mailbench lab`'s servers.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// A disposable Postfix that relays to --relay.
    Postfix(MtaLabArgs),
    /// A disposable Exim that relays to --relay (scripts/install-mtas.sh unpacks it).
    Exim(MtaLabArgs),
    /// A disposable OpenSMTPD that relays to --relay (scripts/install-mtas.sh unpacks it).
    Opensmtpd(MtaLabArgs),
    /// A disposable Sendmail that relays to --relay (scripts/install-mtas.sh unpacks it).
    Sendmail(MtaLabArgs),
    /// A disposable Dovecot (IMAP, POP3, LMTP) with numbered users.
    Dovecot(DovecotLabArgs),
}

/// Flags of `mailbench lab postfix|exim|opensmtpd|sendmail`.
#[derive(Debug, Args)]
pub struct MtaLabArgs {
    /// Where the lab relays to; `lmtp:HOST:PORT` (Postfix) delivers over LMTP instead,
    /// e.g. into the LMTP port `mailbench lab dovecot` prints.
    #[arg(long, default_value = "127.0.0.1:2525", value_name = "HOST:PORT")]
    pub relay: String,
    /// Offer STARTTLS on the entry smtpd (Postfix), with a certificate made for the lab
    /// (its path is printed, for --tls-ca)
    #[arg(long)]
    pub starttls: bool,
    /// Lab shape.
    #[command(flatten)]
    pub shape: LabShape,
}

/// Flags of `mailbench lab dovecot`.
#[derive(Debug, Args)]
pub struct DovecotLabArgs {
    /// Offer STARTTLS (IMAP), STLS (POP3), IMAPS and POP3S with a certificate made for the
    /// lab (its path is printed, for --tls-ca).
    #[arg(long)]
    pub starttls: bool,
    /// The store's users and settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Messages to deliver into each user's mailboxes before it is handed over.
    #[arg(long, default_value = "0", value_name = "N")]
    pub fill: String,
    /// How the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
}

/// A lab store's users and settings (`lab dovecot`, `mailbox ... --lab dovecot`).
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Mailbox users to create [default: 100].
    #[arg(long, value_name = "N")]
    pub users: Option<String>,
    /// Their addresses (also their login names); {num} is the user's number from 1
    /// [default: user{num}@store.test].
    #[arg(long, value_name = "TEMPLATE")]
    pub user_template: Option<String>,
    /// Their passwords; {num} is the user's number [default: secret{num}].
    #[arg(long, value_name = "TEMPLATE")]
    pub password_template: Option<String>,
    /// How mail is kept [default: maildir].
    #[arg(long, value_enum)]
    pub mail_format: Option<MailFormatArg>,
    /// Mail on a RAM disk or on disk [default: tmpfs].
    #[arg(long, visible_alias = "store", value_enum)]
    pub storage: Option<PlacementArg>,
    /// Override one of the store's own settings (repeatable): a dovecot.conf setting for
    /// Dovecot (mail_fsync=always), an imapd.conf option for Cyrus (fulldirhash=1). A
    /// setting the store refuses is an error.
    #[arg(long = "store-conf", alias = "doveconf", value_name = "KEY=VALUE")]
    pub store_conf: Vec<String>,
    /// Have the store count its own logins, deliveries and IMAP commands, with their
    /// durations, and put them beside mailbench's figures (a server-side cross-check; the
    /// store's statistics process costs it a little).
    #[arg(long)]
    pub server_stats: bool,
}

/// How a lab store keeps mail.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MailFormatArg {
    /// One file per message.
    Maildir,
    /// Dovecot's multi-message files.
    Mdbox,
}

/// How mailboxes are filled: over LMTP, with generated messages or real ones.
#[derive(Debug, Clone, Args)]
pub struct FillArgs {
    /// Folders per user that get an equal share, INBOX included (the others are named
    /// f2, f3, ...).
    #[arg(long, default_value = "1", value_name = "N")]
    pub folders: String,
    /// Size of each message filled in, or a range 1k-64k.
    #[arg(long, default_value = "25k", value_name = "SIZE")]
    pub fill_size: String,
    /// Fill with the *.eml files of this directory (or one file), round-robin, instead of
    /// generated messages. They keep their own headers; the trace header is added.
    #[arg(long, value_name = "DIR", conflicts_with = "fill_size")]
    pub eml: Option<PathBuf>,
    /// LMTP sessions that fill at once.
    #[arg(long, default_value = "8", value_name = "N")]
    pub fill_concurrency: String,
}

/// `mailbench mailbox`'s workloads.
#[derive(Debug, Subcommand)]
pub enum MailboxCommand {
    /// Fill mailboxes over LMTP (or IMAP APPEND), N messages per user, and report the rate.
    #[command(after_help = POPULATE_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p99(total)<500ms', 'errors==0'"))))]
    Populate(Box<PopulateArgs>),
    /// POP3 users (rabid's job): sessions that log in, download and delete a share of the
    /// messages, and quit.
    #[command(after_help = POP3_EXAMPLES,
        mut_arg("threshold", |a| a.help(threshold_help!(
            "'p99(total)<1s', 'errors==0', 'sessions_per_sec>50'"))),
        mut_arg("concurrency", |a| a.help(
            "Connections: closed loop uses this many, open loop at most this many [default: 16]")),
        mut_arg("messages", |a| a.help(
            "Stop after this many sessions [default without --duration: 1000]")),
        // A POP3 session holds its mailbox until QUIT: one session per connection, so
        // --per-conn is refused (with that reason) and not offered.
        mut_arg("per_conn", |a| a.hide(true)))]
    Pop3(Box<Pop3Args>),
    /// IMAP users (imaptest's job): sessions that log in, select a mailbox and run a mix
    /// of commands, each one timed and its responses state-checked.
    #[command(after_help = IMAP_EXAMPLES,
        mut_arg("threshold", |a| a.help(threshold_help!(
            "'p99(total)<500ms', 'violations==0', 'commands_per_sec>100'"))),
        mut_arg("concurrency", |a| a.help(
            "Connections, one IMAP session at a time each: closed loop uses this many, open loop at most this many [default: 10]")),
        mut_arg("messages", |a| a.help(
            "Stop after this many commands [default without --duration: 10000]")),
        mut_arg("per_conn", |a| a.help(
            "Commands per session, N or MIN-MAX; 0 keeps each session for the whole run")))]
    Imap(Box<ImapArgs>),
    /// Virtual users of a scenario (the Domino study's method), each on its own open-loop
    /// schedule; with --ramp-users, added in steps until a capacity rule breaks.
    #[command(after_help = PROFILE_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p95(action)<1s', 'errors==0', 'actions_per_min>100'"))))]
    Profile(Box<ProfileArgs>),
    /// SMTP in, IMAP out: messages injected into an MTA that delivers into the store, each
    /// timed until it is visible over IMAP (IDLE), with the relay benchmark's figures.
    #[command(after_help = ARRIVAL_EXAMPLES,
        mut_arg("threshold", |a| a.help(threshold_help!(
            "'p95(e2e)<60s', 'lost==0', 'drain_mpm>1000'"))),
        mut_arg("concurrency", |a| a.help(
            "SMTP connections: closed loop uses this many, open loop at most this many [default: 4]")),
        mut_arg("messages", |a| a.help(
            "Stop after this many messages [default without --duration: 1000]")))]
    Arrival(Box<ArrivalArgs>),
}

const ARRIVAL_EXAMPLES: &str = "\
Examples:
  mailbench mailbox arrival --lab dovecot
      1,000 messages of 10 KiB into a lab Postfix that delivers over LMTP into a lab
      Dovecot; 100 users watched in IDLE; end to end = the MTA's acceptance to visibility
  mailbench mailbox arrival --lab dovecot --mta lmtp --rate 200/s -z 30s
      straight into the store's LMTP: the store's own share of the time
  mailbench mailbox arrival --smtp 10.0.0.5:25 --imap 10.0.0.6:143 --users-file users.txt \\
      --threshold 'p95(e2e)<60s'
      SPECmail's delivery-time rule against a system of one's own

Summary keys as relay's (delivered, lost, duplicates, drain_mpm, e2e_p50_ms, ...); e2e is
also a latency row (p95(e2e) for SPECmail's rule). Lab runs need root, Postfix and
Dovecot (scripts/install-deps.sh).";

const PROFILE_EXAMPLES: &str = "\
Examples:
  mailbench mailbox profile --lab dovecot --scenario r6mail --time-scale 60 -z 60s
      100 virtual users doing seed 001's R6Mail mix, an hour and a half of theirs per 90 s
  mailbench mailbox profile --lab dovecot --users 2000 --scenario imaptest \\
      --ramp-users 100:100/20s --capacity-rule 'mean(action)>1s' --capacity-rule 'errors>1%'
      capacity: users added 100 at a time until a step's mean response passes one second
  mailbench mailbox profile --imap 10.0.0.5:143 --lmtp 10.0.0.5:24 --users-file users.txt \\
      --scenario my-users.toml --virtual-users 500

Presets: r6mail (seed 001: per 90 min open the inbox 6 times, read 30, delete 12, receive 12
of 50 KB, send 1 of 100 KB to 3, close the inbox 6 times), rabid (POP3 users who check and
empty their mailbox, fed by deliveries), imaptest (modelled on imaptest's default profile).
A scenario file:
  period = \"90m\"
  [[user]]
  name = \"office\"
  share = 3                       # relative share of the users
  client = \"caching\"            # caching | login-per-action | pop3
  receive_size = \"50k\"
  send_size = \"100k\"
  send_recipients = 3
  actions = { open_inbox = 6, read = 30, delete = 12, receive = 12, send = 1 }
Actions: open_inbox, close_inbox, read, delete, flag, move, search, receive (LMTP into the
user's mailbox), send (LMTP to others and APPEND to Sent), check (a POP3 session).
Summary keys: users, capacity_users, actions, completed, refused, errors, late,
actions_per_min, mean_ms, p95_ms, p99_ms, sut_cpu (% of a core).";

const POPULATE_EXAMPLES: &str = "\
Examples:
  mailbench mailbox populate --lab dovecot --users 1000 --per-user 20 --folders 4
      delivery rate into a throwaway Dovecot, 20,000 messages over LMTP
  mailbench mailbox populate --lmtp unix:/run/dovecot/lmtp --users-file users.txt --per-user 50

Summary keys as `send`'s (sent, accepted, mpm, ...); with --via imap as `mailbox imap`'s
(appended, commands_per_sec, ...), whose bytes are the octets uploaded.";

const POP3_EXAMPLES: &str = "\
Examples:
  mailbench mailbox pop3 --lab dovecot
      100 users with 10 messages of 25 KiB each; 1,000 sessions over 16 connections that
      download every message
  mailbench mailbox pop3 --lab dovecot --users 1000 --rate 50/s -z 60s --delete 50
      open loop: 50 sessions/s for a minute, each deleting half its mailbox
  mailbench mailbox pop3 --target 10.0.0.5:110 --users-file users.txt -c 64 --tls starttls

-n counts sessions. Summary keys: sessions, completed, refused, errors, retrieved,
deleted, sessions_per_sec, retrieved_per_sec, p50_ms, p99_ms (of whole sessions).
Lab runs need root and Dovecot (scripts/install-deps.sh).";

const IMAP_EXAMPLES: &str = "\
Examples:
  mailbench mailbox imap --lab dovecot
      100 users with 10 messages of 25 KiB each; 10,000 commands of the default mix over
      10 sessions, every response state-checked
  mailbench mailbox imap --lab dovecot --users 100 --fill 30 -c 50 -z 60s --per-conn 20
      imaptest's set-up: 50 clients, 100 users with 30 messages, a new login every 20
      commands
  mailbench mailbox imap --lab dovecot --mix fetch_body=1 --rate 500/s -z 30s
  mailbench mailbox imap --target 10.0.0.5:143 --users-file users.txt --tls starttls

-n counts commands; --per-conn is commands per session (0: one session per connection
for the whole run). Mix commands: select, list, status, fetch (UID FLAGS RFC822.SIZE
ENVELOPE BODYSTRUCTURE of up to --fetch-range messages), fetch_body (a whole message),
search (UID SEARCH ALL), store (set or clear a flag), delete (+FLAGS \\Deleted), expunge,
copy (into the same mailbox), move (into Archive), append, noop, idle (into IDLE and out),
capability.
Summary keys: commands, completed, refused, errors, sessions, fetched, appended,
expunged, violations, commands_per_sec, p50_ms, p99_ms.
Lab runs need root and Dovecot (scripts/install-deps.sh).";

/// Which store a mailbox workload runs against: a lab, or a server and its users.
#[derive(Debug, Clone, Args)]
pub struct MailboxServerArgs {
    /// Start a disposable store for the run.
    #[arg(long, value_parser = store_parser(), conflicts_with = "users_file")]
    pub lab: Option<Store>,
    /// The lab store's users and settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The users to log in as (address password per line, Postal's format), with --target
    /// or --lmtp.
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
}

/// Flags of `mailbench mailbox populate`.
#[derive(Debug, Args)]
pub struct PopulateArgs {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The LMTP server to deliver to (when not using --lab): host:port or unix:/path.
    #[arg(
        long,
        value_name = "ADDR",
        required_unless_present_any = ["lab", "imap"],
        requires = "users_file",
        conflicts_with_all = ["lab", "imap"]
    )]
    pub lmtp: Option<String>,
    /// The IMAP server to APPEND to (when not using --lab): host[:port], default port 143.
    #[arg(
        long,
        value_name = "HOST:PORT",
        requires = "users_file",
        conflicts_with = "lab"
    )]
    pub imap: Option<String>,
    /// How messages get in: LMTP deliveries (fast), or IMAP APPEND (with flags).
    #[arg(long, value_enum, default_value = "lmtp")]
    pub via: ViaArg,
    /// With --via imap: flags and the share of messages that get each, e.g.
    /// '\Seen=50,\Flagged=10' (\Seen, \Flagged, \Answered, \Draft).
    #[arg(long, value_name = "FLAG=PERCENT,...")]
    pub flags: Option<String>,
    /// Messages per user.
    #[arg(long, default_value = "10", value_name = "N")]
    pub per_user: String,
    /// How the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// How `populate` puts messages into the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViaArg {
    /// LMTP deliveries.
    Lmtp,
    /// IMAP APPEND.
    Imap,
}

/// Flags of `mailbench mailbox pop3`.
#[derive(Debug, Args)]
pub struct Pop3Args {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The POP3 server (when not using --lab): host[:port] (default port 110, or 995 with
    /// --tls implicit).
    #[arg(
        long,
        value_name = "HOST:PORT",
        required_unless_present = "lab",
        requires = "users_file",
        conflicts_with = "lab"
    )]
    pub target: Option<String>,
    /// --lab: messages delivered into each user's mailboxes before the run [default: 10].
    #[arg(long, value_name = "N")]
    pub fill: Option<String>,
    /// --lab: how the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
    /// How many sessions, how fast.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Share of each mailbox's messages a session downloads.
    #[arg(long, default_value = "100", value_name = "PERCENT")]
    pub download: String,
    /// Share of each mailbox's messages a session deletes (the first ones; committed at
    /// QUIT).
    #[arg(long, default_value = "0", value_name = "PERCENT")]
    pub delete: String,
    /// At most this many downloads per session, whatever the share (rabid's -c).
    #[arg(long, value_name = "N")]
    pub max_download: Option<String>,
    /// Log in as a user drawn at random for each session, as rabid does, instead of the
    /// next one in turn.
    #[arg(long)]
    pub random_users: bool,
    /// Download with TOP and this many body lines instead of RETR.
    #[arg(long, value_name = "LINES")]
    pub top: Option<u32>,
    /// Ask LIST (every message's size) after STAT in each session.
    #[arg(long)]
    pub list: bool,
    /// Ask UIDL (every message's unique id) after STAT in each session.
    #[arg(long)]
    pub uidl: bool,
    /// How sessions log in.
    #[arg(long, value_enum, default_value = "user")]
    pub login: Pop3LoginArg,
    /// Send one command at a time even when the server offers PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Timeout for each response.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// TLS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `mailbench mailbox imap`.
#[derive(Debug, Args)]
pub struct ImapArgs {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The IMAP server (when not using --lab): host[:port] (default port 143, or 993 with
    /// --tls implicit).
    #[arg(
        long,
        value_name = "HOST:PORT",
        required_unless_present = "lab",
        requires = "users_file",
        conflicts_with = "lab"
    )]
    pub target: Option<String>,
    /// --lab: messages delivered into each user's mailboxes before the run [default: 10].
    #[arg(long, value_name = "N")]
    pub fill: Option<String>,
    /// --lab: how the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
    /// How many commands, how fast, and commands per session (--per-conn).
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The commands and their relative weights, name=weight,... [default: imaptest-like,
    /// see below].
    #[arg(long, value_name = "MIX")]
    pub mix: Option<String>,
    /// The mailbox each session selects.
    #[arg(long, default_value = "INBOX", value_name = "NAME")]
    pub mailbox: String,
    /// Most messages one `fetch` asks for.
    #[arg(long, default_value = "10", value_name = "N")]
    pub fetch_range: String,
    /// Size of each appended message, headers included: exactly what the server stores
    /// (RFC822.SIZE); a size below the headers' gives the headers alone.
    #[arg(long, default_value = "10k", value_name = "SIZE")]
    pub append_size: String,
    /// How long an `idle` command stays in IDLE before DONE (what the server pushes
    /// meanwhile is state-checked); 0 goes in and straight out.
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub idle_for: String,
    /// Do not check responses against the session's model and other sessions.
    #[arg(long)]
    pub no_state_check: bool,
    /// Wait for the server's continuation before an APPEND's message even when it offers
    /// LITERAL+.
    #[arg(long)]
    pub no_literal_plus: bool,
    /// Log in as a user drawn at random for each session instead of the next in turn.
    #[arg(long)]
    pub random_users: bool,
    /// Commands in flight per session, as RFC 9051 §5.5 allows (imaptest sends up to 10);
    /// 1 waits for each completion.
    #[arg(long, default_value = "1", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub pipeline: u16,
    /// How sessions log in.
    #[arg(long, value_enum, default_value = "login")]
    pub login: ImapLoginArg,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Timeout for each response.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// TLS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `mailbench mailbox profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// The IMAP server (when not using --lab): host[:port], default port 143.
    #[arg(
        long,
        value_name = "HOST:PORT",
        conflicts_with = "lab",
        requires = "users_file"
    )]
    pub imap: Option<String>,
    /// The POP3 server (when not using --lab), for `check`: host[:port], default port 110.
    #[arg(
        long,
        value_name = "HOST:PORT",
        conflicts_with = "lab",
        requires = "users_file"
    )]
    pub pop3: Option<String>,
    /// The LMTP server (when not using --lab), for `receive` and `send`: host[:port] or
    /// unix:/path.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "lab",
        requires = "users_file"
    )]
    pub lmtp: Option<String>,
    /// An MTA the users' `send` actions go through (SMTP): host[:port], default port 25.
    /// Without it (and without --mta), sends are delivered over the store's LMTP.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "mta")]
    pub smtp: Option<String>,
    /// With --lab dovecot: the users' sends go through a lab MTA that delivers into the
    /// store over LMTP.
    #[arg(long, value_parser = mta_parser(), value_name = "MTA", requires = "lab")]
    pub mta: Option<Mta>,
    /// --lab: messages delivered into each user's mailboxes before the run [default: 10].
    #[arg(long, value_name = "N")]
    pub fill: Option<String>,
    /// --lab: how the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
    /// A preset (r6mail, rabid, imaptest) or a scenario file (TOML).
    #[arg(long, default_value = "r6mail", value_name = "PRESET|FILE")]
    pub scenario: String,
    /// Virtual users at once, without --ramp-users [default: one per mailbox user].
    #[arg(long, value_name = "N", conflicts_with = "ramp_users")]
    pub virtual_users: Option<String>,
    /// How long [default: 60s]; with --ramp-users, a limit on the whole ramp (a step it
    /// cuts short is not judged).
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// START:STEP/PERIOD: START virtual users, STEP more every PERIOD, until a capacity
    /// rule breaks or --max-users is passed.
    #[arg(long, value_name = "START:STEP/PERIOD")]
    pub ramp_users: Option<String>,
    /// No ramp step above this many virtual users [default: one per mailbox user; more
    /// is refused: each virtual user needs its own mailbox].
    #[arg(long, value_name = "N")]
    pub max_users: Option<String>,
    /// Simulated time per real second: 60 runs an hour of each user's actions in a
    /// minute.
    #[arg(long, default_value = "1", value_name = "X")]
    pub time_scale: String,
    /// When a step breaks (repeatable; any that holds breaks it): a threshold expression
    /// over the step's figures.
    #[arg(long, value_name = "RULE", default_value = "mean(action)>1s")]
    pub capacity_rule: Vec<String>,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,
    /// Timeout for each response.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `mailbench mailbox arrival`.
#[derive(Debug, Args)]
pub struct ArrivalArgs {
    /// The store.
    #[command(flatten)]
    pub server: MailboxServerArgs,
    /// With --lab dovecot: inject into a lab Postfix that delivers over LMTP (postfix), or
    /// straight into the store's LMTP (lmtp).
    #[arg(long, value_enum, default_value = "postfix")]
    pub mta: ArrivalMtaArg,
    /// The lab Postfix's own settings, key=value (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub postconf: Vec<String>,
    /// An MTA of one's own that delivers into the store (when not using --lab):
    /// host[:port], default port 25.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "lab", requires_all = ["imap", "users_file"])]
    pub smtp: Option<String>,
    /// The store's IMAP server (when not using --lab): host[:port], default port 143.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "lab")]
    pub imap: Option<String>,
    /// Users watched in IDLE (and mailed, round-robin) [default: all, at most 100].
    #[arg(long, value_name = "N")]
    pub watchers: Option<String>,
    /// How many messages, how fast.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Message size, or a range 1k-64k.
    #[arg(long, default_value = "10k", value_name = "SIZE")]
    pub size: String,
    /// Longest wait for the last arrivals after the injection.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub drain_timeout: String,
    /// Observe this process tree as the system under test (repeatable; the labs' are
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// How `mailbox arrival` gets mail into a lab store.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalMtaArg {
    /// A lab Postfix delivering over LMTP.
    Postfix,
    /// The store's LMTP directly.
    Lmtp,
}

/// How IMAP sessions log in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImapLoginArg {
    /// LOGIN.
    Login,
    /// AUTHENTICATE PLAIN (with SASL-IR).
    Plain,
}

/// How POP3 sessions log in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Pop3LoginArg {
    /// USER and PASS.
    User,
    /// AUTH PLAIN.
    Plain,
    /// APOP (the server's greeting must carry a timestamp; the lab's does).
    Apop,
}

#[cfg(test)]
mod tests {

    /// clap checks the flag relations (conflicts, requirements) only when a command is
    /// parsed in a debug build; this parses them all.
    #[test]
    fn every_command_is_well_formed() {
        crate::cli::command().debug_assert();
    }
}
