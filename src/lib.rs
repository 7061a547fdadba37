//! mailbench — a benchmark suite for mail servers.
//!
//! Layout, in the direction data flows (CLI → plan → engine → stats → outputs):
//!
//! - `cli`      flags (`args`), validation into plans (`send`), outputs and exit codes
//!   (`finish`). Nothing below it sees a raw flag.
//! - `send`     the load generator: `plan` (validated run), `schedule` (budget × pacing,
//!   open-loop intended start times), `workload` (what each message is), `worker` (one
//!   connection slot).
//! - `smtp`     the wire layer shared by every command: `proto` is sans-IO (replies,
//!   capabilities, dot-stuffing, the client session state machine); `conn` is the only code
//!   that touches client sockets; `tls`; `target`.
//! - `message`  content prepared once, the trace header, address templates, user lists.
//! - `stats`    recorders, sharded collection, the time series and the results schema.
//! - `report`   text summary, live progress, CSV, thresholds.
//! - `shutdown` Ctrl-C / SIGTERM in two stages; `limits` raises RLIMIT_NOFILE; `error` the
//!   shared failure classes.

pub mod cli;
pub mod error;
pub mod limits;
pub mod message;
pub mod report;
pub mod send;
pub mod shutdown;
pub mod smtp;
pub mod stats;
