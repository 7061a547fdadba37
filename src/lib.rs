//! mailbench — a benchmark suite for mail servers.
//!
//! Data flows one way: CLI → plan → engine → stats → outputs. The modules, in layers from
//! the bottom up; a module imports only from layers below it (a test reads the tree and
//! checks that):
//!
//! - foundation, imports nothing above it:
//!   - `error`     the failure classes shared by statistics and reports.
//!   - `units`     durations, sizes, rates and counts as people write them.
//!   - `sasl`      SASL PLAIN and LOGIN, for every protocol (sans-IO).
//!   - `transport` what every protocol runs on: streams, targets, connecting, listening, TLS.
//!   - `search`    capacity searches (`sweep`, `find_max`), judged by their caller.
//!   - `stats`     protocol-neutral statistics: metrics (a protocol names its steps),
//!     recorders, sharded collection, the series, typed summaries and the results file,
//!     the system under test and its machine read from /proc (`sut`, `host`).
//!   - `limits`    raising RLIMIT_NOFILE; whether this process is root.
//!   - `doctor`    what on this machine would distort a run (descriptors, ports,
//!     conntrack, tmpfs, CPU scaling and steal, swap), each with its fix.
//! - the run: `run` (the skeleton every engine shares: ticks, live view, self CPU) and
//!   `shutdown` (Ctrl-C / SIGTERM in two stages).
//! - protocols and what they carry: `smtp` (`proto` is the sans-IO core: replies,
//!   capabilities, dot-stuffing, the client and server state machines; `conn` drives the
//!   client; `steps` names its phases for the statistics), `pop3` (the same three parts
//!   for POP3's client), `message` (content prepared once, the trace header, address
//!   templates, user lists, DKIM signing), `lab` (disposable real servers: MTAs that relay,
//!   `postfix`, and `exim`, `opensmtpd`, `sendmail` unpacked beside it, sharing `chain`
//!   and run in their own namespaces by `isolate`; and mail stores that users read,
//!   `dovecot`).
//! - `load`: the load engine — schedule, budget, workers over a protocol's driver.
//! - the parts: `send` (the SMTP driver for `load`, its plan and workload), `sink` (the
//!   receiver: connections, faults, storage, bounces, correlation, deliveries, DKIM
//!   verification).
//! - `dns`: the test DNS server — synthetic zones or zone files, fault rules, a sans-IO
//!   responder with a reply cache, UDP and TCP sockets, counters into the shared results.
//! - `relay`: send → MTA under test → sink in one process: the benchmark, its runs (a
//!   warm-up first, a flush's release), the drain, the combined results, the capacity
//!   search's verdict; with `--dns-domains`, the test DNS server the lab MTA resolves through.
//! - `mailbox`: mail-store workloads — filling mailboxes over LMTP (with `send`), POP3
//!   sessions (a driver for `load`), on a lab store when asked.
//! - `report`: the output stage — text summary, CSV, thresholds, the HTML report, the
//!   comparison of runs with its noise test, rounds kept as one — from results only.
//! - `cli`: flags (`args`), validation into plans, and the end of every command (`finish`).

pub mod cli;
pub mod dns;
pub mod doctor;
pub mod error;
pub mod imap;
pub mod lab;
pub mod limits;
pub mod load;
pub mod mailbox;
pub mod message;
pub mod pop3;
pub mod relay;
pub mod report;
pub mod run;
pub mod sasl;
pub mod search;
pub mod send;
pub mod shutdown;
pub mod sink;
pub mod smtp;
pub mod stats;
pub mod transport;
pub mod units;
