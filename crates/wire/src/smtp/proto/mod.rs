//! The sans-IO SMTP/LMTP core. Nothing here does IO or reads a clock; `crate::smtp::conn`
//! and the sink's connections drive it. Replies and their decoder (`reply`), capabilities
//! from EHLO/LHLO (`ehlo`), bodies on the wire (`data`: CRLF and dot-stuffing), the
//! session's phases (`phase`); the client's session (`client`) with its transactions
//! (`txn`) and the bytes it queues (`outbox`); the server's session (`server`) and what it
//! asks of and tells the IO layer (`handler`).

pub mod client;
pub mod data;
pub mod ehlo;
pub mod handler;
pub mod outbox;
pub mod phase;
pub mod reply;
pub mod server;
pub mod txn;

pub use client::{
    ClientConfig, ClientSession, Credentials, SessionError, Step, Transaction, TxnOutcome,
};
pub use phase::Phase;
pub use reply::{Decoded, Reply, ReplyDecoder, ReplyError};
