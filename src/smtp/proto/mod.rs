//! The sans-IO SMTP/LMTP core: replies, capabilities, body encoding and session state
//! machines. Nothing here does IO or reads a clock; `crate::smtp::conn` drives it.

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
