//! `relay` and `lab`: validation, start-up order (sink listener, then lab, then load) and
//! clean-up on every path.

use std::time::Duration;

use super::args::{LabArgs, LabShape, QueueArg, RelayArgs};
use super::finish::deliver;
use super::send::{Defaults, plan as send_plan};
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, units};
use crate::lab::postfix::{Lab, LabError, LabOptions, QueueKind};
use crate::relay::{RelayError, RelayRun};
use crate::report::Outputs;
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;
use crate::sink::faults::{FaultPlan, parse_rule};
use crate::sink::plan::{Listen, SinkPlan};
use crate::sink::store::Store;
use crate::smtp::proto::server::ServerConfig;
use crate::smtp::target::{Target, parse_target};

/// The classic benchmark's defaults: 10,000 × 25 KiB over 64 sessions.
pub const RELAY_DEFAULTS: Defaults = Defaults {
    concurrency: "64",
    size: "25k",
    messages: 10_000,
    thresholds: crate::relay::THRESHOLDS,
};

fn lab_options(
    shape: &LabShape,
    relay: std::net::SocketAddr,
    starttls: bool,
) -> Result<LabOptions, String> {
    let postconf = shape
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
        postconf,
        relay,
        starttls,
    })
}

fn tcp(spec: &str, default_port: u16, flag: &str) -> Result<std::net::SocketAddr, String> {
    match parse_target(spec, default_port).map_err(|e| format!("{flag}: {e}"))? {
        Target::Tcp { addr, .. } => Ok(addr),
        Target::Unix(_) => Err(format!("{flag} must be a TCP address")),
    }
}

/// Runs `relay`. Errors carry their exit code.
pub async fn relay(a: RelayArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let sink_addr = match (&a.sink, a.lab.is_some()) {
        (Some(s), _) => tcp(s, 2525, "--sink").map_err(usage)?,
        (None, true) => "127.0.0.1:0"
            .parse()
            .map_err(|_| usage("internal address".into()))?,
        (None, false) => "127.0.0.1:2525"
            .parse()
            .map_err(|_| usage("internal address".into()))?,
    };
    let drain_timeout = units::duration(&a.drain_timeout).map_err(usage)?;
    let rules = a
        .sink_rule
        .iter()
        .map(|r| parse_rule(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    // Validate the load before starting anything (the target is filled in below).
    // `-c 1,4,16,64` sweeps: one run per level on the same lab.
    let levels: Vec<usize> = match a.load.concurrency.as_deref() {
        Some(list) if list.contains(',') => list
            .split(',')
            .map(|c| {
                units::count(c).map(|n| n as usize).and_then(|n| {
                    if n == 0 {
                        Err("a concurrency level must be at least 1".into())
                    } else {
                        Ok(n)
                    }
                })
            })
            .collect::<Result<_, _>>()
            .map_err(usage)?,
        _ => Vec::new(),
    };
    let mut load = a.load.clone();
    if let Some(first) = levels.first() {
        load.concurrency = Some(first.to_string());
    }
    let mut plan = send_plan("127.0.0.1:9", &load, &RELAY_DEFAULTS).map_err(usage)?;
    let levels = if levels.is_empty() {
        vec![plan.concurrency]
    } else {
        levels
    };
    if a.lab.is_some() {
        crate::lab::postfix::check().map_err(usage)?;
    }
    crate::limits::raise_nofile();
    let listeners = crate::sink::bind(&[Listen::Tcp(sink_addr)])
        .await
        .map_err(|e| (EXIT_FAILED, e))?;
    let bound = crate::sink::local_addrs(&listeners);
    let sink_addr: std::net::SocketAddr = bound
        .first()
        .and_then(|s| s.parse().ok())
        .ok_or((EXIT_FAILED, "the sink did not bind".to_string()))?;
    let lab = match a.lab {
        Some(_) => {
            use crate::send::plan::TlsMode;
            if plan.tls == TlsMode::Implicit {
                return Err(usage(
                    "--tls implicit: the lab's Postfix offers STARTTLS only; use --tls starttls"
                        .into(),
                ));
            }
            let tls = plan.tls == TlsMode::Starttls;
            let opts = lab_options(&a.shape, sink_addr, tls).map_err(usage)?;
            let lab = start_lab(opts).await?;
            for n in &lab.notices {
                crate::report::live::say(&format!("mailbench relay: notice: {n}"));
            }
            Some(lab)
        }
        None => None,
    };
    let target = match (&lab, &a.target) {
        (Some(l), _) => l.entry().to_string(),
        (None, Some(t)) => t.clone(),
        (None, None) => return Err(usage("give --lab postfix or --target HOST:PORT".into())),
    };
    plan.targets = crate::smtp::target::parse_targets(&target, 25).map_err(usage)?;
    plan.config_json["target"] = target.clone().into();
    plan.config_json["targets"] = plan.targets.iter().map(|t| t.to_string()).collect();
    plan.config_json["relay"] = serde_json::json!({
        "lab": a.lab.map(|_| "postfix"),
        "queue": format!("{:?}", a.shape.queue).to_lowercase(),
        "hops": a.shape.hops,
        "postconf": a.shape.postconf,
        "sink": sink_addr.to_string(),
        "sink_rules": a.sink_rule,
        "drain_timeout_s": drain_timeout.as_secs_f64(),
    });
    let outputs = plan.outputs.clone();
    let thresholds = std::mem::take(&mut plan.thresholds);
    let make_sink = |rules: Vec<crate::sink::faults::Rule>| SinkPlan {
        listen: vec![Listen::Tcp(sink_addr)],
        server: ServerConfig {
            hostname: "sink.mailbench.test".into(),
            lmtp: false,
            max_message_size: 512 << 20,
            pipelining: true,
            eight_bit_mime: true,
            enhanced_status_codes: true,
            starttls: false,
            auth: false,
            chunking: true,
            smtputf8: false,
            dsn: true,
        },
        tls: None,
        faults: FaultPlan {
            rules,
            ..FaultPlan::default()
        },
        store: Store::Discard,
        fsync: false,
        max_connections: 100_000,
        idle_timeout: Duration::from_secs(300),
        exit_after_messages: None,
        exit_after_idle: None,
        duration: None,
        bounce_to: None,
        drip: Duration::ZERO,
        bandwidth: 0,
        outputs: Outputs {
            interval: outputs.interval,
            quiet: true,
            ..Outputs::default()
        },
        thresholds: Vec::new(),
        config_json: serde_json::Value::Null,
    };
    let extra_pids = a.sut_pid.clone();
    let lab_pids = lab.as_ref().map(|l| {
        l.instances
            .iter()
            .map(|i| i.queue.join("pid/master.pid"))
            .collect::<Vec<_>>()
    });
    let sut_pids = std::sync::Arc::new(move || {
        let mut roots = extra_pids.clone();
        for f in lab_pids.iter().flatten() {
            if let Some(p) = std::fs::read_to_string(f)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                roots.push(p);
            }
        }
        crate::stats::sut::descendants(&roots)
    });
    let shutdown = Shutdown::install();
    let mut listeners = Some(listeners);
    let mut rows = Vec::new();
    let mut results = None;
    let mut find = FindMax::new(&a).map_err(usage)?;
    let mut runs = 0usize;
    loop {
        let (label, mut p) = match &mut find {
            Some(f) => match f.next_rate() {
                Some(rate) => (format!("{rate:.1}/s"), f.plan_for(&plan, rate)),
                None => break,
            },
            None => match levels.get(runs) {
                Some(level) => {
                    let mut p = plan.clone();
                    p.concurrency = *level;
                    (format!("{level} sessions"), p)
                }
                None => break,
            },
        };
        runs += 1;
        p.config_json["concurrency"] = p.concurrency.into();
        let listeners = match listeners.take() {
            Some(l) => l,
            None => crate::sink::bind(&[Listen::Tcp(sink_addr)])
                .await
                .map_err(|e| (EXIT_FAILED, e))?,
        };
        if levels.len() > 1 || find.is_some() {
            crate::report::live::say(&format!("mailbench relay: step {runs}: {label}"));
        }
        let step_drain = match &find {
            Some(f) => drain_timeout.min(f.step * 3),
            None => drain_timeout,
        };
        // Accept and arrival times per message, for end to end from acceptance.
        let run_id = crate::send::new_run_id();
        let accepts = std::sync::Arc::new(crate::send::plan::TimeLog::default());
        p.run_id = Some(run_id);
        p.accept_log = Some(accepts.clone());
        let run = RelayRun {
            accepts,
            delivery: std::sync::Arc::new(Delivery::tracking(run_id)),
            send: p,
            sink: make_sink(rules.clone()),
            listeners,
            drain_timeout: step_drain,
            sut_pids: sut_pids.clone(),
            thresholds: thresholds.clone(),
            queue_cmd: a.queue_cmd.clone(),
            interval: outputs.interval,
            quiet: outputs.quiet,
        };
        let r = match crate::relay::run(run, lab.as_ref(), shutdown.clone()).await {
            Ok(r) => r,
            Err(RelayError::Unreachable(e)) => return Err((EXIT_USAGE, e)),
            Err(RelayError::Failed(e)) => return Err((EXIT_FAILED, e)),
        };
        let s = &r.summary;
        let mut row = serde_json::json!({
            "concurrency": r.config["concurrency"],
            "inject_mpm": s["inject_mpm"],
            "drain_mpm": s["drain_mpm"],
            "e2e_p50_ms": s["e2e_p50_ms"],
            "e2e_p99_ms": s["e2e_p99_ms"],
            "max_backlog": s["max_backlog"],
            "delivered": s["delivered"],
            "lost": s["lost"],
            "errors": s["errors"],
        });
        if let Some(f) = &mut find {
            let (rate, ok, why) = f.judge(&r);
            row["rate_per_sec"] = rate.into();
            row["sustained"] = ok.into();
            row["why"] = why.into();
        }
        rows.push(row);
        results = Some(r);
        if shutdown.stop.is_cancelled() {
            break;
        }
    }
    let Some(mut results) = results else {
        return Err((EXIT_FAILED, "no relay run completed".into()));
    };
    if let Some(f) = &find {
        results.summary["max_sustainable_per_sec"] = f.good.into();
        results.summary["max_sustainable_mpm"] = (f.good * 60.0).into();
        results.extra.insert("find_max".into(), rows.into());
    } else if rows.len() > 1 {
        results.extra.insert("sweep".into(), rows.into());
    }
    // Once more on the final summary: the search's verdict is only in it now.
    results.check(&thresholds);
    if let Some(l) = &lab {
        // Keep the MTA's log with the results.
        if let Some(json) = &outputs.json {
            for (i, inst) in l.instances.iter().enumerate() {
                let to = json.with_extension(format!("maillog.{i}"));
                let _ = std::fs::copy(inst.dir.join("maillog"), &to);
            }
        }
        results
            .extra
            .insert("lab_notices".into(), l.notices.clone().into());
        let dirs: Vec<String> = l
            .instances
            .iter()
            .flat_map(|i| [i.dir.display().to_string(), i.queue.display().to_string()])
            .collect();
        results.extra.insert("lab_dirs".into(), dirs.into());
    }
    drop(lab); // stop and clean up before reporting
    let headline = format!(
        "mailbench relay: {} messages through {target} to the sink at {sink_addr}",
        results.counters.sent
    );
    deliver(
        &results,
        &outputs,
        &crate::report::text::render_relay(&results, &headline),
    )
}

/// Starts the lab off the runtime (it waits for Postfix); a refused `--postconf` value is
/// a usage error, anything else a failure.
async fn start_lab(opts: LabOptions) -> Result<Lab, (u8, String)> {
    match tokio::task::spawn_blocking(move || Lab::start(&opts)).await {
        Ok(Ok(lab)) => Ok(lab),
        Ok(Err(e @ LabError::Setting(_))) => Err((EXIT_USAGE, e.to_string())),
        Ok(Err(e)) => Err((EXIT_FAILED, e.to_string())),
        Err(e) => Err((EXIT_FAILED, e.to_string())),
    }
}

/// Runs `lab`: start, print where it listens, wait for Ctrl-C or SIGTERM, clean up.
pub async fn lab(a: LabArgs) -> Result<u8, (u8, String)> {
    let relay = tcp(&a.relay, 2525, "--relay").map_err(|e| (EXIT_USAGE, e))?;
    let opts = lab_options(&a.shape, relay, a.starttls).map_err(|e| (EXIT_USAGE, e))?;
    crate::lab::postfix::check().map_err(|e| (EXIT_USAGE, e))?;
    let shutdown =
        Shutdown::install_saying("mailbench lab: stopping Postfix and removing its directories");
    let lab = start_lab(opts).await?;
    let mut text = String::new();
    for n in &lab.notices {
        text += &format!("notice: {n}\n");
    }
    for (i, inst) in lab.instances.iter().enumerate() {
        text += &format!(
            "postfix {i}: smtpd on {}, config {}\n",
            inst.smtpd,
            inst.dir.display()
        );
        if a.starttls && i == 0 {
            text += &format!(
                "  STARTTLS certificate {} (for --tls-ca)\n",
                inst.dir.join("tls.crt").display()
            );
        }
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

/// The `--find-max` search: double the open-loop rate while the MTA keeps up, then bisect
/// between the last rate it sustained and the first it did not.
struct FindMax {
    step: Duration,
    max_p99_ms: f64,
    rate: f64,
    /// Highest rate sustained so far.
    good: f64,
    /// Lowest rate not sustained so far.
    bad: Option<f64>,
    bisections: u32,
    steps: u32,
}

impl FindMax {
    fn new(a: &RelayArgs) -> Result<Option<FindMax>, String> {
        if !a.find_max {
            return Ok(None);
        }
        Ok(Some(FindMax {
            step: units::duration(&a.step)?,
            max_p99_ms: units::duration(&a.max_e2e_p99)?.as_secs_f64() * 1000.0,
            rate: units::rate(&a.start_rate)?,
            good: 0.0,
            bad: None,
            bisections: 0,
            steps: 0,
        }))
    }

    /// The next rate to try, or `None` when the search is done.
    fn next_rate(&mut self) -> Option<f64> {
        if self.steps >= 16 || self.bisections >= 4 {
            return None;
        }
        if let Some(bad) = self.bad {
            if self.good > 0.0 && (bad - self.good) / self.good < 0.05 {
                return None;
            }
            if self.good == 0.0 && self.steps > 0 && bad <= self.rate {
                // Even the first rate failed: try lower, down to 1/s.
                if bad <= 1.0 {
                    return None;
                }
                self.rate = (bad / 2.0).max(1.0);
                return Some(self.rate);
            }
            self.rate = (self.good + bad) / 2.0;
            self.bisections += 1;
        }
        Some(self.rate)
    }

    fn plan_for(&self, base: &crate::send::SendPlan, rate: f64) -> crate::send::SendPlan {
        let mut p = base.clone();
        p.pacing = crate::send::schedule::Pacing::Open {
            rate,
            arrivals: crate::send::schedule::Arrivals::Constant,
            ramp_from: None,
            ramp_over: None,
        };
        p.max_messages = u64::MAX;
        p.duration = Some(self.step);
        p.config_json["pacing"] = serde_json::json!({"mode": "open", "rate": rate});
        p
    }

    /// Whether the step at the current rate was sustained, and why not.
    fn judge(&mut self, r: &crate::stats::Results) -> (f64, bool, String) {
        self.steps += 1;
        let rate = self.rate;
        let s = &r.summary;
        let n = |k: &str| s[k].as_f64().unwrap_or(0.0);
        let step_s = self.step.as_secs_f64();
        let failed = n("errors") + n("rejected");
        let keeps_pace = crate::relay::keeps_pace(&r.series, step_s, rate);
        let why = if n("lost") > 0.0 {
            format!("{} lost", n("lost"))
        } else if failed > n("sent") * 0.01 {
            format!("{failed} failed injections")
        } else if n("e2e_p99_ms") > self.max_p99_ms {
            format!("e2e p99 {:.0} ms", n("e2e_p99_ms"))
        } else if let Err(why) = keeps_pace {
            why
        } else if n("accepted") < rate * step_s * 0.95 {
            format!("injected {} of {:.0}", n("accepted"), rate * step_s)
        } else {
            String::new()
        };
        let ok = why.is_empty();
        if ok {
            self.good = self.good.max(rate);
            if self.bad.is_none() {
                self.rate = rate * 2.0;
            }
        } else {
            self.bad = Some(self.bad.map_or(rate, |b| b.min(rate)));
        }
        (rate, ok, if ok { "kept up".into() } else { why })
    }
}
