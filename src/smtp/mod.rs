//! The SMTP wire layer shared by every command: the sans-IO protocol core (`proto`), the
//! socket driver (`conn`), the byte stream both sides share (`stream`), TLS set-up (`tls`) and target addresses (`target`).

pub mod conn;
pub mod proto;
pub mod stream;
pub mod target;
pub mod tls;
