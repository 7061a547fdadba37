//! DNS in the relay benchmark (`--dns-domains`): the embedded sink listens on several
//! loopback addresses (127.0.2.1, .2, ...) at one port, the embedded DNS server serves
//! the synthetic domains whose MX hosts resolve to those addresses on port 53 of
//! 127.53.0.x (resolvers know no other port), and the lab MTA resolves through it from its
//! own chroot. Each run takes the server's counts apart: questions per delivered message
//! by type, the server's answer times, the rules that fired.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use crate::dns::answer::Responder;
use crate::dns::faults::{Faults, QClass};
use crate::dns::server::{Running, Sockets};
use crate::dns::shared::Shared;
use crate::dns::spec::Synthetic;
use crate::stats::Results;
use crate::stats::hist::ms;
use crate::stats::summary::Summary;
use crate::stats::{Metric, Recorder};
use crate::transport::listen::{Listen, Listener, bind};

/// What `--dns-domains` asks of a relay.
#[derive(Debug, Clone)]
pub struct RelayDns {
    /// The zones (their MX addresses are filled in with the sink's when it listens).
    pub zones: Synthetic,
    /// Fault rules.
    pub faults: Faults,
    /// How many sink addresses.
    pub sinks: u8,
}

/// The sink's addresses: 127.0.2.1 and up (to .254: `--dns-sinks` stops there).
fn sink_ip(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 2, i.saturating_add(1)))
}

/// Descriptors kept free beside the sink's listeners: the MTA's delivery connections
/// (Postfix's default process limit is 100), the generator's and the lab's own files.
const SPARE_FILES: u64 = 256;

/// Whether `n` sink listeners and their connections fit in this process's open files
/// (raised to the hard limit first), before anything starts: one line naming the fix.
pub fn files_for_sinks(n: u8) -> Result<(), String> {
    fits(n, crate::limits::raise_nofile())
}

/// Whether `n` sink listeners and their connections fit in `nofile` open files; the
/// error names the limit and the fix.
fn fits(n: u8, nofile: u64) -> Result<(), String> {
    let need = u64::from(n) + SPARE_FILES;
    if nofile < need {
        return Err(format!(
            "--dns-sinks {n}: {n} listening addresses and their connections need {need} open files, the limit is {nofile}; raise it (ulimit -n {need}) or give fewer --dns-sinks"
        ));
    }
    Ok(())
}

/// Binds the sink on `n` addresses at one free port (tried again on another port when
/// one address has it taken). Returns the listeners and what to bind again for later runs.
pub async fn bind_sinks(n: u8) -> Result<(Vec<Listener>, Vec<Listen>), String> {
    let mut last = String::new();
    for _ in 0..5 {
        let first = bind(&[Listen::Tcp(SocketAddr::new(sink_ip(0), 0))]).await?;
        let port = match first.first() {
            Some(Listener::Tcp(t)) => t.local_addr().map_err(|e| e.to_string())?.port(),
            _ => return Err("the sink did not bind".into()),
        };
        let all: Vec<Listen> = (0..n)
            .map(|i| Listen::Tcp(SocketAddr::new(sink_ip(i), port)))
            .collect();
        match bind(&all[1..]).await {
            Ok(rest) => return Ok((first.into_iter().chain(rest).collect(), all)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The running DNS server of a relay benchmark.
pub struct Embedded {
    running: Running,
    /// Where it answers (port 53).
    pub resolver: IpAddr,
    rules: Vec<String>,
}

/// Starts the server for `zones` over the sink addresses `sinks`, on port 53 of the first
/// free one of 127.53.0.1..16.
pub async fn start(plan: &RelayDns, sinks: &[Listen]) -> Result<Embedded, String> {
    let mut zones = plan.zones.clone();
    zones.addresses = sinks
        .iter()
        .filter_map(|l| match l {
            Listen::Tcp(a) => Some(a.ip()),
            Listen::Unix(_) => None,
        })
        .collect();
    let mut responder = Responder {
        faults: plan.faults.clone(),
        ..Responder::default()
    };
    zones.build(&mut responder.authority)?;
    let mut last = String::new();
    for i in 1..=16 {
        let resolver = IpAddr::V4(Ipv4Addr::new(127, 53, 0, i));
        match Sockets::bind(&[SocketAddr::new(resolver, 53)]).await {
            Ok(sockets) => {
                let shared = Arc::new(Shared::new(Arc::new(responder), Instant::now(), None));
                return Ok(Embedded {
                    running: Running::start(sockets, shared, 1)?,
                    resolver,
                    rules: plan.faults.rules.iter().map(|r| r.spec.clone()).collect(),
                });
            }
            Err(e) => last = e,
        }
    }
    Err(format!(
        "the test DNS server found no free port 53 on 127.53.0.1-16 ({last}); it needs root (the lab does too)"
    ))
}

impl Embedded {
    /// Forgets what was counted so far: the next run starts from zero.
    pub fn begin(&self) {
        let _ = self.running.shared.take();
    }

    /// Puts what the server counted since [`Embedded::begin`] into a run's results:
    /// the summary's `dns_*` keys and `extra.dns` (with questions per delivered message and
    /// per delivered recipient, by type). `deferred` is what the MTA's log blamed on DNS.
    pub fn finish(&self, r: &mut Results, deferred: Option<u64>) {
        let (tally, rec) = self.running.shared.take();
        let mut report = tally.report(&self.rules);
        let Summary::Relay(s) = &mut r.summary else {
            return;
        };
        let per = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let (messages, recipients) = (s.delivered_messages, s.delivered);
        let by = |of: u64| -> Value {
            QClass::ALL
                .iter()
                .map(|c| {
                    (
                        c.name().to_string(),
                        json!(round3(per(tally.class(*c), of))),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        report["per_message"] = by(messages);
        report["per_recipient"] = by(recipients);
        report["latency_p50_ms"] = json!(latency(&rec, 0.5));
        report["latency_p99_ms"] = json!(latency(&rec, 0.99));
        report["mta_deferred"] = json!(deferred);
        s.dns_queries = Some(tally.questions());
        s.dns_queries_per_message = Some(round3(per(tally.questions(), messages)));
        s.dns_p50_ms = Some(latency(&rec, 0.5));
        s.dns_p99_ms = Some(latency(&rec, 0.99));
        s.dns_deferred = deferred;
        r.extra.insert("dns".into(), report);
    }

    /// Stops the server.
    pub async fn stop(self) {
        self.running.stop().await;
    }
}

fn latency(rec: &Recorder, q: f64) -> f64 {
    ms(rec.hist(Metric::Total), q)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_254th_sink_is_127_0_2_254_and_the_open_files_must_hold_them() {
        assert_eq!(sink_ip(253), IpAddr::V4(Ipv4Addr::new(127, 0, 2, 254)));
        assert_eq!(fits(254, 510), Ok(()));
        let e = fits(254, 509).expect_err("one file short");
        assert!(
            e.starts_with("--dns-sinks 254:")
                && e.contains("need 510")
                && e.contains("ulimit -n 510"),
            "{e}"
        );
    }
}
