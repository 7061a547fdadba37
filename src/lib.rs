//! mailbench — a benchmark suite for mail servers.
//!
//! Layout, in the direction data flows (CLI → plan → engine → stats → outputs):
//!
//! - `cli`      flags (`args`), validation into plans (`send`), outputs and exit codes
//!   (`finish`). Nothing below it sees a raw flag.
//! - `send`     the load generator: `plan` (validated run), `schedule` (budget × pacing,
//!   open-loop intended start times), `workload` (what each message is), `worker` (one
//!   connection slot).
//! - `relay`    send → MTA under test → sink in one process: drain, delivery rate, backlog,
//!   loss; `lab` starts disposable real MTAs (Postfix) for it.
//! - `sink`     the receiver: `conn` (one connection over the server session), `faults`
//!   (injected misbehaviour), `store` (discard, maildir, mbox, files), `correlate` (trace
//!   headers: end-to-end latency, loss, duplicates), `plan`.
//! - `smtp`     the wire layer shared by every command: `proto` is sans-IO (replies,
//!   capabilities, dot-stuffing, the client and server session state machines); `conn`
//!   drives the client, `stream` is the byte stream both sides share; `tls`; `target`.
//! - `message`  content prepared once, the trace header, address templates, user lists.
//! - `stats`    recorders, sharded collection, the time series and the results schema.
//! - `report`   text summary, live progress, CSV, thresholds.
//! - `shutdown` Ctrl-C / SIGTERM in two stages; `limits` raises RLIMIT_NOFILE; `error` the
//!   shared failure classes.

pub mod cli;
pub mod error;
pub mod lab;
pub mod limits;
pub mod message;
pub mod relay;
pub mod report;
pub mod send;
pub mod shutdown;
pub mod sink;
pub mod smtp;
pub mod stats;
