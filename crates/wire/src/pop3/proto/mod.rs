//! The sans-IO POP3 core: responses and their decoder (`reply`), and the client session
//! (`client`). Nothing here does IO or reads a clock; `crate::pop3::conn` drives it.

pub mod client;
pub mod reply;

pub use client::{Command, Phase, Pop3Client, Pop3Error, apop_digest, capabilities, stat_count};
pub use reply::{Body, Response};
