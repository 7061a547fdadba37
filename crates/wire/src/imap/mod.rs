//! IMAP as bytes and states, and the model that checks a session's answers against each
//! other.

pub mod proto;
pub mod state;
