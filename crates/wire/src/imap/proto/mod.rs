//! The sans-IO IMAP core: where a response ends (`frame`), what it says (`response`, with
//! `fetch_scan` reading the common FETCH in one pass, both building `fetch`'s types), the
//! client session that tags commands and matches completions (`client`), which
//! commands may be in flight together (`pipeline`), and the octet helpers both readers
//! share (`octets`). `response_corpus` pins the parser's answers to recorded Dovecot
//! sessions. Nothing here does IO or reads a clock; the engine's `imap::conn` drives it.

pub mod client;
mod fetch;
mod fetch_scan;
pub mod frame;
mod octets;
pub mod pipeline;
pub mod response;
#[cfg(test)]
mod response_corpus;

pub use client::{
    Command, Completion, DELETED, Event, FetchItems, FlagOp, ImapClient, ImapError, Phase, Section,
};
pub use response::{Code, Cond, Data, Fetch, Part, Words};
