//! Disposable real MTAs for benchmarks: `postfix` (more later). Each lab is started for a
//! run and cleaned up after it, whatever happens.

pub mod postfix;
