//! SMTP and LMTP as bytes and states (`proto`); the engine's `smtp::conn` drives them.

pub mod proto;
