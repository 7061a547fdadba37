//! The network between one lab MTA and the next of a `--hops` chain: loopback, or a link
//! shaped as `--link mta-mta:…` says (issue 43: seed 000 put its relays a network apart).

use std::net::SocketAddr;

use super::{LabError, LabOptions};
use crate::transport::shaper::Shaper;

/// Where the instance before hop `n` relays to, now that hop `n` listens at `entry`: the
/// entry itself, or a shaped link in front of it (kept in `links` as long as the lab
/// runs). The first hop has none before it.
pub(super) fn reached_at(
    entry: SocketAddr,
    n: u8,
    opts: &LabOptions,
    links: &mut Vec<Shaper>,
) -> Result<SocketAddr, LabError> {
    let Some(shape) = opts.between.filter(|_| n > 0) else {
        return Ok(entry);
    };
    // A lab starts on a blocking thread of the run's runtime, where the link's tasks run.
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
        LabError::Failed("--link mta-mta: the link is started on a runtime; none runs here".into())
    })?;
    let link = runtime
        .block_on(Shaper::start(entry, shape))
        .map_err(|e| LabError::Failed(format!("--link mta-mta: cannot listen on loopback: {e}")))?;
    let at = link.addr();
    links.push(link);
    Ok(at)
}
