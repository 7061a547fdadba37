//! IMAP as bytes and states (`proto`), and the model that checks a session's answers
//! against each other and against other sessions' (`state`).

pub mod proto;
pub mod state;
