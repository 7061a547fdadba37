//! `relay`'s flags → a validated `RelayPlan`; the benchmark itself is `crate::relay`.

use std::net::SocketAddr;

use super::args::{DEFAULT_TO, LoadArgs, RelayArgs};
use super::exit::{EXIT_FAILED, EXIT_USAGE};
use super::finish::deliver;
use super::plan::flagged;
use super::plan::lab::{entry_features, logging_knob, lookup, options};
use super::plan::load::Defaults;
use super::plan::output::OutputPlan;
use super::plan::send::{Implied, plan as send_plan};
use crate::lab::Mta;
use crate::relay::fault::{FaultKind, FaultPlan, FaultWhen};
use crate::relay::verdict::StepRules;
use crate::relay::{FindMaxPlan, RelayDns, RelayError, RelayPlan};
use crate::shutdown::Shutdown;
use crate::transport::target::{parse_targets, parse_tcp};
use crate::transport::tls::TlsMode;
use crate::units;

/// The classic benchmark's defaults: 10,000 × 25 KiB over 64 sessions.
pub const RELAY_DEFAULTS: Defaults = Defaults {
    concurrency: "64",
    size: "25k",
    messages: 10_000,
    thresholds: crate::relay::THRESHOLDS,
};

/// Seed 002's list: one recipient in each of 254 domains.
const LIST_SERVER_DOMAINS: &str = "254";

/// `--list-server`: one message (unless `-n` says otherwise) with one recipient per domain
/// of a count spec, one session (unless `-c`).
fn list_server(implied: &mut Implied, load: &LoadArgs, spec: &str) -> Result<(), String> {
    let n: u64 = spec.trim().parse().map_err(|_| {
        format!("--list-server: --dns-domains must be a count (got {spec:?}); the recipients are u{{rcpt}}@d{{rcpt}}.example.test")
    })?;
    if load.shape.messages.is_none() {
        implied.load.messages = Some(1);
    }
    if load.shape.concurrency.is_none() {
        implied.load.concurrency = Some(1);
    }
    if load.message.rcpts == "1" {
        implied.message.rcpts = Some(n);
    }
    if load.message.to == DEFAULT_TO {
        implied.message.to = Some("list{seq}-u{rcpt}@d{rcpt}.example.test".into());
    }
    Ok(())
}

/// A planned `relay`: the benchmark, its outputs, and how it is repeated.
struct Planned {
    plan: RelayPlan,
    outputs: OutputPlan,
    /// `--rounds`.
    rounds: u32,
    /// The lab MTAs, in `--lab`'s order (several are compared in rotating rounds).
    mtas: Vec<Mta>,
    /// `--compare-postconf`: settings' values (every combination), in rotating rounds.
    compare: Vec<String>,
}

/// Validates `relay`'s flags.
fn plan(a: &RelayArgs) -> Result<Planned, String> {
    let sink: SocketAddr = match (&a.sink, !a.lab.is_empty()) {
        (Some(s), _) => parse_tcp(s, 2525, "--sink")?,
        (None, true) => SocketAddr::from(([127, 0, 0, 1], 0)),
        (None, false) => SocketAddr::from(([127, 0, 0, 1], 2525)),
    };
    let drain_timeout = units::duration(&a.drain_timeout).map_err(flagged("--drain-timeout"))?;
    let queue_device = a
        .queue_device
        .as_deref()
        .map(|d| {
            crate::stats::host::Device::find(d).map_err(|why| format!("--queue-device {d}: {why}"))
        })
        .transpose()?;
    let sink_faults =
        super::plan::sink_faults::fault_plan(&super::plan::sink_faults::FaultFlags {
            rule: &a.sink_rule,
            rules: a.sink_rules.as_deref(),
            greylist: a.sink_greylist.as_deref(),
            tarpit: a.sink_tarpit.as_deref(),
            max_conns_per_ip: a.sink_max_conns_per_ip.as_deref(),
            max_msgs_per_conn: a.sink_max_msgs_per_conn.as_deref(),
            rate_per_ip: a.sink_rate_per_ip.as_deref(),
            prefix: "sink-",
        })?;
    // `-c 1,4,16,64` sweeps: one run per level on the same lab.
    let levels: Vec<usize> = match a.load.shape.concurrency.as_deref() {
        Some(list) if list.contains(',') => list
            .split(',')
            .map(
                |c| match units::count(c).map_err(flagged("--concurrency"))? {
                    0 => Err("a concurrency level must be at least 1".to_string()),
                    n => Ok(n as usize),
                },
            )
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    if a.find_max && !levels.is_empty() {
        return Err("--find-max with a list of concurrency levels: --find-max searches the rate at one concurrency; give -c one number, or sweep -c without --find-max".into());
    }
    let mut implied = Implied::default();
    if let Some(&first) = levels.first() {
        implied.load.concurrency = Some(first as u64);
    }
    let spec = match (&a.dns_domains, a.list_server) {
        (Some(s), _) => Some(s.clone()),
        (None, true) => Some(LIST_SERVER_DOMAINS.to_string()),
        (None, false) if !a.dns_rule.is_empty() => {
            return Err("--dns-rule needs DNS in the benchmark: add --dns-domains N".into());
        }
        (None, false) => None,
    };
    if a.list_server {
        list_server(
            &mut implied,
            &a.load,
            spec.as_deref().unwrap_or(LIST_SERVER_DOMAINS),
        )?;
    }
    let dns = match &spec {
        Some(spec) => {
            let zones = super::plan::dns::synthetic(spec, Vec::new(), &a.dns_zone)?;
            if implied.message.to.is_none() && a.load.message.to == DEFAULT_TO {
                // Recipients spread over the domains; a count names them d0..dN-1.
                if spec.trim().parse::<u64>().is_err() {
                    return Err(format!(
                        "--dns-domains {spec:?}: give --to with a template over these domains (e.g. 'u{{seq}}@d{{mod:N}}.example.test'); only a count N has a default"
                    ));
                }
                implied.message.to = Some(format!(
                    "u{{seq}}@d{{mod:{}}}.example.test",
                    zones.domains.len()
                ));
            }
            Some(RelayDns {
                zones,
                faults: super::plan::dns::faults("--dns-rule", &a.dns_rule)?,
                sinks: a.dns_sinks,
            })
        }
        None => None,
    };
    if a.lab.is_empty() {
        lab_only_knobs(&a.shape)?;
    }
    let targets = match &a.target {
        Some(t) => parse_targets(t, 25).map_err(flagged("--target"))?,
        None => Vec::new(),
    };
    let (mut send, outputs) = send_plan(
        targets,
        a.target.as_deref(),
        &a.load,
        &RELAY_DEFAULTS,
        &implied,
    )?;
    let mut lab = match a.lab.first() {
        Some(&first) => {
            if send.client.tls.mode == TlsMode::Implicit {
                return Err(
                    "--tls implicit: the lab's Postfix offers STARTTLS only; use --tls starttls"
                        .into(),
                );
            }
            let starttls = send.client.tls.mode == TlsMode::Starttls;
            // The relay target (the sink) is known once its listener is bound.
            let mut opts = options(&a.shape, sink, starttls)?;
            opts.lookup = lookup(
                &a.shape,
                &a.lab,
                &send.message.to,
                send.message.rcpts,
                send.load.count,
            )?;
            for (i, &mta) in a.lab.iter().enumerate() {
                if a.lab[..i].contains(&mta) {
                    return Err(format!(
                        "--lab: {} is named twice; name each MTA once",
                        mta.name()
                    ));
                }
                entry_features(mta, &opts)?;
                logging_knob(mta, &opts)?;
                if a.flush && !mta.features().hold {
                    return Err(format!(
                        "--flush: the {} lab has no hold queue; the flush benchmark runs on {}",
                        mta.name(),
                        Mta::having(|f| f.hold)
                    ));
                }
            }
            if a.lab.len() > 1 && !opts.settings.is_empty() {
                return Err("--mta-conf with several MTAs in --lab: each MTA names its settings differently; compare them on the lab's settings (and --mta-processes, --mta-dest-concurrency), or run one MTA at a time".into());
            }
            Some((first, opts))
        }
        None => None,
    };
    let find_max = if a.find_max {
        Some(FindMaxPlan {
            start_rate: units::rate(&a.start_rate).map_err(flagged("--start-rate"))?,
            rules: StepRules {
                step: units::duration(&a.step).map_err(flagged("--step"))?,
                max_e2e_p99_ms: units::duration(&a.max_e2e_p99)
                    .map_err(flagged("--max-e2e-p99"))?
                    .as_secs_f64()
                    * 1000.0,
            },
        })
    } else {
        None
    };
    let fault = match &a.fault {
        None if a.queue_fs_size.is_some() || a.fault_hold.is_some() => {
            return Err(
                "--queue-fs-size and --fault-hold shape the disk-full fault: add --fault disk-full@N (or @3s), or drop them"
                    .into(),
            );
        }
        Some(f) => Some(fault_fits(
            super::plan::fault::parse(f)?,
            a,
            &mut lab,
            &send,
        )?),
        None => None,
    };
    send.config_json["relay"] = serde_json::json!({
        "queue": format!("{:?}", a.shape.queue).to_lowercase(),
        "hops": a.shape.hops,
        "mta_conf": a.shape.mta_conf,
        "mta_lookup": format!("{:?}", a.shape.mta_lookup).to_lowercase(),
        "ldap_fault": a.shape.ldap_fault,
        "mta_logging": format!("{:?}", a.shape.mta_logging).to_lowercase(),
    });
    if let Some(f) = &fault {
        send.config_json["relay"]["fault"] = f.label().into();
        if f.kind == FaultKind::PowerLoss {
            send.config_json["relay"]["queue"] = "lazyfs".into();
        }
        if let FaultKind::DiskFull { hold } = f.kind {
            send.config_json["relay"]["fault_hold_s"] = hold.as_secs_f64().into();
        }
        if let Some((
            _,
            crate::lab::LabOptions {
                queue: crate::lab::QueueKind::Loop(size),
                ..
            },
        )) = &lab
        {
            send.config_json["relay"]["queue"] = "loop".into();
            send.config_json["relay"]["queue_fs_bytes"] = (*size).into();
        }
    }
    let links = a
        .link
        .iter()
        .map(|l| super::plan::link::link(l))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(l) = links
        .iter()
        .enumerate()
        .find(|(i, l)| links[..*i].iter().any(|m| m.hop == l.hop))
    {
        return Err(format!(
            "--link {}: that hop is shaped twice; give one --link per hop",
            a.link[l.0]
        ));
    }
    if !links.is_empty() {
        send.config_json["relay"]["links"] = serde_json::to_value(&links).unwrap_or_default();
    }
    let plan = RelayPlan {
        send,
        lab,
        sink,
        sink_faults,
        drain_timeout,
        levels,
        find_max,
        settle: super::plan::settle(a.settle.as_deref())?,
        queue_cmd: a.queue_cmd.clone(),
        sut_pids: a.sut_pid.clone(),
        keep_logs: outputs.files.json.clone(),
        queue_device,
        flush: a.flush,
        trace_io: a.trace_io,
        dkim_verify: a
            .dkim_verify
            .as_deref()
            .map(super::plan::dkim::verifier)
            .transpose()?,
        dns,
        fault,
        links,
    };
    if !a.compare_postconf.is_empty() && a.lab.len() > 1 {
        return Err("--compare-postconf compares settings of one MTA; give --lab one MTA".into());
    }
    if !a.compare_postconf.is_empty() {
        super::vary::check_settings(&a.compare_postconf, a.lab.first().copied())?;
    }
    Ok(Planned {
        plan,
        outputs,
        rounds: a.load.rounds,
        mtas: a.lab.clone(),
        compare: a.compare_postconf.clone(),
    })
}

/// Runs `relay`. Errors carry their exit code.
pub async fn relay(a: RelayArgs) -> Result<u8, (u8, String)> {
    let Planned {
        plan,
        outputs,
        rounds,
        mtas,
        compare,
    } = plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    if !mtas.is_empty() {
        super::lab::clean_leftovers("relay");
    }
    if !compare.is_empty() {
        return super::vary::settings(&compare, rounds, plan, outputs.files.json.clone()).await;
    }
    if mtas.len() > 1 {
        return super::vary::mtas(&mtas, rounds, plan, outputs.files.json.clone()).await;
    }
    let (load, targets) = (&plan.send.load, &plan.send.client.targets);
    let preflight = super::doctor::preflight_run("relay", load, targets, 2, !mtas.is_empty());
    let shutdown = Shutdown::install_saying(crate::relay::SIGNAL_NOTICE);
    // Each round is a whole benchmark: with --lab, on a fresh lab.
    let mut results = super::finish::in_rounds(rounds, &shutdown, |round| {
        let (mut plan, shutdown) = (plan.clone(), shutdown.clone());
        // Each round's lab logs, named by the MTA and the round.
        if let (Some((mta, _)), Some(json), true) = (&plan.lab, &plan.keep_logs, rounds > 1) {
            plan.keep_logs = Some(crate::run::rounds::round_logs(json, mta.name(), round));
        }
        async move {
            crate::relay::bench(plan, shutdown)
                .await
                .map_err(|e| match e {
                    RelayError::Usage(e) => (EXIT_USAGE, e),
                    RelayError::Failed(e) => (EXIT_FAILED, e),
                })
        }
    })
    .await?;
    super::finish::keep_preflight(&mut results, preflight);
    super::finish::note_short_run(&mut results, plan.send.warmup);
    let lost = lost_everywhere(&results);
    let code = deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench relay: {} messages through {} to the sink at {}",
            r.counters.sent,
            r.config["target"].as_str().unwrap_or("the MTA"),
            r.config["relay"]["sink"].as_str().unwrap_or("?")
        );
        crate::report::text::summary(r, &headline)
    })?;
    Ok(match lost {
        Some(why) if code != EXIT_FAILED => {
            crate::run::live::say(&format!(
                "mailbench relay: {why}: the run failed (exit {EXIT_FAILED})"
            ));
            EXIT_FAILED
        }
        _ => code,
    })
}

/// Why a relay run failed by losing mail, if it did: a message the MTA accepted and
/// neither delivered nor bounced within the drain, or delivered only cut or altered, is a
/// failed run (issue 42's rule),
/// a run that lost all of them most plainly; in a sweep, any level's. A capacity search
/// loses mail in the steps that fail by design: its answer is the rate, not the loss.
fn lost_everywhere(r: &crate::stats::Results) -> Option<String> {
    use crate::stats::summary::Summary;
    if r.extra.contains_key("find_max") {
        return None;
    }
    let Summary::Relay(s) = &r.summary else {
        return None;
    };
    let swept = r
        .extra
        .get("sweep")
        .and_then(|v| v.as_array())
        .map(|rows| {
            rows.iter()
                .filter_map(|row| row["lost"].as_u64())
                .sum::<u64>()
        })
        .unwrap_or(s.lost);
    if s.lost > 0 && s.lost == s.expected_recipients {
        Some(format!(
            "all {} recipients the MTA accepted were lost (none delivered, none bounced)",
            s.expected_recipients
        ))
    } else if s.lost > 0 {
        Some(format!(
            "{} of {} recipients the MTA accepted were lost",
            s.lost, s.expected_recipients
        ))
    } else if swept > 0 {
        Some(format!(
            "{swept} recipients were lost over the sweep's levels"
        ))
    } else if s.damaged > 0 {
        Some(format!(
            "{} of the messages the MTA accepted arrived only damaged (cut or altered)",
            s.damaged
        ))
    } else {
        None
    }
}

/// Whether `--fault` can run as asked: on one lab MTA whose features declare this fault,
/// in a single run (no warm-up, sweep, search, flush or settings comparison, whose other
/// runs would not be faulted); `power-loss` puts the lab's queue on LazyFS, which must be
/// there. Each refusal is one line naming the fix.
fn fault_fits(
    f: FaultPlan,
    a: &RelayArgs,
    lab: &mut Option<(Mta, crate::lab::LabOptions)>,
    send: &crate::send::SendPlan,
) -> Result<FaultPlan, String> {
    let label = f.label();
    let takes: fn(&crate::lab::Features) -> bool = match f.kind {
        FaultKind::Crash => |t| t.crash,
        FaultKind::PowerLoss => |t| t.power_loss,
        FaultKind::DiskFull { .. } => |t| t.disk_full,
    };
    let Some((mta, opts)) = lab else {
        return Err(format!(
            "--fault {label}: a fault acts on a lab MTA started here; add a --lab that takes it ({}; an MTA given with --target is not started here)",
            Mta::having(takes)
        ));
    };
    if a.lab.len() > 1 {
        return Err(format!(
            "--fault {label}: a fault acts on one lab MTA; --lab {} compares MTAs, one run each: run each with its own --fault",
            a.lab.iter().map(|m| m.name()).collect::<Vec<_>>().join(",")
        ));
    }
    if !takes(&mta.features()) {
        return Err(format!(
            "--fault {label}: the {} lab cannot take this fault yet; it runs on {}",
            mta.name(),
            Mta::having(takes)
        ));
    }
    if let FaultWhen::Accepted(k) = f.when
        && send.load.count != u64::MAX
        && k > send.load.count
    {
        return Err(format!(
            "--fault {label}: the run sends {} messages (-n), so the MTA never accepts {k} and the fault would never fire; give a count up to -n, or raise -n",
            send.load.count
        ));
    }
    let others = [
        ("--flush", a.flush),
        ("--find-max", a.find_max),
        ("--compare-postconf", !a.compare_postconf.is_empty()),
        (
            "a concurrency sweep (-c A,B)",
            a.load
                .shape
                .concurrency
                .as_deref()
                .is_some_and(|c| c.contains(',')),
        ),
        ("--warmup", send.warmup.is_some()),
    ];
    if let Some((what, _)) = others.iter().find(|(_, on)| *on) {
        return Err(format!(
            "--fault {label}: one fault per run; drop {what}, whose other runs would not be faulted"
        ));
    }
    let sized = a.queue_fs_size.is_some() || a.fault_hold.is_some();
    if sized && !matches!(f.kind, FaultKind::DiskFull { .. }) {
        return Err(format!(
            "--fault {label}: --queue-fs-size and --fault-hold size and hold the disk-full fault's file system; this fault's queue cannot be sized: drop them, or use --fault disk-full@…"
        ));
    }
    if f.kind == FaultKind::PowerLoss {
        crate::lab::fs::lazyfs::check().map_err(|e| format!("--fault {label}: {e}"))?;
        opts.queue = crate::lab::QueueKind::Lazyfs;
    }
    let FaultKind::DiskFull { .. } = f.kind else {
        return Ok(f);
    };
    let hold = match &a.fault_hold {
        Some(h) => units::duration(h).map_err(flagged("--fault-hold"))?,
        None => super::plan::fault::DISK_FULL_HOLD,
    };
    if hold.is_zero() || hold > MAX_HOLD {
        return Err(format!(
            "--fault-hold {}: give a hold above 0 and at most {} s",
            hold.as_secs_f64(),
            MAX_HOLD.as_secs()
        ));
    }
    let size = queue_fs_size(a.queue_fs_size.as_deref())?;
    crate::lab::host::check_root("--fault disk-full (a loop-mounted file system)")?;
    for tool in ["mkfs.ext4", "losetup"] {
        if !on_path(tool) {
            return Err(format!(
                "--fault {label}: {tool} is not installed; apt-get install e2fsprogs mount"
            ));
        }
    }
    opts.queue = crate::lab::QueueKind::Loop(size);
    Ok(FaultPlan {
        kind: FaultKind::DiskFull { hold },
        ..f
    })
}

/// Whether `tool` is in PATH or the system's sbin directories.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
        .any(|d| d.join(tool).is_file())
}

/// The longest `--fault-hold`: the disk-full fault is a short event in a run.
const MAX_HOLD: std::time::Duration = std::time::Duration::from_secs(600);
/// The smallest `--queue-fs-size`: Postfix's smtpd takes mail only with 1.5 ×
/// `message_size_limit` (15 MB by default) free, and a 32 MiB ext4 image has ~27 MiB free.
const MIN_QUEUE_FS: u64 = 32 << 20;
/// The largest: the ballast that fills it is written in full.
const MAX_QUEUE_FS: u64 = 1 << 30;

/// `--queue-fs-size` in bytes (64 MiB when not given), within its bounds.
fn queue_fs_size(given: Option<&str>) -> Result<u64, String> {
    let Some(s) = given else {
        return Ok(64 << 20);
    };
    let size = units::size(s).map_err(flagged("--queue-fs-size"))? as u64;
    if !(MIN_QUEUE_FS..=MAX_QUEUE_FS).contains(&size) {
        return Err(format!(
            "--queue-fs-size {s}: give 32M to 1024M (smaller leaves Postfix too little room to take any mail; larger takes long to fill)"
        ));
    }
    Ok(size)
}

/// The knobs that set up a lab MTA mean nothing against `--target` (an MTA not started
/// here): refused rather than silently ignored.
fn lab_only_knobs(shape: &crate::cli::args::LabShape) -> Result<(), String> {
    use crate::cli::args::{LoggingArg, LookupArg};
    let set = [
        ("--mta-lookup", shape.mta_lookup != LookupArg::None),
        ("--ldap-fault", !shape.ldap_fault.is_empty()),
        ("--mta-logging", shape.mta_logging != LoggingArg::On),
    ];
    match set.iter().find(|(_, on)| *on) {
        Some((flag, _)) => Err(format!(
            "{flag} sets up a lab MTA: add --lab postfix (or --lab qmail for --mta-logging), or drop {flag} when testing --target"
        )),
        None => Ok(()),
    }
}
