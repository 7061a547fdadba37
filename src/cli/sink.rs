//! `SinkArgs` → validated `SinkPlan`.

use serde::Deserialize;

use super::args::SinkArgs;
use super::plan::flagged;
use super::plan::output::{self, OutputPlan};
use crate::message::users;
use crate::sink::faults::{FaultPlan, parse_rule, user_flags};
use crate::sink::plan::SinkPlan;
use crate::sink::store::Store;
use crate::smtp::proto::server::ServerConfig;
use crate::transport::listen::Listen;
use crate::transport::target::{Target, parse_target, parse_tcp};
use crate::units;

/// The TOML rules file: the same things the flags set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rules: Vec<String>,
    greylist: Option<String>,
    tarpit: Option<String>,
    max_conns_per_ip: Option<u64>,
    max_msgs_per_conn: Option<u64>,
    rate_per_ip: Option<String>,
}

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
    let file = match &a.rules {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read --rules {}: {e}", p.display()))?;
            toml::from_str::<RulesFile>(&text)
                .map_err(|e| format!("--rules {}: {}", p.display(), e.message()))?
        }
        None => RulesFile::default(),
    };
    let mut rules = Vec::new();
    for r in file.rules.iter().chain(&a.rule) {
        rules.push(parse_rule("--rule", r)?);
    }
    // A value from the flag is named by the flag, one from the fault file by its key.
    let dur = |name: &str, flag: &Option<String>, file: &Option<String>| {
        let from = if flag.is_some() {
            "--"
        } else {
            "the --rules file's "
        };
        flag.as_ref()
            .or(file.as_ref())
            .map(|d| units::duration(d))
            .transpose()
            .map_err(|e| format!("{from}{name}: {e}"))
    };
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
        rules,
        tarpit: dur("tarpit", &a.tarpit, &file.tarpit)?.unwrap_or_default(),
        greylist: dur("greylist", &a.greylist, &file.greylist)?,
        users,
        passwords,
        max_conns_per_ip: count("--max-conns-per-ip", &a.max_conns_per_ip)?
            .or(file.max_conns_per_ip),
        max_msgs_per_conn: count("--max-msgs-per-conn", &a.max_msgs_per_conn)?
            .or(file.max_msgs_per_conn),
        rate_per_ip: a
            .rate_per_ip
            .as_ref()
            .or(file.rate_per_ip.as_ref())
            .map(|r| units::rate(r))
            .transpose()
            .map_err(|e| match a.rate_per_ip {
                Some(_) => format!("--rate-per-ip: {e}"),
                None => format!("the --rules file's rate_per_ip: {e}"),
            })?,
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
