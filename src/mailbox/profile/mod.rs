//! `mailbox profile`: virtual users of a scenario (`scenario`), each on its own open-loop
//! schedule (`user`), at a fixed count or in steps (`--ramp-users`, the Domino study's
//! "add load generators") until a capacity rule breaks; the capacity is the largest user
//! count whose step met every rule, shown with the table of steps it stands on
//! (`capacity`).

pub mod capacity;
pub mod scenario;
pub mod user;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::lab::StoreUser;
use crate::report::threshold::Threshold;
use crate::shutdown::Shutdown;
use crate::stats::results::{Results, RunParts, SelfReport};
use crate::stats::summary::{ProfileSummary, Summary, Vocabulary};
use crate::stats::{Metric, Recorder, Shards, Steps};
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;
use capacity::{Step, StepPlan};
use scenario::{Action, Scenario};

/// A profile run's latency rows: logins, each action, and every action together.
pub const STEPS: Steps = Steps(&[
    "login",
    "open_inbox",
    "close_inbox",
    "read",
    "delete",
    "flag",
    "move",
    "search",
    "receive",
    "send",
    "check",
    "action",
]);

/// The login step (a session opened by a caching or login-per-action client).
pub const LOGIN: Metric = Metric::Step(0);

/// The step of an action, or of every action (`None`).
pub fn metric(a: Option<Action>) -> Metric {
    match a {
        Some(a) => {
            let i = Action::ALL.iter().position(|x| *x == a).unwrap_or(0);
            Metric::Step(1 + i as u8)
        }
        None => Metric::Step(1 + Action::ALL.len() as u8),
    }
}

/// The numeric keys of `mailbox profile`'s summary and its metrics: what `--threshold`
/// and `--capacity-rule` may name.
pub const THRESHOLDS: Vocabulary = Vocabulary {
    keys: &[&[
        "users",
        "capacity_users",
        "actions",
        "completed",
        "refused",
        "errors",
        "late",
        "overdue",
        "sent",
        "actions_per_min",
        "mean_ms",
        "p95_ms",
        "p99_ms",
        "sut_cpu",
        "duration_s",
    ]],
    steps: STEPS,
    metrics: |m| matches!(m, Metric::Step(_) | Metric::Lag),
};

/// How many users, for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Population {
    /// A fixed count for `for`.
    Fixed {
        /// Virtual users.
        users: u64,
        /// How long.
        run_for: Duration,
    },
    /// `start`, then `step` more every `period`, until a rule breaks or `max` is passed.
    Ramp {
        /// Users of the first step.
        start: u64,
        /// Users added per step.
        step: u64,
        /// Each step's length.
        period: Duration,
        /// No step above this many users.
        max: u64,
    },
}

/// A validated `mailbox profile` run.
#[derive(Clone)]
pub struct ProfilePlan {
    /// What the users do.
    pub scenario: Scenario,
    /// How many, for how long.
    pub population: Population,
    /// Simulated time per real time: 60 runs an hour of each user's actions in a minute.
    pub time_scale: f64,
    /// When a step breaks (any of them true): capacity rules.
    pub rules: Vec<Threshold>,
    /// The store's IMAP, POP3 and LMTP; filled in from the lab when there is one.
    pub imap: Option<Target>,
    /// See `imap`.
    pub pop3: Option<Target>,
    /// See `imap`.
    pub lmtp: Option<Target>,
    /// The MTA users send through (SMTP); without one, sends are delivered over the
    /// store's LMTP. With `lab_mta`, the lab Postfix's entry is filled in.
    pub smtp: Option<Target>,
    /// Start a lab Postfix that delivers into the lab store, for the users' sends.
    pub lab_mta: bool,
    /// Whose mailboxes: virtual user n is mailbox user n modulo their count.
    pub users: Arc<Vec<StoreUser>>,
    /// Connect and response limits.
    pub connect: ConnectOptions,
    /// No step lines.
    pub quiet: bool,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
}

/// A user's due times, drawn ahead, oldest first.
type Schedule = Arc<std::sync::Mutex<std::collections::VecDeque<Instant>>>;

/// What every virtual user shares.
pub struct Ctx {
    scenario: Scenario,
    time_scale: f64,
    users: Arc<Vec<StoreUser>>,
    imap: Option<Target>,
    pop3: Option<Target>,
    lmtp: Option<Target>,
    smtp: Option<Target>,
    connect: ConnectOptions,
    shards: Shards,
    shards_n: usize,
    stop: CancellationToken,
    run_id: u64,
    late_after: Duration,
    seq: AtomicU64,
    /// Time zero of the due times in `pending`.
    start: Instant,
    /// Per user, its schedule drawn ahead: the action it is doing and those due after it,
    /// so that a stuck user's backlog shows in the step it is stuck in, not only when (if
    /// ever) it ends.
    pending: std::sync::Mutex<Vec<Schedule>>,
}

impl Ctx {
    fn shards(&self, i: usize) -> std::sync::MutexGuard<'_, Recorder> {
        self.shards.get(i)
    }

    /// A new user's schedule.
    fn slot(&self) -> Schedule {
        let slot = Schedule::default();
        if let Ok(mut all) = self.pending.lock() {
            all.push(slot.clone());
        }
        slot
    }

    /// Records every action that is due and not done (running, or waiting behind one
    /// that runs) into `rec` at the time it has waited so far (a lower bound of its
    /// response time); returns how many there were.
    fn overdue(&self, rec: &mut Recorder) -> u64 {
        let now = Instant::now();
        let Ok(all) = self.pending.lock() else {
            return 0;
        };
        let mut n = 0;
        for user in all.iter() {
            let Ok(q) = user.lock() else { continue };
            for due in q.iter().take_while(|d| **d < now) {
                n += 1;
                rec.record(metric(None), now.duration_since(*due));
            }
        }
        n
    }
}

/// Runs the users; `sut` lists the store's processes (for each step's CPU and memory).
pub async fn run(
    plan: ProfilePlan,
    shutdown: Shutdown,
    sut: crate::run::sampler::Pids,
) -> Result<Results, String> {
    if plan.users.is_empty() {
        return Err("no mailbox users to log in as".into());
    }
    // Only the servers the scenario's users talk to are needed.
    let needs = plan.scenario.needs(plan.smtp.is_some());
    let server = |what: &str, needed: bool, given: &Option<Target>| match given {
        None if needed => Err(format!(
            "no {what} server for scenario {}: give --lab dovecot or --{what}",
            plan.scenario.name
        )),
        _ => Ok(given.clone()),
    };
    let run_id = crate::run::new_run_id();
    let shards_n = crate::stats::cpu::cpu_count() * 4;
    let users_stop = CancellationToken::new();
    let ctx = Arc::new(Ctx {
        scenario: plan.scenario.clone(),
        time_scale: plan.time_scale,
        users: plan.users.clone(),
        imap: server("imap", needs.imap, &plan.imap)?,
        pop3: server("pop3", needs.pop3, &plan.pop3)?,
        lmtp: server("lmtp", needs.lmtp, &plan.lmtp)?,
        smtp: plan.smtp.clone(),
        connect: plan.connect.clone(),
        shards: Shards::new(shards_n),
        shards_n,
        stop: users_stop.clone(),
        run_id,
        late_after: Duration::from_millis(5),
        seq: AtomicU64::new(0),
        start: Instant::now(),
        pending: std::sync::Mutex::new(Vec::new()),
    });
    let start = ctx.start;
    let started_us = crate::stats::clock::unix_us();
    let cpu0 = crate::stats::cpu::CpuTimes::of_self();
    let mut tasks = tokio::task::JoinSet::new();
    let mut spawned = 0u64;
    let mut steps: Vec<Step> = Vec::new();
    let mut total = Recorder::new();
    let plans = StepPlan::all(&plan.population);
    for sp in plans {
        while spawned < sp.users {
            tasks.spawn(user::run(ctx.clone(), spawned, Instant::now()));
            spawned += 1;
        }
        let before = crate::stats::sut::sample(&sut());
        let t0 = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(sp.length) => {}
            _ = shutdown.stop.cancelled() => {}
        }
        let mut rec = Recorder::new();
        ctx.shards.drain_into(&mut rec);
        let dt = t0.elapsed().as_secs_f64();
        let after = crate::stats::sut::sample(&sut());
        let point = after.rates_since(&before, dt);
        total.merge(&rec);
        // Judged with the actions still running, at the time they have taken so far.
        let overdue = ctx.overdue(&mut rec);
        let step = Step::judge(sp.users, dt, &rec, point, &plan.rules, overdue);
        if !plan.quiet {
            crate::run::live::say(&step.line());
        }
        let broken = step.broken;
        steps.push(step);
        if broken || shutdown.stop.is_cancelled() {
            break;
        }
    }
    users_stop.cancel();
    // Users finish the action in hand; a stuck one is cut off after the grace.
    let grace = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            j = tasks.join_next() => if j.is_none() { break },
            _ = &mut grace => { tasks.abort_all(); break }
        }
    }
    ctx.shards.drain_into(&mut total);
    let duration_s = start.elapsed().as_secs_f64();
    let cpu = crate::stats::cpu::CpuTimes::of_self().since(&cpu0);
    let verdict = capacity::verdict(&steps, &plan.population);
    let last_cpu = steps.last().map_or(0.0, |s| s.summary.sut_cpu);
    let summary = ProfileSummary::derive(
        &total,
        metric(None),
        spawned,
        verdict.users,
        duration_s,
        last_cpu,
    );
    let mut r = Results::assemble(RunParts {
        command: "profile",
        run_id,
        started_us,
        duration_s,
        config: plan.config_json.clone(),
        summary: Summary::Profile(summary),
        steps: STEPS,
        self_report: SelfReport::new(
            cpu,
            duration_s,
            cpu.total().as_secs_f64() / duration_s * 100.0,
            Vec::new(),
        ),
        total,
        series: Vec::new(),
    });
    r.interrupted = shutdown.interrupted();
    r.extra
        .insert("capacity".into(), verdict.to_json(&steps, &plan.rules));
    Ok(r)
}
