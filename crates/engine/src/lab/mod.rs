//! Disposable real mail servers for benchmarks: MTAs that relay (`postfix`, and `exim`,
//! `opensmtpd`, `sendmail` unpacked and `qmail` built beside it, sharing `chain`) and mail
//! stores that users read (`dovecot`, `cyrus`). Each lab is started for a run in temporary
//! directories with its own ports and is stopped and removed on drop, whatever happens.
//! Every server is one file behind [`LabServer`] and either [`MtaLab`] or [`StoreLab`],
//! registered in [`MTAS`] or [`STORES`]; what they share — free ports, the greeting check,
//! queue and mail placement, certificates, checks — is in `host`. Around them: `opendkim`
//! signs for an MTA, `isolate` runs an MTA in its own namespaces, `syslog` gives an MTA
//! that logs through a datagram socket (syslog, Postfix's postlog) a log file read by
//! mailbench, and `leftovers` finds and cleans the labs of runs that died. Every command a
//! lab runs has a deadline (`command`), and a lab that stops answering or stopping is
//! reported by the process that is stuck (`stall`), found while a run uses it by `watch`;
//! a signal during a lab's start cuts the start short (`interrupt`). For durability runs,
//! `crash` kills a lab's whole tree at once and `fs` gives it file systems that fail on
//! purpose (a LazyFS mount whose power is cut, a small ext4 that fills up); for recipient
//! lookups, `ldap` is a private directory behind a counting proxy; `between` shapes the
//! network from one MTA of a chain to the next.

mod between;
pub mod chain;
pub mod command;
pub mod crash;
pub mod cyrus;
pub mod dovecot;
pub mod exim;
pub mod fs;
pub mod host;
pub mod interrupt;
pub mod isolate;
pub mod ldap;
pub mod leftovers;
pub mod opendkim;
pub mod opensmtpd;
pub mod postfix;
pub mod qmail;
pub mod sendmail;
pub mod stall;
pub mod syslog;
pub mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where a lab's queue (or mail) lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// A RAM disk (tmpfs mount; /dev/shm when mounting is not permitted).
    Tmpfs,
    /// A directory on disk.
    Disk,
    /// A LazyFS mount over a directory on disk, whose writes not fsynced a power cut
    /// drops (`--fault power-loss`; the labs whose [`Features::power_loss`] is set, others take
    /// it as `Disk`).
    Lazyfs,
    /// A small real file system of this many bytes, an ext4 image on a loop device, that
    /// `--fault disk-full` fills ([`MtaLab::fill_queue`]); the entry of a lab whose
    /// [`Features::disk_full`] is set only, others take it as `Disk`.
    Loop(u64),
}

/// How to build a lab, in terms every MTA has.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Instances chained MTA → MTA → ... → relay.
    pub hops: u8,
    /// Queue placement.
    pub queue: QueueKind,
    /// The MTA's own settings, `key=value`, applied to every instance after the lab's.
    pub settings: Vec<(String, String)>,
    /// The limits every MTA has in some form, under neutral names.
    pub limits: MtaLimits,
    /// Where the last instance relays to.
    pub relay: SocketAddr,
    /// The last instance delivers to `relay` over LMTP instead of SMTP: into a mail store
    /// lab's LMTP port (MTA → store, as a real mail system is built).
    pub relay_lmtp: bool,
    /// Offer STARTTLS on the entry, with a certificate made for the lab. Off unless asked:
    /// a server that loads TLS in every process costs the run (Postfix's first greetings
    /// doubled, 1.6 s to 3 s for 64 sessions).
    pub starttls: bool,
    /// Put every message the entry accepts on hold, for a flush benchmark: injection is
    /// measured alone, then [`MtaLab::release`] lets everything go at once.
    pub hold: bool,
    /// The entry instance DKIM-signs every message it accepts (through a milter).
    pub dkim: Option<DkimSigning>,
    /// The last instance resolves its destinations (MX, then address records) through
    /// this test DNS server and delivers to their port, instead of relaying to `relay`.
    pub dns: Option<LabDns>,
    /// The entry instance checks each recipient against a table of the run's recipients
    /// (seed 004's lookup backends); `None`: no recipient check, the lab's default.
    pub lookup: Option<RecipientLookup>,
    /// How the MTA logs (seed 004: multilog cost qmail half its rate).
    pub logging: MtaLogging,
    /// The shape of the network between one instance and the next of a chain (`--link
    /// mta-mta:…`); `None`: loopback. Started with the chain, so it needs the runtime
    /// the chain starts on.
    pub between: Option<crate::transport::shape::LinkShape>,
}

/// How a lab MTA logs (`--mta-logging`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MtaLogging {
    /// Its log as the lab writes it (Postfix maillog_file, qmail-send's output to a file).
    #[default]
    On,
    /// No log where the MTA allows it: the delivered count comes from the sink alone.
    Off,
    /// qmail-send's output through daemontools' multilog, as qmail sites run it.
    Multilog,
}

/// Where the entry MTA looks its recipients up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupBackend {
    /// A local indexed file (Postfix `hash:`), the baseline.
    Hash,
    /// A private slapd through a fault-injecting proxy (Postfix `ldap:`).
    Ldap(ldap::proxy::Faults),
}

/// A recipient check: the backend and the addresses it knows (every recipient the run
/// will send to; any other is refused).
#[derive(Debug, Clone)]
pub struct RecipientLookup {
    /// The table's backend.
    pub backend: LookupBackend,
    /// The run's recipients.
    pub recipients: std::sync::Arc<Vec<String>>,
}

/// Limits the lab MTAs share under neutral names (`None`: the lab's default, which is
/// raised far above what a benchmark uses so that no MTA's stock limit is measured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MtaLimits {
    /// Processes or connections serving SMTP at once (Postfix `default_process_limit`,
    /// Exim `smtp_accept_max`, Sendmail `MaxDaemonChildren`; default 512).
    pub processes: Option<u32>,
    /// Parallel deliveries to one destination (Postfix
    /// `default_destination_concurrency_limit`, OpenSMTPD `max-conn-per-host`; default 100).
    pub per_destination: Option<u32>,
}

/// Where a lab MTA resolves and delivers when DNS is part of the benchmark.
#[derive(Debug, Clone, Copy)]
pub struct LabDns {
    /// The test DNS server's address (port 53: resolvers know no other).
    pub resolver: std::net::IpAddr,
    /// The port the MX hosts' sinks listen on.
    pub port: u16,
}

/// What a lab MTA signs with.
#[derive(Debug, Clone)]
pub struct DkimSigning {
    /// The PEM private key.
    pub key: PathBuf,
    /// The signing domain (d=).
    pub domain: String,
    /// The selector (s=).
    pub selector: String,
}

/// Why a lab did not start. The kinds matter to callers: a rejected setting is the user's
/// input (exit 1), a taken port is retried on another, the rest are failures (exit 2).
#[derive(Debug)]
pub enum LabError {
    /// The MTA refused one of its settings (the message names it).
    Setting(String),
    /// The port was taken by another server before the MTA bound it.
    PortTaken(String),
    /// Anything else (the MTA missing, not root, a file that cannot be written).
    Failed(String),
    /// A signal came during the start: what was started is stopped and removed.
    Interrupted,
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Setting(m) | LabError::PortTaken(m) | LabError::Failed(m) => f.write_str(m),
            LabError::Interrupted => f.write_str(
                "interrupted while the lab started: what it had started is stopped and removed, and nothing was measured",
            ),
        }
    }
}

/// A running lab server, whatever it is: what every run and `mailbench lab` need of it.
pub trait LabServer: Send + Sync {
    /// Every process of the lab (the system under test, observed from /proc).
    fn pids(&self) -> Vec<u32>;
    /// Its log files, first instance first (kept beside the results).
    fn logs(&self) -> Vec<PathBuf>;
    /// Every directory it made (removed when it stops).
    fn dirs(&self) -> Vec<PathBuf>;
    /// Notices for the user (e.g. a tmpfs fallback).
    fn notices(&self) -> &[String];
    /// One line per instance for `mailbench lab`: where it listens, its configuration.
    fn describe(&self) -> Vec<String>;
    /// The certificate its entry offers with STARTTLS, when it does.
    fn certificate(&self) -> Option<PathBuf>;
    /// Copies its logs beside a results file as `BASE.KIND.N` (N: the instance, first
    /// hop 0), so that the run's figures can be checked against the server's own log once
    /// the lab is gone; the copies' paths, for the results to name.
    fn keep_logs(&self, base: &std::path::Path, kind: &str) -> Vec<String> {
        let mut kept = Vec::new();
        for (i, log) in self.logs().iter().enumerate() {
            let to = base.with_extension(format!("{kind}.{i}"));
            // The copy is the user's to read beside the results, whatever the server's
            // own log's mode (a store's is 0600, Postfix's 0644): every copy is 0644.
            let copied = std::fs::copy(log, &to).and_then(|_| {
                std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            });
            if copied.is_ok() {
                kept.push(to.display().to_string());
            }
        }
        kept
    }
}

/// A running lab MTA: what a relay run needs of it.
pub trait MtaLab: LabServer {
    /// Where to inject.
    fn entry(&self) -> SocketAddr;
    /// Deliveries to the relay target, counted from the MTA's own log.
    fn delivered_logged(&self) -> usize;
    /// Messages the MTA still holds, in every instance.
    fn queued(&self) -> usize;
    /// The entry instance's queue directory (its device is the one watched).
    fn queue_dir(&self) -> PathBuf;
    /// Messages on hold in the entry instance (started with [`LabOptions::hold`]).
    fn held(&self) -> usize;
    /// Releases every held message for delivery at once; returns how many were released.
    fn release(&self) -> Result<usize, String>;
    /// Deferrals the MTA's log blames on DNS (failed or timed-out lookups), so far.
    fn dns_deferred(&self) -> usize;
    /// What the recipient lookups cost so far, when they go to the lab's directory
    /// (`--mta-lookup ldap`).
    fn lookups(&self) -> Option<ldap::proxy::Counts> {
        None
    }
    /// Whether [`MtaLab::delivered_logged`] means anything: false when the MTA runs
    /// without its log (`--mta-logging off`).
    fn logs_deliveries(&self) -> bool {
        true
    }
    /// Its queues and the messages in each, every instance added up, counted the way its
    /// own queue tool counts them (directory reads only: cheap enough for every interval).
    fn queue_states(&self) -> Vec<crate::stats::queues::QueueState>;
    /// Crashes the MTA (issue 42): SIGKILL to its whole process tree at once; with
    /// `cut_power`, then drops every write to its queue that was not fsynced (the queue
    /// must be on [`QueueKind::Lazyfs`]). It stays down until [`MtaLab::restart`].
    fn crash(&self, _cut_power: bool) -> Result<Crashed, String> {
        Err(NO_FAULTS.into())
    }
    /// Starts the MTA again after [`MtaLab::crash`], on the same configuration and queue;
    /// returns once it greets.
    fn restart(&self) -> Result<(), String> {
        Err(NO_FAULTS.into())
    }
    /// Fills the entry's queue file system (on [`QueueKind::Loop`]) with a ballast file
    /// until only about `leave` bytes are free (issue 42's `disk-full`); the MTA runs on.
    fn fill_queue(&self, _leave: u64) -> Result<QueueFilled, String> {
        Err(NO_FAULTS.into())
    }
    /// Removes the ballast of [`MtaLab::fill_queue`]: the space is back.
    fn free_queue(&self) -> Result<(), String> {
        Err(NO_FAULTS.into())
    }
}

/// How full [`MtaLab::fill_queue`] made the queue's file system, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueFilled {
    /// The file system's size (the image's).
    pub size: u64,
    /// The ballast file's size.
    pub ballast: u64,
    /// What stayed free for the MTA (statvfs after the fill).
    pub free: u64,
}

/// What a lab that cannot crash and restart yet says.
pub const NO_FAULTS: &str = "crashing and restarting is not supported by this lab MTA yet";

/// What a crash did: the processes killed, and with a power cut, what the queue's file
/// system held unsynced at the cut (LazyFS's own report), which the cut dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Crashed {
    /// Processes killed.
    pub killed: usize,
    /// With a power cut: the files with data not yet fsynced, as LazyFS listed them.
    pub unsynced_files: Option<Vec<PathBuf>>,
    /// With a power cut: the bytes not yet fsynced.
    pub unsynced_bytes: Option<u64>,
}

/// A mailbox user of a store lab: the address it logs in and receives mail as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUser {
    /// The address (also the login name).
    pub address: String,
    /// The password.
    pub password: String,
}

/// Where a store lab serves each protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreEndpoints {
    /// IMAP (STARTTLS offered when the lab was asked for TLS).
    pub imap: SocketAddr,
    /// POP3 (STLS offered when the lab was asked for TLS).
    pub pop3: SocketAddr,
    /// LMTP, for deliveries.
    pub lmtp: SocketAddr,
    /// IMAPS (implicit TLS), when the lab was asked for TLS.
    pub imaps: Option<SocketAddr>,
    /// POP3S (implicit TLS), when the lab was asked for TLS.
    pub pop3s: Option<SocketAddr>,
}

/// How to build a mail store lab, in terms every store has.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Mailbox users to create.
    pub users: u32,
    /// Their addresses: `{num}` is the user's number from 1.
    pub user_template: String,
    /// Their passwords: `{num}` is the user's number from 1.
    pub password_template: String,
    /// How mail is kept (`maildir`, `mdbox`).
    pub mail_format: MailFormat,
    /// Where mail is kept.
    pub placement: QueueKind,
    /// Offer STARTTLS/STLS, and IMAPS and POP3S, with a certificate made for the lab.
    pub starttls: bool,
    /// The store's own settings, `key=value`, applied after the lab's.
    pub settings: Vec<(String, String)>,
    /// Have the store keep its own statistics of logins, deliveries and commands, to be
    /// read back after a run (see [`StoreLab::server_stats`]). Off unless asked: the
    /// store's statistics process is work it would not otherwise do.
    pub server_stats: bool,
}

/// One of the store's own statistics since it started: a server-side cross-check of the
/// counts and latencies the client measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerMetric {
    /// What was counted: `logins`, `logins_ok`, `deliveries`, `imap_<COMMAND>`.
    pub name: String,
    /// How many.
    pub count: u64,
    /// Mean duration, microseconds.
    pub mean_us: f64,
    /// Median duration, microseconds.
    pub p50_us: u64,
    /// 95th percentile duration, microseconds.
    pub p95_us: u64,
    /// Longest duration, microseconds.
    pub max_us: u64,
}

/// How a store keeps mail on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MailFormat {
    /// One file per message.
    Maildir,
    /// Dovecot's multi-message files.
    Mdbox,
}

impl StoreOptions {
    /// The users, numbered from 1.
    pub fn user_list(&self) -> Vec<StoreUser> {
        (1..=self.users)
            .map(|n| StoreUser {
                address: self.user_template.replace("{num}", &n.to_string()),
                password: self.password_template.replace("{num}", &n.to_string()),
            })
            .collect()
    }
}

/// A running mail store lab: what the mailbox workloads need of it.
pub trait StoreLab: LabServer {
    /// Where each protocol is served.
    fn endpoints(&self) -> StoreEndpoints;
    /// Its users.
    fn users(&self) -> &[StoreUser];
    /// Its users with their passwords in Postal's format (`address password` per line),
    /// for `--users-file` in runs started by hand.
    fn users_file(&self) -> PathBuf;
    /// The store's effective limits that bound a capacity result (setting, value).
    fn limits(&self) -> Vec<(String, String)>;
    /// The store's own statistics since it started, when it was asked to keep them
    /// ([`StoreOptions::server_stats`]); empty otherwise.
    fn server_stats(&self) -> Vec<ServerMetric>;
    /// Makes every user's mailboxes (the INBOX, and folders f2 … f`folders`) ready before
    /// a fill delivers to `user@` and `user+fN@` over LMTP. A store that creates a folder
    /// as its first mail arrives, safely under concurrent deliveries (Dovecot), has
    /// nothing to do; one that does not does it here.
    fn prepare_folders(&self, _folders: u32) -> Result<(), LabError> {
        Ok(())
    }
    /// Crashes the store (issue 42): SIGKILL to its whole process tree at once; with
    /// `cut_power`, then drops every write to its mail that was not fsynced (the mail must
    /// be on [`QueueKind::Lazyfs`]). It stays down until [`StoreLab::restart`].
    fn crash(&self, _cut_power: bool) -> Result<Crashed, String> {
        Err(NO_STORE_FAULTS.into())
    }
    /// Starts the store again after [`StoreLab::crash`], on the same configuration and
    /// mail; returns once it greets.
    fn restart(&self) -> Result<(), String> {
        Err(NO_STORE_FAULTS.into())
    }
}

/// What a lab store that cannot crash and restart yet says.
pub const NO_STORE_FAULTS: &str = "crashing and restarting is not supported by this lab store yet";

/// A lab server a fault (`--fault`) can crash and restart: a lab MTA in a relay run, a lab
/// store in `mailbox populate`; one fault machinery ([`crate::relay::fault`]) drives both.
pub trait Crashable: Send + Sync {
    /// SIGKILL to the whole tree; with `cut_power`, then the unsynced writes dropped.
    fn crash(&self, cut_power: bool) -> Result<Crashed, String>;
    /// Up again on the same configuration and data, once it greets.
    fn restart(&self) -> Result<(), String>;
    /// Fills its data's file system but `leave` bytes (`disk-full`).
    fn fill_queue(&self, _leave: u64) -> Result<QueueFilled, String> {
        Err(NO_FAULTS.into())
    }
    /// Frees what [`Crashable::fill_queue`] filled.
    fn free_queue(&self) -> Result<(), String> {
        Err(NO_FAULTS.into())
    }
}

/// A lab MTA crashes, restarts and fills its queue as its own methods say.
impl Crashable for dyn MtaLab {
    fn crash(&self, cut_power: bool) -> Result<Crashed, String> {
        MtaLab::crash(self, cut_power)
    }
    fn restart(&self) -> Result<(), String> {
        MtaLab::restart(self)
    }
    fn fill_queue(&self, leave: u64) -> Result<QueueFilled, String> {
        MtaLab::fill_queue(self, leave)
    }
    fn free_queue(&self) -> Result<(), String> {
        MtaLab::free_queue(self)
    }
}

/// A lab store crashes and restarts as its own methods say (it has no `disk-full` yet).
impl Crashable for dyn StoreLab {
    fn crash(&self, cut_power: bool) -> Result<Crashed, String> {
        StoreLab::crash(self, cut_power)
    }
    fn restart(&self) -> Result<(), String> {
        StoreLab::restart(self)
    }
}

/// A kind of lab MTA, as the registry [`MTAS`] lists it: the name `--lab` takes and
/// results and messages use, its line in `--lab`'s help, and how to check and start it.
/// Each MTA's file defines its own (`postfix::KIND`), so adding an MTA is that file and
/// one line in [`MTAS`] (and its install lines in `scripts/install-mtas.sh`). Its
/// settings are given with `--mta-conf` (alias `--postconf`). What it can do beyond
/// relaying is its [`Features`], declared in its file too: every refusal and dispatch
/// asks the kind what it can do, never which it is.
#[derive(Clone, Copy)]
pub struct Mta {
    name: &'static str,
    about: &'static str,
    features: Features,
    check: fn() -> Result<(), String>,
    start: fn(&LabOptions) -> Result<Box<dyn MtaLab>, LabError>,
    /// The first of some `--mta-conf` keys the MTA does not know, asked before any lab
    /// starts; `None` when all are known or the MTA cannot be asked ahead (its lab then
    /// refuses the setting when it starts).
    unknown_setting: for<'a> fn(&[&'a str]) -> Option<&'a str>,
}

/// What a lab MTA can do beyond relaying, declared by each MTA's file next to its kind:
/// the flags that need a feature are refused for an MTA without it, and the refusal names
/// the MTAs that have it ([`Mta::having`]), so that flipping one here is the whole change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// STARTTLS on the entry (`--tls starttls`).
    pub starttls: bool,
    /// DKIM signing on the entry (`--mta-dkim-key`).
    pub dkim: bool,
    /// The last instance delivers over LMTP (`--relay lmtp:`; `mailbox arrival`/`profile`
    /// inject through it into a store).
    pub lmtp_onward: bool,
    /// Holding every accepted message and releasing them at once (`--flush`).
    pub hold: bool,
    /// Recipient lookups on the entry (`--mta-lookup`).
    pub lookups: bool,
    /// Running without its log (`--mta-logging off`).
    pub logging_off: bool,
    /// Logging through daemontools' multilog (`--mta-logging multilog`).
    pub multilog: bool,
    /// SIGKILL of the whole MTA and a restart on the same queue (`--fault crash`).
    pub crash: bool,
    /// The crash with the queue's unsynced writes dropped, queue on LazyFS
    /// (`--fault power-loss`).
    pub power_loss: bool,
    /// The queue on a small loop-mounted file system filled and freed (`--fault disk-full`).
    pub disk_full: bool,
    /// Whose log syntax the relay run reads deliveries and bounces from, when it can.
    pub log: LogSyntax,
}

/// Which log syntax a lab MTA writes that the relay run can read per message (queue IDs,
/// deliveries, bounces); most it cannot read, and their runs count from the sink alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogSyntax {
    /// Not read per message.
    #[default]
    Unread,
    /// Postfix's maillog lines (`postfix/smtp[pid]: QUEUEID: to=<…>, status=sent`).
    Postfix,
    /// OpenSMTPD's `smtp` event lines.
    Opensmtpd,
}

impl Features {
    /// Relaying only: what the chain MTAs start from.
    pub const RELAY: Features = Features {
        starttls: false,
        dkim: false,
        lmtp_onward: false,
        hold: false,
        lookups: false,
        logging_off: false,
        multilog: false,
        crash: false,
        power_loss: false,
        disk_full: false,
        log: LogSyntax::Unread,
    };
}

/// Every lab MTA, in the order `--lab`'s help lists them.
pub const MTAS: &[Mta] = &[
    postfix::KIND,
    exim::KIND,
    opensmtpd::KIND,
    sendmail::KIND,
    qmail::KIND,
];

impl Mta {
    /// The name in `--lab`, results and messages.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// What it is and where it comes from, for `--lab`'s help.
    pub fn about(self) -> &'static str {
        self.about
    }

    /// What it can do beyond relaying.
    pub fn features(self) -> Features {
        self.features
    }

    /// The first of `keys` (settings' names) this MTA does not know, when it can tell
    /// before a lab starts.
    pub fn unknown_setting<'a>(self, keys: &[&'a str]) -> Option<&'a str> {
        (self.unknown_setting)(keys)
    }

    /// The MTA the registry has under `name`.
    pub fn named(name: &str) -> Option<Mta> {
        MTAS.iter().copied().find(|m| m.name == name)
    }

    /// The first MTA in the registry that has a feature (the one a command that needs it
    /// starts, e.g. `mailbox arrival`'s MTA delivering over LMTP).
    pub fn first_having(has: fn(&Features) -> bool) -> Option<Mta> {
        MTAS.iter().copied().find(|m| has(&m.features))
    }

    /// The MTAs that have a feature, as a refusal names them: `--lab postfix`,
    /// `--lab postfix and qmail`, or `no lab MTA` when none has it yet.
    pub fn having(has: fn(&Features) -> bool) -> String {
        Mta::having_as("--lab", has)
    }

    /// [`Mta::having`] for a flag other than `--lab` that takes an MTA (`--mta postfix`).
    pub fn having_as(flag: &str, has: fn(&Features) -> bool) -> String {
        let names: Vec<&str> = MTAS
            .iter()
            .filter(|m| has(&m.features))
            .map(|m| m.name)
            .collect();
        match names.split_last() {
            None => "no lab MTA".into(),
            Some((last, [])) => format!("{flag} {last}"),
            Some((last, rest)) => format!("{flag} {} and {last}", rest.join(", ")),
        }
    }

    /// Checks that this lab can run here; the error says how to fix it.
    pub fn check(self) -> Result<(), String> {
        (self.check)()
    }

    /// Starts the lab (blocking: it waits for the MTA to greet).
    pub fn start(self, opts: &LabOptions) -> Result<Box<dyn MtaLab>, LabError> {
        (self.start)(opts)
    }
}

/// Two kinds are the same lab when they have the same name (the registry's names are
/// unique; comparing function pointers would not be reliable).
impl PartialEq for Mta {
    fn eq(&self, other: &Mta) -> bool {
        self.name == other.name
    }
}

impl Eq for Mta {}

/// Plans that hold a kind print it by name.
impl std::fmt::Debug for Mta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Which flag carries a store's own settings in its messages, and an example for them.
#[derive(Debug, Clone, Copy)]
pub struct SettingsFlag {
    /// The flag as messages name it (`--store-conf`; Dovecot's old `--doveconf` is only an
    /// alias, so that a message names the flag `--help` shows).
    pub flag: &'static str,
    /// A `key=value` the store accepts, shown when a value is malformed.
    pub example: &'static str,
}

/// A kind of lab mail store, as the registry [`STORES`] lists it: the name `--lab` takes
/// and results and messages use, its line in `--lab`'s help, its settings flag, and how
/// to check and start it. Each store's file defines its own (`dovecot::KIND`), so adding
/// a store is that file and one line in [`STORES`].
#[derive(Clone, Copy)]
pub struct Store {
    name: &'static str,
    title: &'static str,
    about: &'static str,
    settings: SettingsFlag,
    check: fn() -> Result<(), String>,
    start: fn(&StoreOptions) -> Result<Box<dyn StoreLab>, LabError>,
    /// Whether it takes `crash` and `power-loss` ([`StoreLab::crash`]).
    faults: bool,
}

/// Every lab mail store, in the order `--lab`'s help lists them.
pub const STORES: &[Store] = &[dovecot::KIND, cyrus::KIND];

impl Store {
    /// The name in `--lab`, results and messages.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Its name in a sentence (`the lab's Dovecot`).
    pub fn title(self) -> &'static str {
        self.title
    }

    /// What it is and where it comes from, for `--lab`'s help.
    pub fn about(self) -> &'static str {
        self.about
    }

    /// How its settings are given (`--store-conf KEY=VALUE`).
    pub fn settings(self) -> SettingsFlag {
        self.settings
    }

    /// The store the registry has under `name`.
    pub fn named(name: &str) -> Option<Store> {
        STORES.iter().copied().find(|s| s.name == name)
    }

    /// Every store's name, as a message offers them (`dovecot|cyrus`).
    pub fn names() -> String {
        STORES.iter().map(|s| s.name).collect::<Vec<_>>().join("|")
    }

    /// Checks that this lab can run here; the error says how to fix it.
    pub fn check(self) -> Result<(), String> {
        (self.check)()
    }

    /// Whether `--fault crash` and `power-loss` can act on it.
    pub fn takes_faults(self) -> bool {
        self.faults
    }

    /// Starts the lab (blocking: it waits for the store to greet).
    pub fn start(self, opts: &StoreOptions) -> Result<Box<dyn StoreLab>, LabError> {
        (self.start)(opts)
    }
}

/// Two kinds are the same lab when they have the same name.
impl PartialEq for Store {
    fn eq(&self, other: &Store) -> bool {
        self.name == other.name
    }
}

impl Eq for Store {}

/// Plans that hold a kind print it by name.
impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_kind_is_found_by_its_own_unique_name() {
        for m in MTAS {
            assert_eq!(Mta::named(m.name()), Some(*m));
            assert_eq!(MTAS.iter().filter(|o| o.name() == m.name()).count(), 1);
        }
        for s in STORES {
            assert_eq!(Store::named(s.name()), Some(*s));
            assert_eq!(STORES.iter().filter(|o| o.name() == s.name()).count(), 1);
        }
        assert_eq!(Mta::named("courier"), None);
        assert_eq!(Store::names(), "dovecot|cyrus");
        assert_eq!(postfix::KIND.name(), "postfix");
    }

    #[test]
    fn a_refusal_names_the_labs_that_declare_the_feature_in_registry_order() {
        assert_eq!(Mta::having(|f| f.multilog), "--lab qmail");
        assert_eq!(Mta::having(|f| f.logging_off), "--lab postfix and qmail");
        assert_eq!(
            Mta::having(|_| true),
            "--lab postfix, exim, opensmtpd, sendmail and qmail"
        );
        assert_eq!(Mta::having(|_| false), "no lab MTA");
        assert_eq!(Mta::having_as("--mta", |f| f.lmtp_onward), "--mta postfix");
        assert_eq!(Mta::first_having(|f| f.lmtp_onward), Some(postfix::KIND));
    }

    #[test]
    fn the_labs_that_take_each_fault_are_the_ones_their_files_declare() {
        assert_eq!(
            Mta::having(|f| f.crash),
            "--lab postfix, exim, opensmtpd, sendmail and qmail"
        );
        assert_eq!(
            Mta::having(|f| f.power_loss),
            "--lab postfix, exim, opensmtpd and sendmail"
        );
        assert_eq!(Mta::having(|f| f.disk_full), "--lab postfix and exim");
    }

    /// A server whose only log is `log`.
    struct OneLog(PathBuf);

    impl LabServer for OneLog {
        fn pids(&self) -> Vec<u32> {
            Vec::new()
        }
        fn logs(&self) -> Vec<PathBuf> {
            vec![self.0.clone()]
        }
        fn dirs(&self) -> Vec<PathBuf> {
            Vec::new()
        }
        fn notices(&self) -> &[String] {
            &[]
        }
        fn describe(&self) -> Vec<String> {
            Vec::new()
        }
        fn certificate(&self) -> Option<PathBuf> {
            None
        }
    }

    /// A store's log is 0600; its copy beside the results is 0644 like the maillog's.
    #[test]
    fn a_kept_log_is_readable_like_the_maillog_whatever_the_servers_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mailbench-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("store.log");
        std::fs::write(&log, "line\n").expect("write log");
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let kept = OneLog(log).keep_logs(&dir.join("r.json"), "storelog");
        let to = dir.join("r.storelog.0");
        assert_eq!(kept, vec![to.display().to_string()]);
        let mode = std::fs::metadata(&to)
            .expect("kept copy")
            .permissions()
            .mode()
            & 0o777;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(mode, 0o644, "expected the copy 0644, got {mode:o}");
    }
}
