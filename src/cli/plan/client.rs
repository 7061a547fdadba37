//! How a client connects: the TLS flags every client takes, the SMTP client's flags, the
//! connect and response limits of the mailbox clients, and the plain SMTP/LMTP client a
//! command uses for its own deliveries.

use std::time::Duration;

use crate::cli::args::{ClientArgs, MailboxClientArgs, Switch, TlsArg, TlsArgs};
use crate::send::plan::{Addresses, Auth, ClientPlan, MessagePlan};
use crate::smtp::proto::Credentials;
use crate::transport::target::Target;
use crate::transport::tls::{TlsMode, TlsPlan};
use crate::units;

/// The SMTP client, and its part of the configuration record. `message` says whether
/// `--auth senders` has its list.
pub fn smtp(
    targets: Vec<Target>,
    a: &ClientArgs,
    message: &MessagePlan,
) -> Result<(ClientPlan, serde_json::Value), String> {
    let source_ips = match &a.source_ip {
        None => Vec::new(),
        Some(list) => crate::transport::target::parse_ips(list, "--source-ip", "local addresses")?,
    };
    let tls = tls(&a.tls)?;
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
    let (connect_timeout, command_timeout) = limits(&a.connect_timeout, &a.timeout)?;
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
        count: None,
    };
    Ok((plan, json))
}

/// The plain client of a command's own deliveries (filling a store, injecting timed
/// messages): SMTP's defaults, no TLS or AUTH, targets filled in when known.
pub fn plain(lmtp: bool) -> ClientPlan {
    ClientPlan {
        targets: Vec::new(),
        lmtp,
        source_ips: Vec::new(),
        connect_timeout: Duration::from_secs(10),
        command_timeout: Duration::from_secs(60),
        tls: TlsPlan::NONE,
        auth: Auth::None,
        pipelining: true,
        chunking: false,
        helo: "mailbench.test".into(),
        count: None,
    }
}

/// A client's TLS from its flags. `--tls-percent` alone is postal's `-s`: STARTTLS on that
/// share of the connections.
pub fn tls(a: &TlsArgs) -> Result<TlsPlan, String> {
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

/// A mailbox client's connect and response limits (`--connect-timeout`, `--timeout`).
pub struct Timeouts {
    /// How long a TCP connect may take.
    pub connect: Duration,
    /// How long each response may take.
    pub command: Duration,
}

impl Timeouts {
    /// Both limits from their flags; neither may be zero.
    pub fn plan(a: &MailboxClientArgs) -> Result<Timeouts, String> {
        let (connect, command) = limits(&a.connect_timeout, &a.timeout)?;
        Ok(Timeouts { connect, command })
    }
}

/// `--connect-timeout` and `--timeout` from their flags: each above zero and at most a
/// year (longer is no limit at all, and past the clock's range).
fn limits(connect: &str, command: &str) -> Result<(Duration, Duration), String> {
    const LONGEST: Duration = Duration::from_secs(365 * 86_400);
    let one = |flag: &'static str, spec: &str| {
        let d = units::duration(spec).map_err(super::flagged(flag))?;
        if d.is_zero() {
            return Err(format!("{flag} {spec}: must be above zero"));
        }
        if d > LONGEST {
            return Err(format!("{flag} {spec}: must be at most 365d"));
        }
        Ok(d)
    };
    Ok((
        one("--connect-timeout", connect)?,
        one("--timeout", command)?,
    ))
}
