//! The relay benchmark as a whole: the start-up order (the sink's listener, then the lab,
//! then load), one run or a series of them (a concurrency sweep, or the capacity search),
//! what they found, and clean-up on every path: the lab goes when this returns, however
//! it returns.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::RelayError;
use super::dns::{self, Embedded, RelayDns};
use super::run::{Receiver, RelayRun, run};
use super::verdict::{StepRules, judge};
use crate::lab::{LabError, LabOptions, Mta, MtaLab};
use crate::load::schedule::{Arrivals, Pacing};
use crate::run::live::say;
use crate::run::sampler::Pids;
use crate::search::{FindMax, Sweep};
use crate::send::SendPlan;
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;
use crate::sink::plan::SinkPlan;
use crate::stats::Results;
use crate::stats::host::Device;
use crate::stats::summary::Summary;
use crate::stats::timelog::TimeLog;
use crate::transport::listen::{Listen, Listener, bind, local_addrs};
use crate::transport::shape::{Hop, LinkShape};
use crate::transport::shaper::Shaper;
use crate::transport::target::Target;

/// A validated relay benchmark.
#[derive(Clone)]
pub struct RelayPlan {
    /// The generator's plan. Its targets are the MTA given with `--target`; with a lab they
    /// are empty and filled in when the lab has started.
    pub send: SendPlan,
    /// The lab to start, and how; its relay target is the sink, set once it listens.
    pub lab: Option<(Mta, LabOptions)>,
    /// Where the embedded sink listens (port 0: a free one).
    pub sink: SocketAddr,
    /// The embedded sink's fault rules.
    pub sink_faults: crate::sink::faults::FaultPlan,
    /// Longest wait for deliveries after injection.
    pub drain_timeout: Duration,
    /// The concurrency levels of a sweep (empty: one run at the plan's concurrency).
    pub levels: Vec<usize>,
    /// The capacity search, instead of a sweep.
    pub find_max: Option<FindMaxPlan>,
    /// `--settle`: each step first runs its load this long, drained and kept out of the
    /// step's figures (seed 001 judged only the steady part of each step).
    pub settle: Option<Duration>,
    /// A shell command whose first number is sampled per interval (e.g. a queue count).
    pub queue_cmd: Option<String>,
    /// More process trees to observe as the system under test.
    pub sut_pids: Vec<u32>,
    /// Copy the lab MTA's logs to `BASE.maillog.N` (N: the instance, first hop 0) before
    /// the lab goes, and name them in the results (`extra.mta_logs`).
    pub keep_logs: Option<PathBuf>,
    /// The block device holding an external MTA's queue (`--queue-device`); a lab's is
    /// found from its queue directory.
    pub queue_device: Option<Device>,
    /// The flush benchmark: the lab holds everything injected, then releases it at once;
    /// injection and drain are measured apart.
    pub flush: bool,
    /// The embedded sink verifies DKIM signatures against this key.
    pub dkim_verify: Option<Arc<crate::sink::dkim::Verifier>>,
    /// DNS in the benchmark: the embedded DNS server, the sink on several addresses.
    pub dns: Option<RelayDns>,
    /// `--trace-io`: each run counts the MTA's fsyncs, file operations, bytes written and
    /// context switches per delivered message, from the kernel.
    pub trace_io: bool,
    /// `--fault`: the lab MTA crashed (or its power cut) during injection, restarted, and
    /// every accepted message judged delivered, lost or duplicated.
    pub fault: Option<super::fault::FaultPlan>,
    /// `--link`: hops whose network is shaped (a delay, a jitter, a rate), each through
    /// a shaping relay of its own for the whole benchmark.
    pub links: Vec<LinkShape>,
}

impl RelayPlan {
    /// The variant of this plan with `key=value` set in the lab (replacing the key if
    /// `--mta-conf` set it), and recorded so in its configuration: one side of a settings
    /// comparison.
    pub fn with_setting(&self, key: &str, value: &str) -> RelayPlan {
        let mut p = self.clone();
        if let Some((_, opts)) = &mut p.lab {
            opts.settings.retain(|(k, _)| k != key);
            opts.settings.push((key.to_string(), value.to_string()));
        }
        let setting = format!("{key}={value}");
        let conf = &mut p.send.config_json["relay"]["mta_conf"];
        match conf.as_array_mut() {
            Some(list) => {
                list.retain(|v| {
                    !v.as_str()
                        .is_some_and(|s| s.starts_with(&format!("{key}=")))
                });
                list.push(setting.into());
            }
            None => *conf = serde_json::json!([setting]),
        }
        p
    }

    /// The variant of this plan on another lab MTA: one side of an MTA comparison.
    pub fn on_mta(&self, mta: Mta) -> RelayPlan {
        let mut p = self.clone();
        if let Some((m, _)) = &mut p.lab {
            *m = mta;
        }
        p
    }
}

/// `--find-max`: where to start, and what each step must show.
#[derive(Debug, Clone, Copy)]
pub struct FindMaxPlan {
    /// The first rate tried, per second.
    pub start_rate: f64,
    /// The step's length and its limits.
    pub rules: StepRules,
}

/// The runs a benchmark makes, one after another.
enum Steps {
    /// One run, or one per concurrency level.
    Sweep(Sweep),
    /// Open-loop steps at the rates the search picks.
    FindMax(FindMax, StepRules),
}

/// Runs the benchmark; the lab (if any) is stopped and removed before this returns.
pub async fn bench(mut plan: RelayPlan, shutdown: Shutdown) -> Result<Results, RelayError> {
    if let Some((mta, _)) = &plan.lab {
        mta.check().map_err(RelayError::Usage)?;
    }
    if plan.trace_io {
        trace_io_possible(&plan).map_err(RelayError::Usage)?;
    }
    crate::limits::raise_nofile();
    if let Some(d) = &plan.dns {
        dns::files_for_sinks(d.sinks).map_err(RelayError::Usage)?;
    }
    let (listeners, sink_listen) = match &plan.dns {
        Some(d) => dns::bind_sinks(d.sinks).await,
        None => bind(&[Listen::Tcp(plan.sink)])
            .await
            .map(|l| (l, Vec::new())),
    }
    .map_err(RelayError::Failed)?;
    let sink_addr: SocketAddr = local_addrs(&listeners)
        .first()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| RelayError::Failed("the sink did not bind".into()))?;
    let sink_listen = match sink_listen {
        l if l.is_empty() => vec![Listen::Tcp(sink_addr)],
        l => l,
    };
    let embedded = match &plan.dns {
        Some(d) => Some(Arc::new(
            dns::start(d, &sink_listen)
                .await
                .map_err(RelayError::Failed)?,
        )),
        None => None,
    };
    let link = |hop: Hop| plan.links.iter().find(|l| l.hop == hop).copied();
    // The MTA reaches the sink through the sink hop's link, when it is shaped.
    let sink_link = match link(Hop::Sink) {
        Some(_) if plan.dns.is_some() => {
            return Err(RelayError::Usage(
                "--link sink: with --dns-domains the MTA reaches the sink at several addresses; shape --link mta, or leave out --dns-domains".into(),
            ));
        }
        Some(shape) => Some(shaper(sink_addr, shape).await?),
        None => None,
    };
    let between = link(Hop::MtaMta);
    if between.is_some() && plan.lab.as_ref().is_none_or(|(_, o)| o.hops < 2) {
        return Err(RelayError::Usage(
            "--link mta-mta: shapes the way from one lab MTA to the next; give --lab with --hops 2 or more".into(),
        ));
    }
    let lab = match plan.lab.take() {
        Some((mta, mut opts)) => {
            opts.relay = sink_link.as_ref().map_or(sink_addr, Shaper::addr);
            opts.between = between;
            opts.hold = plan.flush;
            opts.dns = embedded.as_ref().map(|e| crate::lab::LabDns {
                resolver: e.resolver,
                port: sink_addr.port(),
            });
            let lab = start_lab(mta, opts, &shutdown).await?;
            for n in lab.notices() {
                say(&format!("mailbench relay: notice: {n}"));
            }
            plan.send.client.targets = vec![Target::Tcp {
                addr: lab.entry(),
                host: lab.entry().ip().to_string(),
            }];
            Some((mta, lab))
        }
        None => None,
    };
    // mailbench reaches the MTA through the mta hop's link, when it is shaped (kept
    // until the benchmark ends, as the sink hop's).
    let _mta_link = match link(Hop::Mta) {
        Some(shape) => {
            let Some(Target::Tcp { addr, host }) = plan.send.client.targets.first().cloned() else {
                return Err(RelayError::Usage(
                    "--link mta: the MTA is not at a TCP address; give --target HOST:PORT or --lab"
                        .into(),
                ));
            };
            if plan.send.client.targets.len() > 1 {
                return Err(RelayError::Usage(
                    "--link mta: shapes the way to one MTA; give one --target".into(),
                ));
            }
            let s = shaper(addr, shape).await?;
            // The results name the MTA as the target, and the link's end as where
            // mailbench connected (`targets`).
            plan.send.config_json["target"] = addr.to_string().into();
            plan.send.client.targets = vec![Target::Tcp {
                addr: s.addr(),
                host,
            }];
            Some(s)
        }
        None => None,
    };
    let relay = &mut plan.send.config_json["relay"];
    relay["lab"] = lab.as_ref().map(|(m, _)| m.name()).into();
    relay["sink"] = sink_addr.to_string().into();
    relay["sink_rules"] = serde_json::to_value(&plan.sink_faults.rules).unwrap_or_default();
    let f = &plan.sink_faults;
    for (key, value) in [
        (
            "sink_greylist_s",
            f.greylist.map(|d| d.as_secs_f64()).into(),
        ),
        (
            "sink_tarpit_s",
            (!f.tarpit.is_zero())
                .then_some(f.tarpit.as_secs_f64())
                .into(),
        ),
        ("sink_max_conns_per_ip", f.max_conns_per_ip.into()),
        ("sink_max_msgs_per_conn", f.max_msgs_per_conn.into()),
        ("sink_rate_per_ip", f.rate_per_ip.into()),
    ] {
        if value != serde_json::Value::Null {
            relay[key] = value;
        }
    }
    relay["drain_timeout_s"] = plan.drain_timeout.as_secs_f64().into();
    if let (Some(d), Some(e)) = (&plan.dns, &embedded) {
        relay["dns"] = serde_json::json!({
            "resolver": format!("{}:53", e.resolver),
            "domains": d.zones.domains.len(),
            "mx_per_domain": d.zones.mx_per_domain,
            "no_mx": d.zones.no_mx,
            "ttl_s": d.zones.ttl,
            "sinks": sink_listen.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
            "rules": d.faults.rules,
        });
    }
    let mta = lab.as_ref().map(|(m, _)| *m);
    let lab = lab.map(|(_, l)| l);
    // An MTA that stops answering ends the run, said in one line naming what is stuck.
    let watchdog = lab.as_ref().map(|l| {
        let s = shutdown.clone();
        let name = relay["lab"].as_str().unwrap_or("mta").to_string();
        crate::lab::watch::Watchdog::start(
            crate::lab::watch::Watched::mta(&name, l.clone()),
            move |_| {
                s.stop.cancel();
                s.abort.cancel();
            },
        )
    });
    let stalled = || {
        watchdog
            .as_ref()
            .and_then(|w| w.stalled())
            .map(RelayError::Failed)
    };
    let queue_device = match (&lab, &plan.queue_device) {
        (Some(l), _) => Some(Device::holding(&l.queue_dir())),
        (None, Some(d)) => Some(Ok(d.clone())),
        (None, None) => None,
    };
    let sut_pids: Pids = {
        let (extra, lab) = (plan.sut_pids.clone(), lab.clone());
        Arc::new(move || {
            let mut pids = crate::stats::sut::descendants(&extra);
            pids.extend(lab.as_ref().map(|l| l.pids()).unwrap_or_default());
            pids
        })
    };
    let mut runner = Runner {
        listeners: Some(listeners),
        sink_listen,
        pids: sut_pids,
        device: queue_device,
        lab: lab.clone(),
        mta,
        dns: embedded.clone(),
    };
    let mut steps = match plan.find_max {
        Some(f) => Steps::FindMax(FindMax::new(f.start_rate), f.rules),
        None if plan.levels.is_empty() => {
            Steps::Sweep(Sweep::new(vec![plan.send.load.concurrency]))
        }
        None => Steps::Sweep(Sweep::new(plan.levels.clone())),
    };
    // The warm-up: the same load on the same lab, drained, recorded apart.
    let warmed = match plan.send.warmup.take() {
        Some(d) => {
            crate::send::announce_warmup("relay", d, plan.send.load.progress.quiet);
            let w = runner
                .run(
                    &plan,
                    plan.send.warm_up_for(d),
                    plan.drain_timeout,
                    &shutdown,
                )
                .await
                .map_err(|e| stalled().unwrap_or(e))?;
            if let Some(e) = stalled() {
                return Err(e);
            }
            Some(crate::send::warmup_record(&w))
        }
        None => None,
    };
    let announce = plan.levels.len() > 1 || plan.find_max.is_some();
    let mut rows = Vec::new();
    let mut results: Option<Results> = None;
    let mut runs = 0usize;
    loop {
        let (label, p) = match &mut steps {
            Steps::FindMax(f, rules) => match f.next_rate() {
                Some(rate) => (
                    format!("{rate:.1}/s"),
                    at_rate(&plan.send, rate, rules.step),
                ),
                None => break,
            },
            Steps::Sweep(s) => match s.next_level() {
                Some(level) => {
                    let mut p = plan.send.clone();
                    p.load.concurrency = level;
                    (format!("{level} sessions"), p)
                }
                None => break,
            },
        };
        runs += 1;
        if announce {
            say(&format!("mailbench relay: step {runs}: {label}"));
        }
        let drain_timeout = match &steps {
            Steps::FindMax(_, rules) => plan.drain_timeout.min(rules.step * 3),
            Steps::Sweep(_) => plan.drain_timeout,
        };
        // The step's settle: its own load, under its own run id, drained before the
        // measured run starts, so none of it is in the step's figures.
        let settled = match plan.settle {
            Some(d) => {
                let s = runner
                    .run(&plan, p.warm_up_for(d), drain_timeout, &shutdown)
                    .await
                    .map_err(|e| stalled().unwrap_or(e))?;
                if let Some(e) = stalled() {
                    return Err(e);
                }
                Some(settle_record(&s))
            }
            None => None,
        };
        let r = runner
            .run(&plan, p, drain_timeout, &shutdown)
            .await
            .map_err(|e| stalled().unwrap_or(e))?;
        if let Some(e) = stalled() {
            return Err(e);
        }
        let mut row = evidence(&r);
        if let Some(s) = settled {
            row["settle"] = s;
        }
        match &mut steps {
            Steps::FindMax(f, rules) => {
                let rate = r.config["pacing"]["rate"].as_f64().unwrap_or(0.0);
                let verdict = judge(&r, rate, rules);
                f.record(verdict.is_ok());
                row["rate_per_sec"] = rate.into();
                row["sustained"] = verdict.is_ok().into();
                row["why"] = verdict.err().unwrap_or_else(|| "kept up".into()).into();
            }
            Steps::Sweep(_) => row["why"] = level_verdict(&r).into(),
        }
        if shutdown.stop.is_cancelled() {
            rows.push(row);
            results = Some(r);
            break;
        }
        // The next step starts on an empty MTA: what this one left queued would compete
        // with it and make it look slower than it is.
        if announce
            && let Some(l) = &lab
            && let Some(left) = emptied(l.clone(), plan.drain_timeout, &shutdown).await
        {
            row["queued_at_next_step"] = left.into();
        }
        rows.push(row);
        results = Some(r);
    }
    let mut results = results.ok_or_else(|| RelayError::Failed("no relay run completed".into()))?;
    if let Some(w) = warmed {
        results.extra.insert("warmup".into(), w);
    }
    match &steps {
        Steps::FindMax(f, _) => {
            if let Summary::Relay(s) = &mut results.summary {
                s.max_sustainable_per_sec = Some(f.best());
                s.max_sustainable_mpm = Some(f.best() * 60.0);
            }
            results.extra.insert("find_max".into(), rows.into());
        }
        Steps::Sweep(_) if rows.len() > 1 => {
            results.extra.insert("sweep".into(), rows.into());
        }
        Steps::Sweep(_) => {}
    }
    if let Some(l) = &lab {
        if let Some(base) = &plan.keep_logs {
            // The results name the logs of the very run they describe.
            let kept = l.keep_logs(base, "maillog");
            results.extra.insert("mta_logs".into(), kept.into());
        }
        results
            .extra
            .insert("lab_notices".into(), l.notices().to_vec().into());
        let dirs: Vec<String> = l.dirs().iter().map(|d| d.display().to_string()).collect();
        results.extra.insert("lab_dirs".into(), dirs.into());
    }
    drop(runner);
    if let Some(e) = embedded.and_then(Arc::into_inner) {
        e.stop().await;
    }
    Ok(results)
}

/// What every run of one benchmark shares: the sink's addresses (its listeners bound once
/// and bound again for each later run), what is watched of the system under test, the lab,
/// the DNS server.
struct Runner {
    listeners: Option<Vec<Listener>>,
    sink_listen: Vec<Listen>,
    pids: Pids,
    device: Option<Result<Device, String>>,
    lab: Option<Arc<dyn MtaLab>>,
    /// Which MTA the lab is (its log is read for each run's deliveries and bounces).
    mta: Option<Mta>,
    dns: Option<Arc<Embedded>>,
}

impl Runner {
    /// One run of the benchmark on its own run id, accept and arrival logs.
    async fn run(
        &mut self,
        plan: &RelayPlan,
        send: SendPlan,
        drain_timeout: Duration,
        shutdown: &Shutdown,
    ) -> Result<Results, RelayError> {
        let listeners = match self.listeners.take() {
            Some(l) => l,
            None => bind(&self.sink_listen).await.map_err(RelayError::Failed)?,
        };
        let watched = (self.pids.clone(), self.device.clone());
        // The MTA's log is read for DNS deferrals only when DNS is in the benchmark.
        let deferred = || {
            self.dns.as_ref()?;
            self.lab.as_ref().map(|l| l.dns_deferred() as u64)
        };
        let deferred_before = deferred();
        if let Some(d) = &self.dns {
            d.begin();
        }
        let mut r = run_once(
            plan,
            send,
            listeners,
            drain_timeout,
            watched,
            self.lab.clone().zip(self.mta),
            shutdown,
        )
        .await?;
        if let Some(d) = &self.dns {
            let since = deferred()
                .zip(deferred_before)
                .map(|(a, b)| a.saturating_sub(b));
            d.finish(&mut r, since);
        }
        Ok(r)
    }
}

/// One run of the benchmark on its own run id, accept and arrival logs.
async fn run_once(
    plan: &RelayPlan,
    mut send: SendPlan,
    listeners: Vec<Listener>,
    drain_timeout: Duration,
    (pids, device): (Pids, Option<Result<Device, String>>),
    lab: Option<(Arc<dyn MtaLab>, Mta)>,
    shutdown: &Shutdown,
) -> Result<Results, RelayError> {
    let (lab, mta) = lab.unzip();
    let run_id = crate::run::new_run_id();
    let accepts = Arc::new(TimeLog::default());
    send.load.run_id = Some(run_id);
    send.accept_log = Some(accepts.clone());
    send.data_end_log = Some(Arc::new(TimeLog::default()));
    let sink = SinkPlan::embedded(
        Listen::Tcp(plan.sink),
        plan.sink_faults.clone(),
        send.load.progress,
    )
    .map_err(RelayError::Failed)?;
    let sink = SinkPlan {
        dkim: plan.dkim_verify.clone(),
        ..sink
    };
    let r = RelayRun {
        accepts,
        delivery: Arc::new(Delivery::tracking(run_id)),
        send,
        receiver: Receiver::Sink {
            plan: Box::new(sink),
            listeners,
        },
        drain_timeout,
        settle: Duration::from_secs(1),
        sut_pids: pids,
        queue_cmd: plan.queue_cmd.clone(),
        queue_device: device,
        flush: plan.flush,
        trace_io: plan.trace_io,
        mta,
        fault: plan.fault,
    };
    run(r, lab, shutdown.clone()).await
}

/// A shaping relay in front of `server`.
async fn shaper(server: SocketAddr, shape: LinkShape) -> Result<Shaper, RelayError> {
    Shaper::start(server, shape)
        .await
        .map_err(|e| RelayError::Failed(format!("--link: cannot listen on loopback: {e}")))
}

/// Whether `--trace-io` can count anything, checked before the lab starts: the kernel must
/// let this process trace, and there must be MTA processes to trace.
fn trace_io_possible(plan: &RelayPlan) -> Result<(), String> {
    if plan.lab.is_none() && plan.sut_pids.is_empty() {
        return Err(
            "--trace-io needs --lab or --sut-pid: the MTA's processes are the ones counted".into(),
        );
    }
    crate::run::iotrace::available()
}

/// The generator's plan for one open-loop step at `rate` per second for `step`.
fn at_rate(base: &SendPlan, rate: f64, step: Duration) -> SendPlan {
    let mut p = base.clone();
    p.load.pacing = Pacing::Open {
        rate,
        arrivals: Arrivals::Constant,
        ramp_from: None,
        ramp_over: None,
    };
    p.load.count = u64::MAX;
    p.load.duration = Some(step);
    p.config_json["pacing"] = serde_json::json!({"mode": "open", "rate": rate});
    p
}

/// A run's row in a sweep or a search: the figures that compare between levels (null
/// where nothing arrived to give them).
fn evidence(r: &Results) -> serde_json::Value {
    let Summary::Relay(s) = &r.summary else {
        return serde_json::Value::Null;
    };
    serde_json::json!({
        "concurrency": r.config["concurrency"],
        "inject_mpm": s.inject_mpm,
        "inject_per_sec": s.injection.msgs_per_sec,
        "drain_mpm": s.drain_mpm,
        "delivery_per_sec": s.delivery_per_sec,
        "e2e_p50_ms": s.e2e_p50_ms,
        "e2e_p99_ms": s.e2e_p99_ms,
        "max_backlog": s.max_backlog,
        "delivered": s.delivered,
        "bounced": s.bounced,
        "lost": s.lost,
        "damaged": s.damaged,
        "drained": s.drained,
        "errors": s.injection.errors,
    })
}

/// What a step's settle did, kept apart from the step's figures: how long, what it sent
/// and what of it arrived.
fn settle_record(r: &Results) -> serde_json::Value {
    let delivered = match &r.summary {
        Summary::Relay(s) => s.delivered,
        _ => 0,
    };
    serde_json::json!({
        "duration_s": r.duration_s,
        "sent": r.counters.sent,
        "accepted": r.counters.accepted,
        "delivered": delivered,
    })
}

/// What a sweep's level shows: whether its figures describe a run the MTA finished (every
/// message delivered or bounced within the drain), or why not.
fn level_verdict(r: &Results) -> String {
    let Summary::Relay(s) = &r.summary else {
        return String::new();
    };
    let failed = s.injection.errors + s.injection.rejected;
    if s.drain_aborted {
        format!("drain aborted: {} undelivered", s.undelivered)
    } else if s.lost > 0 {
        format!("{} lost", s.lost)
    } else if s.damaged > 0 {
        format!("{} damaged (arrived cut or altered)", s.damaged)
    } else if !s.drained {
        "not drained within --drain-timeout".into()
    } else if failed > 0 {
        format!("{failed} failed injections")
    } else {
        "all delivered".into()
    }
}

/// After a step, waits (up to `timeout`) until the lab's MTA holds nothing more, so the
/// next step starts from an empty queue; what it still held when the wait ended, if any.
async fn emptied(lab: Arc<dyn MtaLab>, timeout: Duration, shutdown: &Shutdown) -> Option<u64> {
    let queued = |l: Arc<dyn MtaLab>| async move {
        tokio::task::spawn_blocking(move || l.queued() as u64)
            .await
            .unwrap_or(0)
    };
    let mut left = queued(lab.clone()).await;
    if left == 0 {
        return None;
    }
    say(&format!(
        "mailbench relay: the MTA still holds {left} messages; waiting for its queue to empty before the next step"
    ));
    let deadline = tokio::time::Instant::now() + timeout;
    while left > 0 && tokio::time::Instant::now() < deadline && !shutdown.stop.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(250)).await;
        left = queued(lab.clone()).await;
    }
    (left > 0).then_some(left)
}

/// Starts the lab off the runtime (it waits for the MTA; a signal cuts it short); a
/// setting the MTA refuses is the user's input, anything else a failure.
async fn start_lab(
    mta: Mta,
    opts: LabOptions,
    shutdown: &Shutdown,
) -> Result<Arc<dyn MtaLab>, RelayError> {
    match crate::lab::interrupt::start_mta(mta, opts, &shutdown.stop).await {
        Ok(lab) => Ok(Arc::from(lab)),
        Err(e @ LabError::Setting(_)) => Err(RelayError::Usage(e.to_string())),
        Err(e) => Err(RelayError::Failed(e.to_string())),
    }
}
