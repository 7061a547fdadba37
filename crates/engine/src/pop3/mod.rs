//! POP3 (RFC 1939, with CAPA, PIPELINING, STLS and AUTH PLAIN): the sans-IO core
//! (`proto`), the client's socket driver (`conn`), and its phases as statistics steps
//! (`steps`). The mailbox workloads drive it.

pub mod conn;
pub use mailbench_wire::pop3::proto;
pub mod steps;
