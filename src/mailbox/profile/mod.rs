//! `mailbox profile`: virtual users of a scenario (`scenario`), each on its own open-loop
//! schedule (`user`), at a fixed count or in steps (`--ramp-users`, the Domino study's
//! "add load generators") until a capacity rule breaks; the capacity is the largest user
//! count whose step met every rule, shown with the table of steps it stands on
//! (`capacity`). Its time series (users running, actions per interval, the store's
//! resources) is its own (`series`).

pub mod capacity;
pub mod scenario;
pub mod series;
pub mod user;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::lab::StoreUser;
use crate::report::threshold::Threshold;
use crate::run::sampler::Pids;
use crate::shutdown::Shutdown;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::{Results, RunParts, SelfReport};
use crate::stats::summary::{ProfileSummary, Summary, Vocabulary};
use crate::stats::{IntervalPoint, Metric, Recorder, Shards, Steps, SutPoint};
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;
use capacity::{Step, StepPlan};
use scenario::{Action, Scenario};

/// A profile run's latency rows: logins, each action, and every action together (kept
/// with its kind of run).
pub const STEPS: Steps = crate::stats::kind::profile::STEPS;

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

/// What `mailbox profile`'s `--threshold` and `--capacity-rule` may name (its kind of run
/// holds it).
pub const THRESHOLDS: Vocabulary = crate::stats::kind::profile::PROFILE.thresholds;

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
    /// The series' interval (a step's end also ends one).
    pub interval: Duration,
    /// A ramp's time limit (`-z`): the step it falls in is cut short, and none follows.
    pub run_limit: Option<Duration>,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
    /// Seeds every user's draws (when its actions fall due, which message, whom it sends
    /// to): two runs of one seed ask two stores for the same things. `None`: the run's id.
    pub seed: Option<u64>,
}

/// A user's due times, drawn ahead, oldest first.
type Schedule = Arc<std::sync::Mutex<std::collections::VecDeque<Instant>>>;

/// The servers a profile's actions connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The store's IMAP.
    Imap = 0,
    /// The store's POP3 (`check`).
    Pop3 = 1,
    /// The store's LMTP (`receive`, and `send` without an MTA).
    Lmtp = 2,
    /// The MTA users send through.
    Smtp = 3,
}

impl Server {
    fn name(self) -> &'static str {
        ["IMAP server", "POP3 server", "LMTP server", "MTA"][self as usize]
    }
}

/// Whether a server ever accepted a connection, and why it first did not.
#[derive(Default)]
struct Reach {
    opened: AtomicBool,
    unreachable: OnceLock<String>,
}

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
    /// Seeds the users' draws (`ProfilePlan::seed`).
    seed: u64,
    late_after: Duration,
    seq: AtomicU64,
    /// Time zero of the due times in `pending`.
    start: Instant,
    /// Per user, its schedule drawn ahead: the action it is doing and those due after it,
    /// so that a stuck user's backlog shows in the step it is stuck in, not only when (if
    /// ever) it ends.
    pending: std::sync::Mutex<Vec<Schedule>>,
    /// Held (shared) while an action is recorded and taken off its schedule, and
    /// (exclusive) while an interval is closed: an action is then either finished in the
    /// interval or due and not done at its end, never both nor neither.
    gate: RwLock<()>,
    /// Per [`Server`].
    reach: [Reach; 4],
}

impl Ctx {
    /// A new user's schedule.
    fn slot(&self) -> Schedule {
        let slot = Schedule::default();
        if let Ok(mut all) = self.pending.lock() {
            all.push(slot.clone());
        }
        slot
    }

    /// Records a finished action (`record` writes it into shard `shard`) and takes it off
    /// `schedule`, as one step against the close of an interval.
    fn finish(&self, shard: usize, schedule: &Schedule, record: impl FnOnce(&mut Recorder)) {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        record(&mut self.shards.get(shard));
        if let Ok(mut q) = schedule.lock() {
            q.pop_front();
        }
    }

    /// Closes an interval: moves what finished into `into` and returns the time and the
    /// actions due and not done then (running, or waiting behind one that runs), each as
    /// its user's index and due time.
    fn close(&self, into: &mut Recorder) -> (Instant, Vec<Due>) {
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        self.shards.drain_into(into);
        let now = Instant::now();
        let mut due = Vec::new();
        let Ok(all) = self.pending.lock() else {
            return (now, due);
        };
        for (i, user) in all.iter().enumerate() {
            let Ok(q) = user.lock() else { continue };
            due.extend(q.iter().take_while(|d| **d < now).map(|d| (i, *d)));
        }
        (now, due)
    }

    /// Notes whether a connection to `server` opened (`r`).
    fn reached<T, E: crate::load::Failure>(&self, server: Server, r: Result<T, E>) -> Result<T, E> {
        let reach = &self.reach[server as usize];
        match &r {
            Ok(_) => reach.opened.store(true, Ordering::Relaxed),
            Err(e) => {
                if let Some(line) = e.unreachable() {
                    let line = match line.strip_prefix("target ") {
                        Some(rest) => format!("{} {rest}", server.name()),
                        None => line,
                    };
                    let _ = reach.unreachable.set(line);
                }
            }
        }
        r
    }

    /// The line that says a server never accepted a connection (nothing this run measures
    /// means anything then), if one did not.
    fn unreachable(&self) -> Option<String> {
        self.reach
            .iter()
            .filter(|r| !r.opened.load(Ordering::Relaxed))
            .find_map(|r| r.unreachable.get().cloned())
    }
}

/// An action due and not done: its user's index and its due time.
type Due = (usize, Instant);

/// Records the actions `due` and not done at `at` into `rec`, at the time they had waited
/// then (a lower bound of their response time).
fn record_overdue(rec: &mut Recorder, due: &[Due], at: Instant) {
    for (_, d) in due {
        rec.record(metric(None), at.duration_since(*d));
    }
}

/// The last step as it ended, judged again once the actions in flight at its end have
/// finished (they are its own).
struct LastStep {
    plan: StepPlan,
    seconds: f64,
    /// What finished in it.
    rec: Recorder,
    store: Option<SutPoint>,
    cut_short: bool,
    /// Its last interval: the point rebuilt with what finished after it.
    interval: Recorder,
    point: IntervalPoint,
    /// When it ended, and what was due and not done then.
    end: (Instant, Vec<Due>),
}

/// Runs the users; `sut` lists the store's processes (for the series' and each step's
/// CPU, disk and memory). An action counts once: finished in a step, or due and not done
/// at the last step's end. At the end no action starts any more, and those in flight
/// finish (within a grace) as the last step's; what was due and waiting then, or is
/// still running after the grace, counts at the time it had waited at the end.
pub async fn run(plan: ProfilePlan, shutdown: Shutdown, sut: Pids) -> Result<Results, String> {
    if plan.users.is_empty() {
        return Err("no mailbox users to log in as".into());
    }
    // Only the servers the scenario's users talk to are needed.
    let needs = plan.scenario.needs(plan.smtp.is_some());
    let server = |what: &str, needed: bool, given: &Option<Target>| match given {
        None if needed => Err(format!(
            "no {what} server for scenario {}: give --lab {} or --{what}",
            plan.scenario.name,
            crate::lab::Store::names()
        )),
        _ => Ok(given.clone()),
    };
    let run_id = crate::run::new_run_id();
    let shards_n = crate::stats::collector::shards_for(usize::MAX);
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
        seed: plan.seed.unwrap_or(run_id),
        late_after: Duration::from_millis(5),
        seq: AtomicU64::new(0),
        start: Instant::now(),
        pending: std::sync::Mutex::new(Vec::new()),
        gate: RwLock::new(()),
        reach: Default::default(),
    });
    let start = ctx.start;
    let started_us = crate::stats::clock::unix_us();
    let cpu0 = CpuTimes::of_self();
    let mut tasks = tokio::task::JoinSet::new();
    let mut spawned = 0u64;
    let mut steps: Vec<Step> = Vec::new();
    let mut total = Recorder::new();
    let mut series = Vec::new();
    let net = plan.connect.count.as_ref().map(super::net::reader);
    let mut store = series::StoreReader::start(sut, net).await;
    let (mut tick_at, mut tick_cpu) = (start, cpu0);
    let mut unreachable = None;
    let mut last: Option<LastStep> = None;
    let run_end = plan.run_limit.map(|d| start + d);
    let mut plans = StepPlan::all(&plan.population).into_iter().peekable();
    while let Some(sp) = plans.next() {
        while spawned < sp.users {
            tasks.spawn(user::run(ctx.clone(), spawned, Instant::now()));
            spawned += 1;
        }
        let before = store.sample().await;
        let t0 = Instant::now();
        let step_end = run_end.map_or(t0 + sp.length, |e| e.min(t0 + sp.length));
        let mut rec = Recorder::new();
        let (iv, point, end) = loop {
            let next = (tick_at + plan.interval).min(step_end);
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = shutdown.stop.cancelled() => {}
            }
            let mut iv = Recorder::new();
            let (now, due) = ctx.close(&mut iv);
            let cpu = CpuTimes::of_self();
            let point = series::Interval {
                t_s: now.duration_since(start).as_secs_f64(),
                dt_s: now.duration_since(tick_at).as_secs_f64(),
                users: sp.users,
                rec: &iv,
                overdue: due.len() as u64,
                cpu: cpu.since(&tick_cpu),
                store: store.interval().await,
            }
            .point();
            rec.merge(&iv);
            (tick_at, tick_cpu) = (now, cpu);
            unreachable = ctx.unreachable();
            if now >= step_end || shutdown.stop.is_cancelled() || unreachable.is_some() {
                break (iv, point, (now, due));
            }
            series.push(point);
        };
        let seconds = t0.elapsed().as_secs_f64();
        let point_store = match (before, store.sample().await) {
            (Some(b), Some(a)) => Some(a.rates_since(&b, seconds)),
            _ => None,
        };
        let cut_short = cut_short(seconds, sp.length);
        // Judged with the actions still due, at the time they have waited so far.
        let mut judged = rec.clone();
        record_overdue(&mut judged, &end.1, end.0);
        let step = Step::judge(
            &sp,
            seconds,
            &judged,
            point_store.clone(),
            &plan.rules,
            end.1.len() as u64,
            cut_short,
        );
        let ends = !step.held() || unreachable.is_some() || plans.peek().is_none();
        let ends = ends || run_end.is_some_and(|e| Instant::now() >= e);
        if ends {
            last = Some(LastStep {
                plan: sp,
                seconds,
                rec,
                store: point_store,
                cut_short,
                interval: iv,
                point,
                end,
            });
            break;
        }
        if !plan.quiet {
            crate::run::live::say(&step.line());
        }
        total.merge(&rec);
        series.push(point);
        steps.push(step);
    }
    let duration_s = tick_at.duration_since(start).as_secs_f64();
    users_stop.cancel();
    // No action starts any more; those in flight finish, and count, as the last step's.
    // One stuck past the grace is cut off and counts as due and not done.
    let grace = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            j = tasks.join_next() => if j.is_none() { break },
            _ = &mut grace => { tasks.abort_all(); break }
        }
    }
    if let Some(line) = unreachable {
        return Err(line);
    }
    let mut overdue_n = 0;
    if let Some(mut l) = last {
        let mut after = Recorder::new();
        let (_, still) = ctx.close(&mut after);
        let still: std::collections::HashSet<Due> = still.into_iter().collect();
        let (end_at, due) = l.end;
        let due: Vec<Due> = due.into_iter().filter(|d| still.contains(d)).collect();
        overdue_n = due.len() as u64;
        l.rec.merge(&after);
        total.merge(&l.rec);
        record_overdue(&mut total, &due, end_at);
        let mut judged = l.rec;
        record_overdue(&mut judged, &due, end_at);
        let step = Step::judge(
            &l.plan,
            l.seconds,
            &judged,
            l.store,
            &plan.rules,
            overdue_n,
            l.cut_short,
        );
        if !plan.quiet {
            crate::run::live::say(&step.line());
        }
        steps.push(step);
        l.interval.merge(&after);
        let p = l.point;
        let profile = p.relay.profile.clone().unwrap_or_default();
        let mut rebuilt = series::Interval {
            t_s: p.t_s,
            dt_s: p.dt_s,
            users: profile.users,
            rec: &l.interval,
            overdue: overdue_n,
            cpu: CpuTimes::default(),
            store: p.relay.sut.clone(),
        }
        .point();
        rebuilt.cpu_pct = p.cpu_pct;
        series.push(rebuilt);
    }
    let cpu = CpuTimes::of_self().since(&cpu0);
    let verdict = capacity::verdict(&steps, &plan.population);
    let last_cpu = steps.last().and_then(|s| s.summary.sut_cpu);
    let summary = ProfileSummary::derive(
        &total,
        metric(None),
        spawned,
        verdict.users,
        duration_s,
        last_cpu,
        overdue_n,
    );
    let mut r = Results::assemble(RunParts {
        command: crate::stats::kind::profile::PROFILE.name,
        run_id,
        started_us,
        duration_s,
        config: plan.config_json.clone(),
        summary: Summary::Profile(summary),
        steps: STEPS,
        self_report: SelfReport::new(
            cpu,
            duration_s,
            cpu.total().as_secs_f64() / duration_s.max(1e-9) * 100.0,
            Vec::new(),
        ),
        total,
        series,
    });
    r.interrupted = shutdown.interrupted();
    r.extra
        .insert("capacity".into(), verdict.to_json(&steps, &plan.rules));
    Ok(r)
}

/// Whether a step that ran `seconds` of its `length` was cut short. A step that the run's
/// `-z` ends on its own schedule loses only the milliseconds its start took after the
/// previous step's end: 3.99 s of 4 s ran its length (it was "CUT SHORT after 4.0 s of
/// 4 s"). Short by more than 1 % (at least 50 ms) is cut short.
fn cut_short(seconds: f64, length: Duration) -> bool {
    let length = length.as_secs_f64();
    seconds + (length * 0.01).max(0.05) < length
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    #[test]
    fn a_step_ended_by_the_run_on_its_own_schedule_ran_its_length() {
        let four = Duration::from_secs(4);
        assert!(!cut_short(3.996, four), "lost 4 ms to the step's start");
        assert!(!cut_short(4.0, four));
        assert!(cut_short(3.9, four), "100 ms short");
        assert!(cut_short(2.0, four));
        assert!(
            cut_short(29.0, Duration::from_secs(30)),
            "a second short of 30 s"
        );
    }
}
