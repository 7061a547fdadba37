//! What is sent: message content prepared once (`template`), the per-message trace header
//! (`trace`), envelope address templates (`address`) and Postal-format user lists (`users`).

pub mod address;
pub mod template;
pub mod trace;
pub mod users;
