//! POP3 as bytes and states.

pub mod proto;
