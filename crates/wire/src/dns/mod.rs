//! The test DNS server's sans-IO core: zones (`zone`) built from a synthetic spec (`spec`)
//! or read from zone files (`zonefile`, with the words of `token` and each type's
//! `rdata`), fault rules (`faults`), the responder that answers a packet (`answer`) and
//! the cache of its replies (`cache`). The sockets and the counting are the engine's.

pub mod answer;
pub mod cache;
pub mod faults;
pub mod rdata;
pub mod spec;
pub mod token;
pub mod zone;
pub mod zonefile;
