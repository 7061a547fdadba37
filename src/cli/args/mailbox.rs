//! `mailbox`'s workloads, their help, the store they run against and `populate`'s flags.

use clap::{Args, Subcommand, ValueEnum};

use super::lab::FillArgs;
use super::output::OutputArgs;
use super::profile::{ArrivalArgs, ProfileArgs};
use super::server::MailboxServerArgs;
use super::sessions::{ImapArgs, Pop3Args};

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
        mut_arg("per_conn", |a| a.hide(true)),
        mut_arg("shard", |a| a.help(SHARD_HELP)))]
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
            "Commands per session, N or MIN-MAX; 0 keeps each session for the whole run")),
        mut_arg("shard", |a| a.help(SHARD_HELP)))]
    Imap(Box<ImapArgs>),
    /// Virtual users of a scenario (the Domino study's method), each on its own open-loop
    /// schedule; with --ramp-users, added in steps until a capacity rule breaks.
    #[command(after_help = PROFILE_EXAMPLES, mut_arg("threshold", |a| a.help(threshold_help!(
        "'p95(action)<1s', 'errors==0', 'actions_per_min>100'"))),
        mut_arg("shard", |a| a.help(PROFILE_SHARD_HELP)))]
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

/// `--shard` as the session workloads take it: users, not source addresses, are dealt.
const SHARD_HELP: &str = "Be agent I of N (from 0) against one store (--target): take every \
N-th user of --users-file (no two agents log in as one user), every N-th unit of the run's \
schedule and 1/N of -c; give every agent the same --run-id. auto/N takes I from \
JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, SLURM_PROCID, NOMAD_ALLOC_INDEX or PARALLEL_SEQ";

/// `--shard` as `profile` takes it: virtual users are dealt, every step on one clock.
const PROFILE_SHARD_HELP: &str = "Be agent I of N (from 0) against one store (--imap, \
--users-file): run virtual users n with n mod N = I (user n logs in as mailbox n, so no two \
agents share one), each step opening at the same instant on every agent; give every agent \
the same --run-id and one UTC --start-at, and `mailbench merge` their files to judge the \
capacity on all of them. auto/N takes I from JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, \
SLURM_PROCID, NOMAD_ALLOC_INDEX or PARALLEL_SEQ";

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
overdue (never done), unstarted (not begun at their step's end), stuck_users (left
waiting half a step), actions_per_min, mean_ms, p95_ms, p99_ms, sut_cpu (% of a core).
Each action counts in the step it fell due in, at its time as its user saw it (its wait
for a login included). A step holds when no action failed, no user waited half the step
for an action the store had not begun, and no --capacity-rule broke.";

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
fetch_part (one section drawn as imaptest's FETCH2 draws it: the header, RFC822.HEADER,
the whole message, the first part or the text), search (UID SEARCH ALL), store (set or clear a flag), delete (+FLAGS \\Deleted), expunge,
copy (into the same mailbox), move (into Archive), append, noop, idle (into IDLE and out),
capability.
Summary keys: commands, completed, refused, errors, sessions, fetched, appended,
expunged, violations, commands_per_sec, p50_ms, p99_ms.
Lab runs need root and Dovecot (scripts/install-deps.sh).";

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
    /// Crash the lab store during the fill and look for every accepted message afterwards
    /// (issue 42): crash@N (SIGKILL of the store's tree after N accepted messages) or
    /// power-loss@N (the same, then its mail, kept on LazyFS, drops every write not
    /// fsynced); the store restarts on the same mail.
    #[arg(long, value_name = "KIND@N")]
    pub fault: Option<String>,
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
