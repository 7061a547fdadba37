//! `relay`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::dns::ZoneArgs;
use super::lab::{LabShape, mta_parser};
use super::load::LoadArgs;
use crate::lab::Mta;

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const RELAY_EXAMPLES: &str = "\
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
drain_mpm, delivery_per_sec, e2e_p50_ms, e2e_p99_ms, max_backlog, drained ('drained==1'
makes a good threshold). A run that lost mail (accepted, neither delivered nor bounced
within --drain-timeout) exits 2; --find-max excepted, whose failing steps lose by design.
Lab runs need root and Postfix (scripts/install-deps.sh); Exim, OpenSMTPD and Sendmail
are unpacked, and qmail built, beside it by scripts/install-deps.sh --mtas.";

/// Flags of `mailbench relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Start a disposable MTA for the run. Several (`postfix,exim,opensmtpd,sendmail,qmail`)
    /// compare them: the same workload against each in turn, in rounds (at least 4; more
    /// with --rounds) whose order rotates, ending with one table.
    #[arg(
        long,
        value_parser = mta_parser(|_| true),
        value_delimiter = ',',
        value_name = "MTA[,MTA…]",
        conflicts_with = "target"
    )]
    pub lab: Vec<Mta>,
    /// Answer "what did this setting buy": run the lab with KEY=V1, KEY=V2, … (2 to 8
    /// values) in rotating rounds (at least 4 each; more with --rounds) and end with the
    /// compare table, the first value the baseline, e.g. default_process_limit=100,20,5.
    /// Repeated with other keys, every combination runs (at most 8), the first key's
    /// values outermost.
    #[arg(long, value_name = "KEY=V1,V2[,…]", requires = "lab")]
    pub compare_postconf: Vec<String>,
    /// The MTA under test (when not using --lab).
    #[arg(
        long,
        value_name = "HOST:PORT",
        required_unless_present = "lab",
        conflicts_with = "lab"
    )]
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
    /// The embedded sink's faults from a TOML file, as `sink --rules`.
    #[arg(long, value_name = "FILE")]
    pub sink_rules: Option<std::path::PathBuf>,
    /// The embedded sink greylists new (client IP, sender, recipient) triples this long, as
    /// `sink --greylist`: the MTA's retries are measured.
    #[arg(long, value_name = "DURATION")]
    pub sink_greylist: Option<String>,
    /// The embedded sink delays every reply this much, as `sink --tarpit`.
    #[arg(long, value_name = "DURATION")]
    pub sink_tarpit: Option<String>,
    /// The embedded sink answers 421 to connections from one IP beyond N at once, as
    /// `sink --max-conns-per-ip` (seed 003's receiver).
    #[arg(long, value_name = "N")]
    pub sink_max_conns_per_ip: Option<String>,
    /// The embedded sink answers 421 to the MAIL after N messages on a connection, as
    /// `sink --max-msgs-per-conn`.
    #[arg(long, value_name = "N")]
    pub sink_max_msgs_per_conn: Option<String>,
    /// The embedded sink answers 451 to messages beyond this rate per client IP, as
    /// `sink --rate-per-ip`.
    #[arg(long, value_name = "RATE")]
    pub sink_rate_per_ip: Option<String>,
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
    /// Sink addresses (127.0.2.1, .2, ... up to .254) the MX hosts are spread over, so
    /// that the MTA's per-destination limits apply as with real receivers (seed 002's 254).
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=254))]
    pub dns_sinks: u8,
    /// DNS fault rule (repeatable), as `mailbench dns --rule`: e.g. 'mx:delay=200ms:10%',
    /// 'a:servfail:5%', 'mx:servfail:100%:until=5s'.
    #[arg(long, value_name = "RULE")]
    pub dns_rule: Vec<String>,
    /// The synthetic zones' details.
    #[command(flatten)]
    pub dns_zone: ZoneArgs,
    /// Shape a hop's network (repeatable; this kernel has no netem): HOP:delay=D[:jitter=D]
    /// [:rate=SIZE], each way, with HOP `mta` (mailbench to the MTA), `sink` (the MTA to
    /// the sink) or `mta-mta` (each lab MTA to the next, with --hops); a delay and jitter
    /// with their unit, 10 s at most. A round trip across a
    /// hop takes twice its delay more: e.g.
    /// mta:delay=50ms adds 50 ms to the banner and 100 ms to EHLO; sink:rate=1M caps the
    /// deliveries at 1 MiB/s each way.
    #[arg(long, value_name = "HOP:SHAPE")]
    pub link: Vec<String>,
    /// Longest wait for deliveries after injection (a bare number is seconds); what has
    /// not arrived is lost.
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    pub drain_timeout: String,
    /// Before each level of a sweep (or step of --find-max), run the same load this long,
    /// drain it and leave it out of the level's figures (shown apart in its row's
    /// `settle`). A bare number is seconds (--settle 5 is 5 s).
    #[arg(long, value_name = "DURATION")]
    pub settle: Option<String>,
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
    /// Crash the lab MTA during the run and restart it on the same queue (issue 42):
    /// crash@N kills its whole process tree (SIGKILL) after N accepted messages, crash@3s
    /// at a time; power-loss@… puts its queue on LazyFS and also drops what was not
    /// fsynced. Every accepted message is then judged delivered, lost or duplicated.
    /// disk-full@… puts the queue on a small ext4 image on a loop device
    /// (--queue-fs-size) and fills it for --fault-hold, then frees it: the MTA's 4xx
    /// replies meanwhile are counted and quoted.
    /// Lab MTAs only: crash on --lab postfix, exim, opensmtpd, sendmail or qmail,
    /// power-loss on postfix, exim, opensmtpd or sendmail, disk-full on postfix or exim.
    #[arg(long, value_name = "KIND@WHEN")]
    pub fault: Option<String>,
    /// With --fault disk-full: the size of the queue's file system (an ext4 image on a
    /// loop device; 32M to 1024M, default 64M).
    #[arg(long, value_name = "SIZE")]
    pub queue_fs_size: Option<String>,
    /// With --fault disk-full: how long the disk stays full (default 2s; a signal ends
    /// it sooner).
    #[arg(long, value_name = "DURATION")]
    pub fault_hold: Option<String>,
    /// Observe this process tree as the system under test (repeatable; the lab's own is
    /// observed automatically).
    #[arg(long, value_name = "PID")]
    pub sut_pid: Vec<u32>,
    /// The load.
    #[command(flatten)]
    pub load: LoadArgs,
}
