//! What is sent: message content prepared once (`template`), the per-message trace header
//! (`trace`), envelope address templates (`address`), Postal-format user lists (`users`),
//! and DKIM signing per message (`dkim`).

pub mod address;
pub mod dkim;
pub mod template;
pub mod trace;
pub mod users;
