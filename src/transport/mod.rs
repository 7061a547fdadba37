//! The protocol-neutral transport every protocol shares: the byte stream (`stream`), where
//! to connect (`target`) and how (`connect`), where to listen and accepting (`listen`), and
//! TLS set-up and upgrades for both sides (`tls`).

pub mod connect;
pub mod listen;
pub mod stream;
pub mod target;
pub mod tls;
