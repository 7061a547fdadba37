//! The flags of `mailbox profile` and `mailbox arrival`.

use clap::{Args, ValueEnum};

use super::lab::mta_parser;
use super::load::ShapeArgs;
use super::output::OutputArgs;
use super::server::{LabFillArgs, MailboxClientArgs, MailboxServerArgs};
use crate::lab::Mta;

/// Flags of `mailbench mailbox profile`.
#[derive(Debug, Clone, Args)]
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
    /// With --lab: the users' sends go through a lab MTA that delivers into the lab
    /// store over LMTP. (A server of your own, --imap and the like, takes --smtp instead.)
    #[arg(
        long,
        value_parser = mta_parser(|f| f.lmtp_onward),
        value_name = "MTA",
        requires = "lab",
        conflicts_with_all = ["imap", "pop3", "lmtp"]
    )]
    pub mta: Option<Mta>,
    /// A lab store's filling.
    #[command(flatten)]
    pub lab_fill: LabFillArgs,
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
    /// Leave the first DURATION of each ramp step (of the run, without --ramp-users) out
    /// of that step's figures and capacity judgment, so a step is judged once its users
    /// have settled in; the actions in it are shown apart (the step's `settle`) and still
    /// count in the run's totals. A bare number is seconds (--settle 500 is 500 s, not
    /// ms, as with relay's --settle and --drain-timeout). It must be shorter than a step.
    #[arg(long, value_name = "DURATION")]
    pub settle: Option<String>,
    /// Simulated time per real second: 60 runs an hour of each user's actions in a
    /// minute.
    #[arg(long, default_value = "1", value_name = "X")]
    pub time_scale: String,
    /// When a step breaks (repeatable; any that holds breaks it): a threshold expression
    /// over the step's figures.
    #[arg(long, value_name = "RULE", default_value = "mean(action)>1s")]
    pub capacity_rule: Vec<String>,
    /// The client's connect and response limits.
    #[command(flatten)]
    pub client: MailboxClientArgs,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// Seeds the users' draws (when each action falls due, and which): one seed asks two
    /// stores, or two runs, for the same sequence of actions [default: drawn per run;
    /// drawn once and shared when stores are compared].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Answer "what did this store setting buy": the lab store with KEY=A, KEY=B, … (2 to 8
    /// values; the same users and schedule) in rotating rounds, ending with the compare
    /// table, e.g. process_limit=1000,5 (Dovecot's imap service) or maxchild=… (Cyrus).
    #[arg(long, value_name = "KEY=A,B[,…]", requires = "lab")]
    pub compare_store_conf: Option<String>,
    /// Rounds per store or setting compared (their order rotates) [default: 4, the
    /// least that gives each row a noise verdict; 2 or 3 give the table without them].
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// Split the run over agents (`--shard`, `--start-at`, `--run-id`).
    #[command(flatten)]
    pub scale: super::send::ScaleArgs,
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
