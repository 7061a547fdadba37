//! The protocol-neutral transport every protocol shares: the byte stream (`stream`), where
//! to connect (`target`) and how (`connect`), a client link's timed I/O and its failures
//! (`link`), how long a connection waits for its server (`patience`, on the process's
//! alarm clock), what a client read and has not decoded yet (`inbox`), which mail
//! protocol a server's greeting speaks (`greeting`),
//! where to listen and accepting (`listen`), TLS set-up and upgrades for both sides
//! (`tls`), the bytes a run's client connections moved each way (`count`: loopback
//! keeps no per-process byte count), and a link between two hops made slower on purpose
//! (`shape` says how, `shaper` relays the bytes so: this kernel has no netem).

pub mod connect;
pub mod count;
pub mod greeting;
pub mod inbox;
pub mod link;
pub mod listen;
pub mod patience;
pub mod shape;
pub mod shaper;
pub mod stream;
pub mod target;
pub mod tls;
