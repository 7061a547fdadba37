//! The SMTP wire layer shared by every command: the sans-IO protocol core (`proto`), the
//! client's socket driver (`conn`), and its phases as statistics steps (`steps`). Streams, targets, TLS and listeners are the
//! protocol-neutral `transport`.

pub mod conn;
pub use mailbench_wire::smtp::proto;
pub mod steps;
