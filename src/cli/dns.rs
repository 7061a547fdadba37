//! `DnsArgs` → validated `DnsPlan`, and the run: bind, serve, report.

use std::net::SocketAddr;
use std::sync::Arc;

use super::args::DnsArgs;
use super::exit::EXIT_USAGE;
use super::finish::deliver;
use super::plan::dns::{faults, synthetic};
use super::plan::output::{self, OutputPlan};
use crate::dns::answer::Responder;
use crate::dns::{DnsPlan, server::Sockets};
use crate::shutdown::Shutdown;

/// Validates the flags of `dns`; `threads` (`--threads`) serve each UDP socket.
pub fn plan(a: &DnsArgs, threads: u16) -> Result<(DnsPlan, OutputPlan), String> {
    let listen = a
        .listen
        .iter()
        .map(|l| {
            l.parse::<SocketAddr>().map_err(|_| {
                format!("--listen {l:?}: not an address; write host:port, e.g. 127.0.0.1:5353 or [::1]:5353")
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let addresses = crate::transport::target::parse_ips(
        &a.mx_address,
        "--mx-address",
        "addresses for the MX hosts, e.g. 127.0.2.1,::1",
    )?;
    let mut responder = Responder::default();
    let spec = match &a.domains {
        Some(d) => {
            let s = synthetic(d, addresses, &a.zone)?;
            s.build(&mut responder.authority)?;
            Some(s)
        }
        None => None,
    };
    for f in &a.zone_file {
        let text = std::fs::read(f)
            .map_err(|e| format!("--zone-file {}: cannot read it: {e}", f.display()))?;
        responder
            .authority
            .load_zone_file(&text, &f.display().to_string())?;
    }
    if responder.authority.zone_count() == 0 {
        return Err("nothing to serve: give --domains SPEC (e.g. 'd{1..50}.example.test') or --zone-file FILE".into());
    }
    responder.faults = faults("--rule", &a.rule)?;
    let (outputs, progress) = output::plan(&a.out, None, &crate::dns::THRESHOLDS)?;
    let config_json = serde_json::json!({
        "listen": listen.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
        "domains": spec.as_ref().map(|s| s.domains.len()),
        "domain_spec": a.domains,
        "mx_per_domain": a.zone.mx_per_domain,
        "no_mx": a.zone.no_mx,
        "mx_addresses": spec.as_ref().map(|s| &s.addresses),
        "ttl_s": spec.as_ref().map(|s| s.ttl),
        "dkim_selector": spec.as_ref().and_then(|s| s.dkim.as_ref().map(|d| &d.0)),
        "zone_files": a.zone_file,
        "zones": responder.authority.zone_count(),
        "names": responder.authority.name_count(),
        "rules": responder.faults.rules,
        "threads": threads,
    });
    let plan = DnsPlan {
        listen,
        responder: Arc::new(responder),
        query_log: a.query_log.clone(),
        threads: usize::from(threads),
        duration: a
            .duration
            .as_deref()
            .map(crate::units::duration)
            .transpose()
            .map_err(super::plan::flagged("--duration"))?,
        progress,
        config_json,
    };
    Ok((plan, outputs))
}

/// Runs `dns` and reports.
pub async fn dns(plan: DnsPlan, outputs: OutputPlan) -> Result<u8, (u8, String)> {
    // Up to MAX_TCP connections, beside the sockets.
    crate::limits::raise_nofile();
    // An address that cannot be had is bad input: the fix is another --listen.
    let sockets = Sockets::bind(&plan.listen).await.map_err(|e| {
        (
            EXIT_USAGE,
            format!("--listen: {e}; is another server on that port? give another address"),
        )
    })?;
    let addrs: Vec<String> = sockets
        .local_addrs()
        .iter()
        .map(|a| a.to_string())
        .collect();
    let addrs = addrs.join(", ");
    let zones = plan.responder.authority.zone_count();
    // Tests and scripts wait for this line (the port may have been 0).
    crate::run::live::say(&format!(
        "mailbench dns: serving {zones} zone{} on {addrs} (udp and tcp)",
        if zones == 1 { "" } else { "s" }
    ));
    let shutdown = Shutdown::install();
    let results = crate::dns::run(plan, sockets, shutdown)
        .await
        .map_err(|e| (EXIT_USAGE, e))?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench dns: {} questions on {addrs} over {:.2} s",
            r.counters.sent, r.duration_s
        );
        crate::report::text::summary(r, &headline)
    })
}
