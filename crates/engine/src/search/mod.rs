//! Searching for a capacity: run a workload at one level after another and let each
//! step's verdict choose the next. `sweep` tries a fixed list of levels (concurrency
//! sweeps); `find_max` doubles a rate while the system keeps up, then bisects between the
//! last level it sustained and the first it did not. What "kept up" means is the caller's:
//! the relay judges the rate injected and the rate delivered against the rate offered,
//! loss, failures, latency and backlog (`relay::verdict`), and the mailbox workloads' ramp
//! to one second of response time will judge theirs. Nothing here runs or measures.

pub mod find_max;
pub mod sweep;

pub use find_max::FindMax;
pub use sweep::Sweep;
