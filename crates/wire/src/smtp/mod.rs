//! SMTP and LMTP as bytes and states.

pub mod proto;
