//! `send`'s flags → a validated `SendPlan`: the load's shape, the messages and the SMTP
//! client are planned apart (each from its own flag group), and every cross-flag rule
//! lives here.

use std::sync::Arc;

use super::args::{
    ArrivalsArg, ClientArgs, LoadArgs, MessageArgs, ShapeArgs, Switch, TlsArg, TlsArgs,
};
use super::output::{self, OutputPlan};
use crate::load::LoadPlan;
use crate::load::schedule::{Arrivals, Pacing};
use crate::message::address::AddrTemplate;
use crate::message::dkim::Signer;
use crate::message::template::{Content, GenSpec, SizeRange};
use crate::message::users;
use crate::run::Progress;
use crate::send::plan::{Addresses, Auth, ClientPlan, MessagePlan, SendPlan};
use crate::smtp::proto::Credentials;
use crate::stats::summary::Vocabulary;
use crate::transport::target::Target;
use crate::transport::tls::{TlsMode, TlsPlan};
use crate::units;

/// Defaults that differ between `send` and `relay`.
pub struct Defaults {
    /// Connections.
    pub concurrency: &'static str,
    /// Message size.
    pub size: &'static str,
    /// Messages when neither -n nor -z is given.
    pub messages: u64,
    /// What `--threshold` may name (the command's summary and metrics).
    pub thresholds: Vocabulary,
}

/// `send`'s defaults.
pub const SEND_DEFAULTS: Defaults = Defaults {
    concurrency: "16",
    size: "1k",
    messages: 1000,
    thresholds: crate::send::THRESHOLDS,
};

/// Validates the load flags; the run goes to `targets` (empty for a relay's lab, which
/// fills them in). `target` is how the user wrote them, for the results.
pub fn plan(
    targets: Vec<Target>,
    target: Option<&str>,
    a: &LoadArgs,
    defaults: &Defaults,
) -> Result<(SendPlan, OutputPlan), String> {
    let (outputs, progress) = output::plan(&a.out, a.postal_csv.clone(), &defaults.thresholds)?;
    if !(1..=1000).contains(&a.rounds) {
        return Err(format!(
            "--rounds {}: give how many times to run the benchmark, 1 to 1000",
            a.rounds
        ));
    }
    let (load, load_json) = load_plan(&a.shape, defaults, progress)?;
    let (mut message, mut message_json) = message_plan(&a.message, defaults)?;
    if let Some(key) = &a.dkim.dkim_key {
        let domain = match &a.dkim.dkim_domain {
            Some(d) => d.clone(),
            None => match a.message.from.rsplit_once('@') {
                Some((_, d)) if !d.contains('{') => d.to_string(),
                _ => {
                    return Err(
                        "--dkim-key: give --dkim-domain (the domain of --from is not fixed)".into(),
                    );
                }
            },
        };
        let pem = std::fs::read(key)
            .map_err(|e| format!("--dkim-key {}: cannot read it: {e}", key.display()))?;
        let signer = Signer::new(
            &pem,
            &domain,
            &a.dkim.dkim_selector,
            &key.display().to_string(),
        )?;
        message_json["dkim"] = serde_json::json!({
            "algorithm": signer.algorithm(),
            "domain": domain,
            "selector": a.dkim.dkim_selector,
        });
        message.dkim = Some(Arc::new(signer));
    }
    let (client, client_json) = client_plan(targets, &a.client, &message)?;
    let mut config_json = serde_json::json!({
        "target": target,
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.out.threshold,
    });
    for part in [load_json, message_json, client_json] {
        if let (Some(all), serde_json::Value::Object(m)) = (config_json.as_object_mut(), part) {
            all.extend(m);
        }
    }
    let warmup = match &a.warmup {
        Some(d) => match units::duration(d).map_err(|e| format!("--warmup: {e}"))? {
            d if d.is_zero() => None,
            d => Some(d),
        },
        None => None,
    };
    config_json["warmup_s"] = warmup.map(|d| d.as_secs_f64()).into();
    let plan = SendPlan {
        load,
        client,
        message,
        accept_log: None,
        data_end_log: None,
        warmup,
        config_json,
    };
    Ok((plan, outputs))
}

/// The load's shape, and its part of the configuration record.
pub fn load_plan(
    a: &ShapeArgs,
    defaults: &Defaults,
    progress: Progress,
) -> Result<(LoadPlan, serde_json::Value), String> {
    let concurrency =
        units::count(a.concurrency.as_deref().unwrap_or(defaults.concurrency))? as usize;
    if concurrency == 0 {
        return Err("-c/--concurrency must be at least 1".into());
    }
    let pacing = match &a.rate {
        None => {
            if a.ramp.is_some() {
                return Err("--ramp needs --rate (the rate to ramp up to)".into());
            }
            Pacing::Closed
        }
        Some(r) => {
            let rate = units::rate(r)?;
            let (ramp_from, ramp_over) = match &a.ramp {
                Some(d) => (Some(units::rate(&a.ramp_from)?), Some(units::duration(d)?)),
                None => (None, None),
            };
            Pacing::Open {
                rate,
                arrivals: match a.arrivals {
                    ArrivalsArg::Constant => Arrivals::Constant,
                    ArrivalsArg::Poisson => Arrivals::Poisson,
                },
                ramp_from,
                ramp_over,
            }
        }
    };
    let duration = a.duration.as_deref().map(units::duration).transpose()?;
    let count = match (&a.messages, duration) {
        (Some(n), _) => {
            let n = units::count(n)?;
            if n == 0 {
                return Err("-n/--messages must be at least 1".into());
            }
            n
        }
        (None, Some(_)) => u64::MAX,
        (None, None) => defaults.messages,
    };
    let per_conn = if a.per_conn.trim() == "0" {
        (0, 0)
    } else {
        units::count_range(&a.per_conn).map_err(|e| format!("--per-conn: {e}"))?
    };
    let max_errors = a.max_errors.as_deref().map(units::count).transpose()?;
    let grace = units::duration(&a.grace)?;
    let json = serde_json::json!({
        "pacing": pacing,
        "concurrency": concurrency,
        "messages": if count == u64::MAX { None } else { Some(count) },
        "duration_s": duration.map(|d| d.as_secs_f64()),
        "per_conn": [per_conn.0, per_conn.1],
    });
    let plan = LoadPlan {
        pacing,
        concurrency,
        count,
        duration,
        per_conn,
        grace,
        max_errors,
        progress,
        run_id: None,
        live_extra: None,
        units: crate::run::live::MESSAGES,
        shard: crate::load::shard::Shard::WHOLE,
        start_at: None,
    };
    Ok((plan, json))
}

/// The messages, and their part of the configuration record.
pub fn message_plan(
    a: &MessageArgs,
    defaults: &Defaults,
) -> Result<(MessagePlan, serde_json::Value), String> {
    let rcpts = units::count(&a.rcpts)?;
    if rcpts == 0 || rcpts > 100_000 {
        return Err("--rcpts must be between 1 and 100000".into());
    }
    let from = match &a.senders {
        Some(p) => Addresses::List(Arc::new(users::load(p)?)),
        None => {
            Addresses::Template(AddrTemplate::parse(&a.from).map_err(|e| format!("--from: {e}"))?)
        }
    };
    let to = match &a.recipients {
        Some(p) => Addresses::List(Arc::new(users::load(p)?)),
        None => Addresses::Template(AddrTemplate::parse(&a.to).map_err(|e| format!("--to: {e}"))?),
    };
    let (min, max) = units::size_range(a.size.as_deref().unwrap_or(defaults.size))
        .map_err(|e| format!("--size: {e}"))?;
    let attach = a
        .attach
        .as_deref()
        .map(units::size)
        .transpose()?
        .unwrap_or(0);
    if max > 512 << 20 || attach > 512 << 20 {
        return Err("--size and --attach are limited to 512 MiB".into());
    }
    let content = match (&a.body, &a.eml) {
        (Some(p), _) | (None, Some(p)) => {
            if attach > 0 {
                return Err("--attach applies to generated messages, not to --body/--eml".into());
            }
            Content::from_path(p)?
        }
        (None, None) => Content::generate(&GenSpec {
            size: SizeRange { min, max },
            attach,
            from: sample(&from),
            to: sample(&to),
        })?,
    };
    let json = serde_json::json!({
        "rcpts": rcpts,
        "from": a.senders.as_ref().map_or(a.from.clone(), |p| format!("list:{}", p.display())),
        "to": a.recipients.as_ref().map_or(a.to.clone(), |p| format!("list:{}", p.display())),
        "size": {"min": min, "max": max},
        "attach": attach,
        "body": a.body.as_ref().or(a.eml.as_ref()).map(|p| p.display().to_string()),
    });
    let plan = MessagePlan {
        from,
        to,
        rcpts: rcpts as u32,
        content: Arc::new(content),
        dkim: None,
    };
    Ok((plan, json))
}

/// The SMTP client, and its part of the configuration record. `message` says whether
/// `--auth senders` has its list.
fn client_plan(
    targets: Vec<Target>,
    a: &ClientArgs,
    message: &MessagePlan,
) -> Result<(ClientPlan, serde_json::Value), String> {
    let source_ips = match &a.source_ip {
        None => Vec::new(),
        Some(list) => crate::transport::target::parse_ips(list, "--source-ip", "local addresses")?,
    };
    let tls = tls_plan(&a.tls)?;
    let auth = match a.auth.as_deref() {
        None => Auth::None,
        Some("senders") => {
            if !matches!(message.from, Addresses::List(_)) {
                return Err("--auth senders needs --senders FILE with passwords".into());
            }
            Auth::Senders
        }
        Some(up) => match up.split_once(':') {
            Some((u, p)) if !u.is_empty() => Auth::Fixed(Credentials {
                user: u.to_string(),
                pass: p.to_string(),
            }),
            _ => return Err(format!("--auth {up:?}: write user:password, or 'senders'")),
        },
    };
    let connect_timeout = units::duration(&a.connect_timeout)?;
    let command_timeout = units::duration(&a.timeout)?;
    for (name, d) in [
        ("--connect-timeout", connect_timeout),
        ("--timeout", command_timeout),
    ] {
        if d.is_zero() {
            return Err(format!("{name} must be above zero"));
        }
    }
    let json = serde_json::json!({
        "protocol": if a.lmtp { "lmtp" } else { "smtp" },
        "tls": tls.mode,
        "tls_percent": tls.percent,
        "tls_resume": matches!(a.tls.tls_resume, Switch::On),
        "auth": !matches!(auth, Auth::None),
        "pipelining": !a.no_pipelining,
        "chunking": a.chunking,
        "helo": a.helo,
    });
    let plan = ClientPlan {
        targets,
        lmtp: a.lmtp,
        source_ips,
        connect_timeout,
        command_timeout,
        tls,
        auth,
        pipelining: !a.no_pipelining,
        chunking: a.chunking,
        helo: a.helo.clone(),
    };
    Ok((plan, json))
}

/// A client's TLS from its flags. `--tls-percent` alone is postal's `-s`: STARTTLS on that
/// share of the connections.
pub fn tls_plan(a: &TlsArgs) -> Result<TlsPlan, String> {
    let mode = match (a.tls, &a.tls_percent) {
        (None, Some(_)) | (Some(TlsArg::Starttls), _) => TlsMode::Starttls,
        (None | Some(TlsArg::None), None) => TlsMode::None,
        (Some(TlsArg::None), Some(_)) => {
            return Err(
                "--tls-percent needs TLS: drop --tls none, or give --tls starttls or --tls implicit"
                    .into(),
            );
        }
        (Some(TlsArg::Implicit), _) => TlsMode::Implicit,
    };
    let percent = match &a.tls_percent {
        Some(p) => units::percent(p).map_err(|e| format!("--tls-percent: {e}"))?,
        None => 100.0,
    };
    let config = if mode == TlsMode::None {
        if a.tls_ca.is_some() {
            return Err("--tls-ca needs --tls starttls or --tls implicit".into());
        }
        None
    } else {
        Some(crate::transport::tls::client_config(
            a.tls_ca.as_deref(),
            matches!(a.tls_resume, Switch::On),
        )?)
    };
    Ok(TlsPlan {
        mode,
        percent,
        config,
    })
}

/// An address for the generated From/To header.
fn sample(a: &Addresses) -> String {
    match a {
        Addresses::Template(t) => t.render(0, 0, &mut fastrand::Rng::with_seed(0)),
        Addresses::List(l) => l[0].address.clone(),
    }
}
