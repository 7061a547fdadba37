//! The store's network use as the sampler reads it: the byte tally the workload's client
//! connections keep (transport's), handed to the sampler (which knows only stats) as a
//! reading of bytes into and out of the store.

use std::sync::Arc;

use crate::run::sampler::NetRead;
use crate::stats::sut::NetBytes;
use crate::transport::count::NetTally;

/// Reads `tally` as bytes into the store (what the clients wrote) and out of it (read).
pub fn reader(tally: &NetTally) -> NetRead {
    let tally = tally.clone();
    Arc::new(move || {
        let (read, written) = tally.totals();
        NetBytes {
            into_store: written,
            out_of_store: read,
        }
    })
}
