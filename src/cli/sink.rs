//! `SinkArgs` → validated `SinkPlan`.

use super::args::SinkArgs;
use super::plan::flagged;
use super::plan::output::{self, OutputPlan};
use super::plan::sink_faults::{FaultFlags, fault_plan};
use crate::message::users;
use crate::sink::faults::{FaultPlan, user_flags};
use crate::sink::plan::SinkPlan;
use crate::sink::store::Store;
use crate::smtp::proto::server::ServerConfig;
use crate::transport::listen::Listen;
use crate::transport::target::{Target, parse_target, parse_tcp};
use crate::units;

/// Validates the flags of `sink`.
pub fn plan(a: &SinkArgs) -> Result<(SinkPlan, OutputPlan), String> {
    let listen = a
        .listen
        .iter()
        .map(
            |l| match parse_target(l, 2525).map_err(flagged("--listen"))? {
                Target::Tcp { addr, .. } => Ok(Listen::Tcp(addr)),
                Target::Unix(p) => Ok(Listen::Unix(p)),
            },
        )
        .collect::<Result<Vec<_>, String>>()?;
    let list = a.users.as_deref().map(users::load).transpose()?;
    let users = list.as_deref().map(user_flags).unwrap_or_default();
    let passwords = match (&list, a.auth_users) {
        (Some(l), true) => Some(
            l.iter()
                .map(|u| {
                    (
                        u.address.to_ascii_lowercase(),
                        u.password.clone().unwrap_or_default(),
                    )
                })
                .collect(),
        ),
        (None, true) => return Err("--auth-users needs --users FILE with passwords".into()),
        _ => None,
    };
    let count = |flag: &'static str, s: &Option<String>| {
        s.as_deref()
            .map(units::count)
            .transpose()
            .map_err(flagged(flag))
    };
    let faults = FaultPlan {
        users,
        passwords,
        ..fault_plan(&FaultFlags {
            rule: &a.rule,
            rules: a.rules.as_deref(),
            greylist: a.greylist.as_deref(),
            tarpit: a.tarpit.as_deref(),
            max_conns_per_ip: a.max_conns_per_ip.as_deref(),
            max_msgs_per_conn: a.max_msgs_per_conn.as_deref(),
            rate_per_ip: a.rate_per_ip.as_deref(),
            prefix: "",
        })?
    };
    let max_size = units::size(&a.max_size).map_err(flagged("--max-size"))?;
    if max_size == 0 {
        return Err("--max-size must be above zero".into());
    }
    let server = ServerConfig {
        hostname: a.hostname.clone(),
        lmtp: a.lmtp,
        max_message_size: max_size,
        pipelining: !a.no_pipelining,
        eight_bit_mime: !a.no_8bitmime,
        enhanced_status_codes: !a.no_enhanced_status_codes,
        starttls: !a.no_starttls,
        auth: !a.no_auth,
        chunking: !a.no_chunking,
        smtputf8: !a.no_smtputf8,
        dsn: !a.no_dsn,
    };
    let tls = if server.starttls {
        let files = a.cert.as_deref().zip(a.key.as_deref());
        Some(crate::transport::tls::server_config(files, &a.hostname)?)
    } else {
        None
    };
    let store = Store::open(&a.store)?;
    if a.fsync && matches!(store, Store::Discard) {
        return Err("--fsync: the sink stores nothing to make durable (--store discard); add --store maildir:DIR or mbox:FILE".into());
    }
    let (outputs, progress) = output::plan(&a.out, None, &crate::sink::THRESHOLDS)?;
    let max_connections =
        units::count(&a.max_connections).map_err(flagged("--max-connections"))? as usize;
    let config_json = serde_json::json!({
        "listen": listen.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
        "server": server,
        "store": a.store,
        "fsync": a.fsync,
        "rules": faults.rules,
        "greylist_s": faults.greylist.map(|d| d.as_secs_f64()),
        "tarpit_s": faults.tarpit.as_secs_f64(),
        "max_connections": max_connections,
        "max_conns_per_ip": faults.max_conns_per_ip,
        "max_msgs_per_conn": faults.max_msgs_per_conn,
        "rate_per_ip": faults.rate_per_ip,
    });
    let plan = SinkPlan {
        listen,
        server,
        tls,
        faults,
        store,
        fsync: a.fsync,
        max_connections,
        idle_timeout: units::duration(&a.idle_timeout).map_err(flagged("--idle-timeout"))?,
        exit_after_messages: count("--exit-after-messages", &a.exit_after_messages)?,
        exit_after_idle: a
            .exit_after_idle
            .as_deref()
            .map(units::duration)
            .transpose()
            .map_err(flagged("--exit-after-idle"))?,
        duration: a
            .duration
            .as_deref()
            .map(units::duration)
            .transpose()
            .map_err(flagged("--duration"))?,
        drip: a
            .drip
            .as_deref()
            .map(units::duration)
            .transpose()
            .map_err(flagged("--drip"))?
            .unwrap_or_default(),
        bounce_to: a
            .bounce_to
            .as_deref()
            .map(|t| parse_tcp(t, 25, "--bounce-to"))
            .transpose()?,
        bandwidth: a
            .bandwidth
            .as_deref()
            .map(units::size)
            .transpose()
            .map_err(flagged("--bandwidth"))?
            .unwrap_or(0) as u64,
        dkim: a
            .dkim_verify
            .as_deref()
            .map(super::plan::dkim::verifier)
            .transpose()?,
        progress,
        run_id: a
            .run_id
            .as_deref()
            .map(|id| super::plan::scale::run_id(id, "--run-id"))
            .transpose()?,
        config_json,
        count: None,
    };
    Ok((plan, outputs))
}
