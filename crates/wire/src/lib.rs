//! mailbench's wire protocols, sans IO: what goes over the wire and what it means, with no
//! socket, file, clock or runtime — so that each is tested (and fuzzed) byte by byte, and
//! the engines that drive them over tokio (the `mailbench-engine` crate) are the only ones
//! doing IO. This crate depends on no async runtime; `tests/it/layout.rs` keeps it so.
//!
//! - `smtp::proto` the SMTP/LMTP core: replies, capabilities, dot-stuffing, the client and
//!   server state machines.
//! - `pop3::proto` the POP3 client: commands, replies, multi-line responses, APOP.
//! - `imap::proto` the IMAP client: framing, responses, FETCH, pipelining; `imap::state`
//!   the checks across commands and sessions (what the server said must stay true).
//! - `sasl`        SASL PLAIN and LOGIN, for every protocol.
//! - `dns`         the DNS wire core: zones answered as RFC 1034 §4.3.2 says, synthetic
//!   zones and zone files, fault rules, a responder with a reply cache.
//! - `ldap`        LDAP's BER framing, enough to count and delay a directory's messages.
//! - `units`       durations, sizes, rates and percentages as people write them (the DNS
//!   fault rules and every command line read them).

pub mod dns;
pub mod imap;
pub mod ldap;
pub mod pop3;
pub mod sasl;
pub mod smtp;
pub mod units;
