//! `mailbox profile`: virtual users of a scenario (`scenario`), each on its own open-loop
//! schedule (`user`), at a fixed count or in steps (`--ramp-users`, the Domino study's
//! "add load generators") until a step breaks; the capacity is the largest user count
//! whose step held, shown with the table of steps it stands on (`capacity`). Every action
//! counts once, in the step it fell due in, at its time as its user saw it (`ledger`);
//! one due in its step's first `--settle` is the settle's, kept out of the step's figures.
//! Its time series (users running, actions per interval, the store's resources) is its own
//! (`series`).

pub mod ledger;
pub mod scenario;
pub mod series;
pub mod user;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::lab::StoreUser;
/// The capacity search (kept with the results, where `merge` judges a split run's
/// steps again by the same rule).
pub use crate::report::capacity;
use crate::report::threshold::Threshold;
use crate::run::sampler::Pids;
use crate::shutdown::Shutdown;
use crate::stats::cpu::CpuTimes;
use crate::stats::results::{Results, RunParts, SelfReport};
use crate::stats::summary::{ProfileSummary, Summary, Vocabulary};
use crate::stats::{IntervalPoint, Metric, Recorder, Steps, SutPoint};
use crate::transport::connect::ConnectOptions;
use crate::transport::count::NetTally;
use crate::transport::target::Target;
pub use capacity::Population;
use capacity::{Settled, Step, StepPlan, Waits};
use ledger::{Ledger, Pending, StepBook};
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
    /// `--settle`: the first part of every step, whose actions are kept out of the step's
    /// figures and counted apart (seed 001 judged only the steady part of each step);
    /// zero: none. Shorter than a step.
    pub settle: Duration,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
    /// Seeds every user's draws (when its actions fall due, which message, whom it sends
    /// to): two runs of one seed ask two stores for the same things. `None`: the run's id.
    pub seed: Option<u64>,
    /// This agent's part of a profile split over several (`--shard`): it runs virtual
    /// users `n` with `n mod N = I` (each on mailbox `n`, so no two agents log in as one
    /// user), and its steps count its own users.
    pub shard: crate::load::shard::Shard,
    /// The shared start (`--start-at`): every agent's steps begin at the same instants,
    /// counted from it.
    pub start_at: Option<std::time::SystemTime>,
    /// The run id every agent of a split run shares (`--run-id`); `None`: a new one.
    pub run_id: Option<u64>,
}

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
    /// The first login it refused, in its words.
    refused: OnceLock<String>,
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
    shards_n: usize,
    stop: CancellationToken,
    run_id: u64,
    /// Seeds the users' draws (`ProfilePlan::seed`).
    seed: u64,
    late_after: Duration,
    seq: AtomicU64,
    /// Every user's schedule, and what finished, by interval and by step.
    ledger: Ledger,
    /// The bytes every connection of the run moved (below TLS).
    tally: NetTally,
    /// Connections made (a session lost in its set-up included), and connection attempts
    /// that failed before one was made.
    connections: AtomicU64,
    connect_failures: AtomicU64,
    /// Per [`Server`].
    reach: [Reach; 4],
}

impl Ctx {
    /// Notes whether a connection to `server` opened (`r`).
    fn reached<T, E: crate::load::Failure>(&self, server: Server, r: Result<T, E>) -> Result<T, E> {
        let reach = &self.reach[server as usize];
        match &r {
            Ok(_) => {
                reach.opened.store(true, Ordering::Relaxed);
                self.connections.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                match e.reached() {
                    true => &self.connections,
                    false => &self.connect_failures,
                }
                .fetch_add(1, Ordering::Relaxed);
                if e.login_refused() {
                    let _ = reach.refused.set(e.to_string());
                }
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

    /// Adds to `rec` the connections made and the bytes moved since `last` (the previous
    /// reading, updated): what crossed the wire, which no action's record holds.
    fn wire(&self, last: &mut Wire, rec: &mut Recorder) {
        let (read, written) = self.tally.totals();
        let now = Wire {
            read,
            written,
            connections: self.connections.load(Ordering::Relaxed),
            failures: self.connect_failures.load(Ordering::Relaxed),
        };
        let c = &mut rec.counters;
        c.bytes += now.read.saturating_sub(last.read);
        c.bytes_out += now.written.saturating_sub(last.written);
        c.connections += now.connections.saturating_sub(last.connections);
        c.connect_failures += now.failures.saturating_sub(last.failures);
        *last = now;
    }

    /// The line that says a server refused every login of the run (the users' passwords
    /// are not the store's: nothing it measured is a capacity), if one did.
    fn refused_all(&self) -> Option<String> {
        let targets = [&self.imap, &self.pop3, &self.lmtp, &self.smtp];
        let servers = [Server::Imap, Server::Pop3, Server::Lmtp, Server::Smtp];
        self.reach
            .iter()
            .zip(targets.iter().zip(servers))
            .filter(|(r, _)| !r.opened.load(Ordering::Relaxed))
            .find_map(|(r, (t, s))| {
                let said = r.refused.get()?;
                let at = t.as_ref().map_or(String::new(), |t| format!(" {t}"));
                Some(format!(
                    "{}{at} refused every login of the run ({said}): give --users-file with the store's users and passwords",
                    s.name()
                ))
            })
    }
}

/// What the run's connections had moved at a reading.
#[derive(Debug, Clone, Copy, Default)]
struct Wire {
    read: u64,
    written: u64,
    connections: u64,
    failures: u64,
}

/// Charges the actions `pending` (due and not done at `at`) to `rec`: each counts as an
/// action not done (`aborted`, the summary's `overdue`) at the time it had waited then, a
/// lower bound of its response time.
fn charge<'a>(rec: &mut Recorder, pending: impl IntoIterator<Item = &'a Pending>, at: Instant) {
    for p in pending {
        rec.counters.sent += 1;
        rec.counters.aborted += 1;
        rec.record(metric(None), at.saturating_duration_since(p.due));
    }
}

/// A step as it ran, apart from its actions (which the ledger keeps).
struct StepRun {
    plan: StepPlan,
    /// When it began, seconds from the run's start.
    from_s: f64,
    seconds: f64,
    store: Option<SutPoint>,
    cut_short: bool,
    /// Its actions not begun by the store when it ended, and the users left waiting.
    waits: Waits,
}

impl StepRun {
    /// Judges the step on its `book`, in which its actions not done are charged: on
    /// those due after its settle; those of its settle are counted apart.
    fn judge(&self, book: &StepBook, rules: &[Threshold]) -> Step {
        let settle = (!self.plan.settle.is_zero()).then_some(Settled {
            from_s: self.from_s,
            duration_s: self.plan.settle.as_secs_f64(),
            actions: book.settle.counters.sent,
        });
        Step::judge(
            &self.plan,
            self.seconds,
            &book.counted,
            self.store.clone(),
            rules,
            self.waits,
            self.cut_short,
        )
        .settled(settle)
    }
}

/// Actions due and not done, sorted into the steps they fell due in: per step, those
/// due after its settle (`counted`) and those in it (`settling`).
struct ByStep {
    counted: Vec<Vec<Pending>>,
    settling: Vec<Vec<Pending>>,
}

impl ByStep {
    /// Charges step `i`'s actions not done at `at` to its `book` (its settle's to the
    /// settle's), at the time they had waited then.
    fn charge(&self, i: usize, book: &mut StepBook, at: Instant) {
        charge(
            &mut book.counted,
            self.counted.get(i).into_iter().flatten(),
            at,
        );
        charge(
            &mut book.settle,
            self.settling.get(i).into_iter().flatten(),
            at,
        );
    }

    /// Whether step `i` has actions not done, its settle's included.
    fn waiting(&self, i: usize) -> bool {
        let any = |v: &Vec<Vec<Pending>>| v.get(i).is_some_and(|p| !p.is_empty());
        any(&self.counted) || any(&self.settling)
    }

    /// How many actions are not done, every step's and settle's.
    fn len(&self) -> usize {
        let n = |v: &Vec<Vec<Pending>>| v.iter().map(Vec::len).sum::<usize>();
        n(&self.counted) + n(&self.settling)
    }
}

/// `pending` sorted into the steps they fell due in (`starts`: when each opened), and in
/// each apart its first `settle`.
fn by_step(pending: &[Pending], starts: &[Instant], settle: Duration, until: Instant) -> ByStep {
    let mut out = ByStep {
        counted: vec![Vec::new(); starts.len()],
        settling: vec![Vec::new(); starts.len()],
    };
    for p in pending.iter().filter(|p| p.due < until) {
        let into = match Ledger::in_settle(starts, settle, p.due) {
            true => &mut out.settling,
            false => &mut out.counted,
        };
        if let Some(v) = into.get_mut(Ledger::step_of(starts, p.due)) {
            v.push(*p);
        }
    }
    out
}

/// How the users of step `index` (opened at `t0`, its pending actions sorted `by_step`:
/// those after its settle) waited when it ended: its actions not begun, and the users with
/// an action due by the `mid`point of the step's part after its settle (of this step, its
/// settle or an earlier step) not begun — waiting for half of it or more, which no store
/// that carries its users makes anyone do.
fn waits(all: &[Pending], by_step: &[Vec<Pending>], index: usize, mid: Instant) -> Waits {
    let unstarted = by_step
        .get(index)
        .map_or(0, |p| p.iter().filter(|p| !p.started).count());
    let stuck: std::collections::BTreeSet<usize> = all
        .iter()
        .filter(|p| !p.started && p.due <= mid)
        .map(|p| p.user)
        .collect();
    Waits {
        unstarted: unstarted as u64,
        stuck_users: stuck.len() as u64,
    }
}

/// Runs the users; `sut` lists the store's processes (for the series' and each step's
/// CPU, disk and memory). An action counts once, in the step it fell due in, at its
/// response time as its user saw it: from when it was due to when it finished, its wait
/// included however many steps later that was. Each step is judged when it ends, with its
/// actions not done yet at the time they have waited so far (a lower bound), and every
/// step still waiting on actions is judged again then: the ramp ends at the first found
/// broken. At the end no action starts any more; those in flight finish (within a grace)
/// and count in their steps; what was due and waiting then, or still runs after the
/// grace, counts at the time it had waited at the end; and every step is judged on its
/// final figures, which the capacity stands on.
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
    let run_id = plan.run_id.unwrap_or_else(crate::run::new_run_id);
    let shards_n = crate::stats::collector::shards_for(usize::MAX);
    let users_stop = CancellationToken::new();
    // Every connection's bytes are counted (with the store's sampler, when it watches).
    let tally = plan.connect.count.clone().unwrap_or_default();
    let mut connect = plan.connect.clone();
    connect.count = Some(tally.clone());
    let ctx = Arc::new(Ctx {
        scenario: plan.scenario.clone(),
        time_scale: plan.time_scale,
        users: plan.users.clone(),
        imap: server("imap", needs.imap, &plan.imap)?,
        pop3: server("pop3", needs.pop3, &plan.pop3)?,
        lmtp: server("lmtp", needs.lmtp, &plan.lmtp)?,
        smtp: plan.smtp.clone(),
        connect,
        shards_n,
        stop: users_stop.clone(),
        run_id,
        seed: plan.seed.unwrap_or(run_id),
        late_after: Duration::from_millis(5),
        seq: AtomicU64::new(0),
        ledger: Ledger::new(shards_n, plan.settle),
        tally,
        connections: AtomicU64::new(0),
        connect_failures: AtomicU64::new(0),
        reach: Default::default(),
    });
    // A shared start: every agent's steps begin at its instants (late, the steps still
    // count from it).
    let (start, start_offset_s) = match plan.start_at {
        Some(at) => crate::load::start_at(at, &shutdown, plan.quiet).await,
        None => (Instant::now(), None),
    };
    let started_us = match plan.start_at {
        Some(at) => at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        None => crate::stats::clock::unix_us(),
    };
    let cpu0 = CpuTimes::of_self();
    let mut tasks = tokio::task::JoinSet::new();
    let mut spawned = 0u64;
    let mut runs: Vec<StepRun> = Vec::new();
    // Each step's latest judgment (while actions of it are not done, a lower bound).
    let mut judged: Vec<Step> = Vec::new();
    // The steps with actions not done at the last step's end.
    let mut open: Vec<usize> = Vec::new();
    let mut series = Vec::new();
    let net = plan.connect.count.as_ref().map(super::net::reader);
    let mut store = series::StoreReader::start(sut, net).await;
    let (mut tick_at, mut tick_cpu) = (start, cpu0);
    let mut unreachable = None;
    let mut last_interval: Option<(Recorder, IntervalPoint)> = None;
    let mut last_lines = Vec::new();
    // The wire at the last reading, and everything finished so far (for /metrics).
    let mut wire = Wire::default();
    let mut running = Recorder::new();
    let run_end = plan.run_limit.map(|d| start + d);
    let mut plans = StepPlan::all(&plan.population, plan.settle)
        .into_iter()
        .peekable();
    // Where the next step opens on the run's clock: where the last one was planned to end
    // (every due time falls in one step, and every agent of a split run opens its steps
    // at the same instants).
    let mut planned_t0 = start;
    // Virtual users of the run spawned so far (this agent's: `mine`).
    let mut run_users = 0u64;
    while let Some(run_sp) = plans.next() {
        let t0 = planned_t0.min(tick_at);
        planned_t0 = t0 + run_sp.length;
        let index = runs.len();
        ctx.ledger.open_step(t0);
        while run_users < run_sp.users {
            if plan.shard.owns(run_users) {
                tasks.spawn(user::run(ctx.clone(), run_users, t0));
                spawned += 1;
            }
            run_users += 1;
        }
        // This agent's step: its own users.
        let sp = StepPlan {
            users: plan.shard.share(run_sp.users),
            ..run_sp
        };
        let before = store.sample().await;
        let step_end = run_end.map_or(t0 + sp.length, |e| e.min(t0 + sp.length));
        let (iv, point, reading) = loop {
            let next = (tick_at + plan.interval).min(step_end);
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = shutdown.stop.cancelled() => {}
            }
            let ending =
                next >= step_end || shutdown.stop.is_cancelled() || ctx.unreachable().is_some();
            // At the step's end, what finished of it and of the steps still open.
            let copy: Vec<usize> = match ending {
                true => open.iter().copied().chain([index]).collect(),
                false => Vec::new(),
            };
            let mut iv = Recorder::new();
            let reading = ctx.ledger.read(&mut iv, &copy);
            ctx.wire(&mut wire, &mut iv);
            let cpu = CpuTimes::of_self();
            let point = series::Interval {
                t_s: reading.at.duration_since(start).as_secs_f64(),
                dt_s: reading.at.duration_since(tick_at).as_secs_f64(),
                users: sp.users,
                rec: &iv,
                overdue: reading.pending.len() as u64,
                cpu: cpu.since(&tick_cpu),
                store: store.interval().await,
            }
            .point();
            running.merge(&iv);
            crate::run::exporter::publish_interval(
                run_id,
                crate::stats::kind::profile::PROFILE.held_noun,
                &running,
                STEPS,
                &point,
                Vec::new(),
            );
            (tick_at, tick_cpu) = (reading.at, cpu);
            unreachable = ctx.unreachable();
            if ending || unreachable.is_some() {
                break (iv, point, reading);
            }
            series.push(point);
        };
        let seconds = reading.at.duration_since(t0).as_secs_f64();
        let point_store = match (before, store.sample().await) {
            (Some(b), Some(a)) => Some(a.rates_since(&b, seconds)),
            _ => None,
        };
        let starts = ctx.ledger.starts();
        let pending = by_step(&reading.pending, &starts, plan.settle, reading.at);
        // The midpoint of the step's part after its settle.
        let steady = (t0 + plan.settle).min(reading.at);
        runs.push(StepRun {
            plan: sp,
            from_s: t0.saturating_duration_since(start).as_secs_f64(),
            seconds,
            store: point_store,
            cut_short: cut_short(seconds, sp.length),
            waits: waits(
                &reading.pending,
                &pending.counted,
                index,
                steady + (reading.at - steady) / 2,
            ),
        });
        let mut lines = Vec::new();
        for (i, mut book) in reading.steps {
            let Some(r) = runs.get(i) else {
                continue;
            };
            pending.charge(i, &mut book, reading.at);
            let step = r
                .judge(&book, &plan.rules)
                .provisional(pending.counted.get(i).is_some_and(|p| !p.is_empty()));
            if i == index {
                lines.push(step.line());
                judged.push(step);
            } else if let Some(was) = judged.get_mut(i) {
                if step.broken && !was.broken {
                    lines.push(step.judged_again_line());
                }
                *was = step;
            }
        }
        open = (0..runs.len()).filter(|i| pending.waiting(*i)).collect();
        let ends = judged.iter().any(|s| s.broken || s.cut_short)
            || unreachable.is_some()
            || plans.peek().is_none()
            || run_end.is_some_and(|e| Instant::now() >= e);
        if ends {
            // Said once the run is known to have measured anything: a server that never
            // answered, or refused every login, ends it with its one line instead.
            last_interval = Some((iv, point));
            last_lines = lines;
            break;
        }
        if !plan.quiet {
            lines.iter().for_each(|l| crate::run::live::say(l));
        }
        series.push(point);
    }
    let duration_s = tick_at.duration_since(start).as_secs_f64();
    let end_at = tick_at;
    users_stop.cancel();
    // No action starts any more; those in flight finish, and count, in their steps. One
    // stuck past the grace is cut off and counts as due and not done.
    let grace = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            j = tasks.join_next() => if j.is_none() { break },
            _ = &mut grace => { tasks.abort_all(); break }
        }
    }
    if let Some(line) = unreachable.or_else(|| ctx.refused_all()) {
        return Err(line);
    }
    if !plan.quiet {
        last_lines.iter().for_each(|l| crate::run::live::say(l));
    }
    // Every step on its final figures.
    let mut after = Recorder::new();
    let all: Vec<usize> = (0..runs.len()).collect();
    let fin = ctx.ledger.read(&mut after, &all);
    ctx.wire(&mut wire, &mut after);
    let pending = by_step(&fin.pending, &ctx.ledger.starts(), plan.settle, end_at);
    // The run's totals hold every action, its steps' settles' too.
    let mut total = Recorder::new();
    let mut steps: Vec<Step> = Vec::new();
    for (i, mut book) in fin.steps {
        let Some(r) = runs.get(i) else {
            continue;
        };
        // Waiting until the run gave up on them: after the grace, or once every user left.
        pending.charge(i, &mut book, fin.at);
        total.merge(&book.counted);
        total.merge(&book.settle);
        steps.push(r.judge(&book, &plan.rules));
    }
    // What crossed the wire is the run's, not any action's.
    let c = &mut total.counters;
    c.bytes = wire.read;
    c.bytes_out = wire.written;
    c.connections = wire.connections;
    c.connect_failures = wire.failures;
    let overdue_n = pending.len() as u64;
    if let Some((mut last_iv, p)) = last_interval {
        // The last interval, with what finished in the grace and what never did.
        last_iv.merge(&after);
        let profile = p.relay.profile.clone().unwrap_or_default();
        let mut rebuilt = series::Interval {
            t_s: p.t_s,
            dt_s: p.dt_s,
            users: profile.users,
            rec: &last_iv,
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
    let summary = ProfileSummary {
        users: spawned,
        capacity_users: verdict.users,
        sut_cpu: last_cpu,
        unstarted: runs.iter().map(|r| r.waits.unstarted).sum(),
        stuck_users: runs.last().map_or(0, |r| r.waits.stuck_users),
        ..ProfileSummary::derive(&total, metric(None), duration_s)
    };
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
    if let Some(mut s) = crate::load::shard::record(plan.shard, plan.start_at, start_offset_s) {
        if !plan.shard.is_whole() {
            // Virtual user n logs in as mailbox n: this agent's are every N-th.
            let mine: Vec<&str> = (0..run_users)
                .filter(|n| plan.shard.owns(*n))
                .filter_map(|n| plan.users.get(n as usize).map(|u| u.address.as_str()))
                .collect();
            s["users"] = mine.into();
        }
        r.extra.insert("shard".into(), s);
    }
    r.extra.insert(
        "capacity".into(),
        verdict.to_json(&steps, &plan.rules, &plan.population),
    );
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

    /// Issue 40: at a step's end, the users with an action due by its midpoint that the
    /// store had not begun are users it did not carry (a login waiting for a process);
    /// an action just due, or one running, is not a user left waiting.
    #[test]
    fn users_left_waiting_half_a_step_are_counted_once() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let p = |user, due, started| Pending {
            user,
            due: at(due),
            started,
        };
        let starts = [at(0), at(2000)];
        let pending = [
            p(0, 100, false),  // waiting at login since the step's start
            p(0, 900, false),  // its next one, behind it: still one user
            p(1, 1900, false), // just due: not waiting half the step
            p(2, 300, true),   // running (begun): slow, not unserved
            p(3, 2100, false), // the next step's
        ];
        let sorted = by_step(&pending, &starts, Duration::ZERO, at(4000)).counted;
        assert_eq!(sorted[0].len(), 4);
        assert_eq!(sorted[1].len(), 1);
        let w = waits(&pending, &sorted, 0, at(1000));
        assert_eq!(
            w,
            Waits {
                unstarted: 3,
                stuck_users: 1
            }
        );
        // Charged at the time they had waited: counted, not done, in the action row.
        let mut rec = Recorder::new();
        charge(&mut rec, &sorted[0], at(2000));
        assert_eq!((rec.counters.sent, rec.counters.aborted), (4, 4));
        let h = rec.hist(metric(None));
        assert!(h.equivalent(h.max(), 1_900_000), "the oldest waited 1.9 s");
        assert!(h.equivalent(h.min(), 100_000), "the newest 0.1 s");
    }

    /// Issue 43: actions not done at a step's end are sorted into its settle (due in its
    /// first 500 ms) or its counted part, and charged to each apart: the step's figures
    /// hold only the counted ones.
    #[test]
    fn actions_not_done_in_a_settle_are_charged_to_the_settle() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let p = |user, due| Pending {
            user,
            due: at(due),
            started: false,
        };
        let starts = [at(0), at(2000)];
        let pending = [p(0, 100), p(1, 499), p(2, 500), p(3, 2200), p(4, 2600)];
        let sorted = by_step(&pending, &starts, Duration::from_millis(500), at(4000));
        let n = |v: &Vec<Vec<Pending>>| v.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(n(&sorted.counted), [1, 1], "due at 500 ms and 2.6 s");
        assert_eq!(n(&sorted.settling), [2, 1], "due at 100, 499 ms and 2.2 s");
        assert_eq!(sorted.len(), 5);
        let mut book = StepBook::default();
        sorted.charge(0, &mut book, at(3000));
        assert_eq!(book.counted.counters.sent, 1);
        assert_eq!(book.settle.counters.sent, 2);
        assert!(sorted.waiting(1));
        let run = StepRun {
            plan: StepPlan {
                users: 2,
                length: Duration::from_secs(2),
                settle: Duration::from_millis(500),
            },
            from_s: 0.0,
            seconds: 2.0,
            store: None,
            cut_short: false,
            waits: Waits::default(),
        };
        let step = run.judge(&book, &[]);
        assert_eq!(step.summary.actions, 1, "only the counted one");
        assert_eq!(
            step.settle,
            Some(Settled {
                from_s: 0.0,
                duration_s: 0.5,
                actions: 2
            })
        );
    }

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
