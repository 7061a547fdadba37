//! mailbench — a benchmark suite for mail servers: SMTP/LMTP load (`send`), a receiver
//! (`sink`), MTAs under test between the two (`relay`), mail stores under POP3 and IMAP
//! users (`mailbox`), and a test DNS server (`dns`); every run ends in one results file
//! that `report`, `compare` and `merge` read.
//!
//! Data flows one way: CLI → plan → engine → stats → outputs, and the crates follow it:
//!
//! - `mailbench-wire`    the sans-IO wire protocols (SMTP, POP3, IMAP, SASL, the DNS wire
//!   core, LDAP framing) and how people write units; no runtime, fuzzed on its own.
//! - `mailbench-results` statistics, the results file and its summaries, the reports.
//! - `mailbench-engine`  transport, the load engine, sink, relay, mailbox, DNS server,
//!   labs, the run skeleton; its module map is in its own crate docs.
//! - `mailbench` (this crate): `cli`, flags, validation into plans, the commands that
//!   compose plans and call the engines, and the end of every command (`finish`); the
//!   binary, stamped with its commit. Every engine module is re-exported here under its
//!   name, so `mailbench::relay::…` reads as before.

pub mod cli;

pub use mailbench_engine::*;
