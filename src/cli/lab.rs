//! `mailbench lab`: a disposable lab MTA for manual use until Ctrl-C, and the lab flags
//! `relay --lab` shares with it.

use std::net::SocketAddr;

use super::args::{LabArgs, LabKind, LabShape, QueueArg};
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::lab::{LabError, LabOptions, Mta, QueueKind};
use crate::shutdown::Shutdown;
use crate::transport::target::parse_tcp;

/// The MTA a `--lab`/`lab` flag names.
pub fn mta(kind: LabKind) -> Mta {
    match kind {
        LabKind::Postfix => Mta::Postfix,
    }
}

/// The lab's options from its flags; it relays to `relay`.
pub fn options(shape: &LabShape, relay: SocketAddr, starttls: bool) -> Result<LabOptions, String> {
    let settings = shape
        .postconf
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| {
                    format!("--postconf {kv:?}: write key=value, e.g. default_process_limit=100")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if shape.hops == 0 || shape.hops > 8 {
        return Err("--hops must be between 1 and 8".into());
    }
    Ok(LabOptions {
        hops: shape.hops,
        queue: match shape.queue {
            QueueArg::Tmpfs => QueueKind::Tmpfs,
            QueueArg::Disk => QueueKind::Disk,
        },
        settings,
        relay,
        starttls,
    })
}

/// Runs `lab`: start, print where it listens, wait for Ctrl-C or SIGTERM, clean up.
pub async fn lab(a: LabArgs) -> Result<u8, (u8, String)> {
    let relay = parse_tcp(&a.relay, 2525, "--relay").map_err(|e| (EXIT_USAGE, e))?;
    let opts = options(&a.shape, relay, a.starttls).map_err(|e| (EXIT_USAGE, e))?;
    let mta = mta(a.kind);
    mta.check().map_err(|e| (EXIT_USAGE, e))?;
    let shutdown = Shutdown::install_saying(
        "mailbench lab: stopping the lab MTA and removing its directories",
    );
    let lab = match tokio::task::spawn_blocking(move || mta.start(&opts)).await {
        Ok(Ok(lab)) => lab,
        Ok(Err(e @ LabError::Setting(_))) => return Err((EXIT_USAGE, e.to_string())),
        Ok(Err(e)) => return Err((EXIT_FAILED, e.to_string())),
        Err(e) => return Err((EXIT_FAILED, e.to_string())),
    };
    let mut text = String::new();
    for n in lab.notices() {
        text += &format!("notice: {n}\n");
    }
    for line in lab.describe() {
        text += &format!("{line}\n");
    }
    if let Some(cert) = lab.certificate() {
        text += &format!("  STARTTLS certificate {} (for --tls-ca)\n", cert.display());
    }
    text += &format!(
        "relaying to {relay}; inject into {}; Ctrl-C stops and removes everything\n",
        lab.entry()
    );
    crate::report::print(&text);
    shutdown.stop.cancelled().await;
    drop(lab);
    Ok(EXIT_OK)
}
