//! IMAP4rev1 (RFC 9051's subset that IMAP4rev1 servers share, with LITERAL+, IDLE,
//! STARTTLS and SASL-IR): the sans-IO core (`proto`), the client's socket driver (`conn`),
//! the state checks that compare what the server says across commands and sessions
//! (`state`), and its phases as statistics steps (`steps`). The mailbox workloads drive it.

pub mod conn;
pub use mailbench_wire::imap::proto;
pub use mailbench_wire::imap::state;
pub mod steps;
