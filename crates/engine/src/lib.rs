//! mailbench's engines: the load, the servers, the labs and the runs — everything that does
//! IO. The wire protocols it drives are the sans-IO `mailbench-wire` crate, what it
//! measures goes into the `mailbench-results` crate's statistics; both are re-exported
//! here under their old names (`smtp::proto`, `stats`, …) so that a path reads the same
//! wherever it is written. The command line on top is the `mailbench` crate.
//!
//! The modules, in layers from the bottom up; a module imports only from layers below it,
//! and no two files import each other (`tests/it/layout.rs` reads the tree and checks both):
//!
//! - foundation, imports nothing above it:
//!   - `alarm`     the process's alarm clock thread: deadlines of waits kept off the
//!     async runtime, so it sleeps without a kernel timer armed.
//!   - `transport` what every protocol runs on: streams, targets, connecting, client
//!     links, listening, TLS.
//!   - `search`    capacity searches (`sweep`, `find_max`), judged by their caller.
//!   - `limits`    raising RLIMIT_NOFILE; whether this process is root.
//!   - `doctor`    what on this machine would distort a run (descriptors, ports,
//!     conntrack, tmpfs, CPU scaling and steal, swap), each with its fix.
//! - the run: `run` (the skeleton every engine shares: ticks, live view, `/metrics`, the
//!   system under test watched, self CPU; and `rounds`: a run repeated, or variants of it
//!   in rotating turns, a round cut short left out) and `shutdown` (Ctrl-C / SIGTERM in two
//!   stages).
//! - protocols and what they carry: `smtp` (`conn` drives the wire core's client; `steps`
//!   names its phases for the statistics), `pop3` and `imap` (the same parts for their
//!   clients), `message` (content prepared once, the trace header, address templates,
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
//!   verification), `dns` (the test DNS server's sockets and counters around the wire
//!   core's responder).
//! - `relay`: send → MTA under test → sink in one process: the benchmark, its runs (a
//!   warm-up first, a flush's release), the drain, the combined results, the capacity
//!   search's verdict; with `--dns-domains`, the test DNS server the lab MTA resolves through.
//! - `mailbox`: mail-store workloads — filling mailboxes over LMTP (with `send`) or IMAP
//!   APPEND, POP3 and IMAP sessions (drivers for `load`), user profiles up to a capacity
//!   (`profile`), arrival over SMTP until visible over IMAP (`arrival`, a relay run whose
//!   receiver is the store), on a lab store and a lab Postfix when asked (`labs`).

pub mod alarm;
pub mod dns;
pub mod doctor;
pub mod imap;
pub mod lab;
pub mod limits;
pub mod load;
pub mod mailbox;
pub mod message;
pub mod pop3;
pub mod relay;
pub mod run;
pub mod search;
pub mod send;
pub mod shutdown;
pub mod sink;
pub mod smtp;
pub mod transport;

pub use mailbench_results::{error, report, stats};
pub use mailbench_wire::{sasl, units};
