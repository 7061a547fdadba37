//! mailbench — a benchmark suite for mail servers: SMTP/LMTP load (`send`), a receiver
//! (`sink`), MTAs under test between the two (`relay`), mail stores under POP3 and IMAP
//! users (`mailbox`), and a test DNS server (`dns`); every run ends in one results file
//! that `report`, `compare` and `merge` read.
//!
//! Data flows one way: CLI → plan → engine → stats → outputs. The modules, in layers from
//! the bottom up; a module imports only from layers below it, and no two files import each
//! other (`tests/it/layout.rs` reads the tree and checks both):
//!
//! - foundation, imports nothing above it:
//!   - `alarm`     the process's alarm clock thread: deadlines of waits kept off the
//!     async runtime, so it sleeps without a kernel timer armed.
//!   - `error`     the failure classes shared by statistics and reports.
//!   - `units`     durations, sizes, rates and counts as people write them.
//!   - `sasl`      SASL PLAIN and LOGIN, for every protocol (sans-IO).
//!   - `transport` what every protocol runs on: streams, targets, connecting, client
//!     links, listening, TLS.
//!   - `search`    capacity searches (`sweep`, `find_max`), judged by their caller.
//!   - `stats`     protocol-neutral statistics: metrics (a protocol names its steps),
//!     recorders, sharded collection, the series, typed summaries and the results file,
//!     the system under test and its machine read from /proc (`sut`, `host`), and the
//!     merge of a split run's results (`merge`).
//!   - `limits`    raising RLIMIT_NOFILE; whether this process is root.
//!   - `doctor`    what on this machine would distort a run (descriptors, ports,
//!     conntrack, tmpfs, CPU scaling and steal, swap), each with its fix.
//! - the run: `run` (the skeleton every engine shares: ticks, live view, `/metrics`, the
//!   system under test watched, self CPU; and `rounds`: a run repeated, or variants of it
//!   in rotating turns, a round cut short left out) and `shutdown` (Ctrl-C / SIGTERM in two
//!   stages).
//! - protocols and what they carry: `smtp` (`proto` is the sans-IO core: replies,
//!   capabilities, dot-stuffing, the client and server state machines; `conn` drives the
//!   client; `steps` names its phases for the statistics), `pop3` and `imap` (the same
//!   three parts for their clients; IMAP adds `state`, the checks across commands and
//!   sessions), `message` (content prepared once, the trace header, address templates,
//!   user lists, DKIM signing), `lab` (disposable real servers: MTAs that relay,
//!   `postfix`, and `exim`, `opensmtpd`, `sendmail` unpacked and `qmail` built beside it,
//!   sharing `chain` and run in their own namespaces by `isolate`; mail stores that users
//!   read, `dovecot`, and `cyrus` unpacked beside it; each registered once in `lab::MTAS`
//!   or `lab::STORES`; `leftovers`, the labs of runs that died; and `fs`, file systems
//!   that fail on purpose: a LazyFS mount whose power is cut, a small loop-mounted ext4
//!   that fills up).
//! - `load`: the load engine — schedule, budget, workers over a protocol's driver, a run
//!   split over agents (`shard`).
//! - the parts: `send` (the SMTP driver for `load`, its plan and workload), `sink` (the
//!   receiver: connections, faults, storage, bounces, correlation, deliveries, DKIM
//!   verification), `dns` (the test DNS server — synthetic zones or zone files, fault
//!   rules, a sans-IO responder with a reply cache, UDP and TCP sockets, counters into the
//!   shared results).
//! - `report`: the output stage — text summary, CSV, thresholds, the HTML report, the
//!   comparison of runs with its noise test, rounds kept as one — from results only (the
//!   mailbox profile judges its capacity by the thresholds' rules).
//! - `relay`: send → MTA under test → sink in one process: the benchmark, its runs (a
//!   warm-up first, a flush's release), the drain, the combined results, the capacity
//!   search's verdict; with `--dns-domains`, the test DNS server the lab MTA resolves through.
//! - `mailbox`: mail-store workloads — filling mailboxes over LMTP (with `send`) or IMAP
//!   APPEND, POP3 and IMAP sessions (drivers for `load`), user profiles up to a capacity
//!   (`profile`), arrival over SMTP until visible over IMAP (`arrival`, a relay run whose
//!   receiver is the store), on a lab store and a lab Postfix when asked (`labs`).
//! - `cli`: flags, validation into plans, the commands that compose plans and call the
//!   engines, and the end of every command (`finish`).

pub mod alarm;
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
