//! POP3 as bytes and states (`proto`); the engine's `pop3::conn` drives them.

pub mod proto;
