//! The load engine, whatever the protocol: a schedule of units of work (`schedule`:
//! closed loop, or open-loop intended start times), a budget (a count and/or a duration),
//! one worker per connection slot (`worker`) driving a protocol's client through the
//! [`Driver`] trait, and the run skeleton (ticks, live line, self CPU). A run split over
//! agents (`--shard I/N`) takes its own part of the sequence numbers, connections and
//! source addresses (`shard`). A session that fails keeps what its set-up had measured
//! (`setup`). A server down on purpose (a relay's `--fault`) holds closed-loop units that
//! failed with it until it is up, and makes them up (`outage`). SMTP's driver is
//! `send::driver`; POP3's and IMAP's
//! (`mailbox::pop3`, `mailbox::imap`) plug in the same way and get pacing, budgets, the
//! live line and the generator's warnings unchanged.

pub mod outage;
pub mod schedule;
mod setup;
pub mod shard;
mod worker;

pub use setup::{SetUpFailed, SetUpMeasures};

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::alarm::Alarm;
use crate::error::ErrorClass;
use crate::run::exporter::{self, Gauge};
use crate::run::live::{LiveExtra, Units};
use crate::run::{Finished, Progress, Runner};
use crate::shutdown::Shutdown;
use crate::stats::results::{Results, RunParts};
use crate::stats::summary::Summary;
use crate::stats::{Metric, Recorder, Shards, Steps};
use schedule::{Pacing, Schedule};
use shard::Shard;

/// The shape of the load: how many units, how fast, over how many connections.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Open or closed loop.
    pub pacing: Pacing,
    /// Connections (closed loop) or the cap on connections (open loop).
    pub concurrency: usize,
    /// Stop after this many units (`u64::MAX`: until `duration`).
    pub count: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Units per connection: inclusive range, 0 = unlimited.
    pub per_conn: (u64, u64),
    /// Time units in flight get to finish after a stop or the end of `duration`.
    pub grace: Duration,
    /// Stop after this many failed units.
    pub max_errors: Option<u64>,
    /// Intervals and the live line.
    pub progress: Progress,
    /// The run id (a fresh random one when `None`).
    pub run_id: Option<u64>,
    /// More for the live line (a relay's deliveries and backlog).
    pub live_extra: Option<LiveExtra>,
    /// What the units are called on the live line.
    pub units: Units,
    /// This agent's part of a run split over several (`--shard`).
    pub shard: Shard,
    /// When the load starts, on the wall clock shared by all agents (`--start-at`).
    pub start_at: Option<std::time::SystemTime>,
    /// A server down on purpose for a while (a relay's `--fault`): in closed loop, a unit
    /// whose connection the outage cut or refused waits for it to be up and is made up.
    pub outage: Option<Arc<outage::Outage>>,
}

/// What the engine needs to know of a failure that ended a connection.
pub trait Failure: std::fmt::Display {
    /// Its statistics class.
    fn class(&self) -> ErrorClass;
    /// The step it happened in.
    fn step(&self) -> Metric;
    /// The reply code involved, 0 when none.
    fn code(&self) -> u16;
    /// For a failure to connect at all, the one line that says the target is unreachable
    /// (used when no connection of the run ever opened).
    fn unreachable(&self) -> Option<String>;
    /// False when the connection itself could not be made; true when it was and the
    /// set-up failed later (no greeting in time, CAPABILITY or EHLO timed out, login
    /// refused): such a session counts as a connection that failed, not as a failure to
    /// connect, and its error says at which step.
    fn reached(&self) -> bool;
    /// True when the connection was made and the server refused the login: counted apart
    /// from failures to connect (the server was reached; the credentials were not taken).
    fn login_refused(&self) -> bool {
        false
    }
    /// Records what a connection's set-up measured before it failed (the steps it timed,
    /// a login it made): a failed session keeps its finished steps' latencies.
    fn record_setup(&self, _rec: &mut Recorder) {}
}

/// What comes after a unit on the same connection, when the protocol can send it in the
/// same write (SMTP's pipelining, RFC 2920 §3.1).
pub enum Next {
    /// The next unit, with its sequence number: it is in flight when the unit completes.
    Unit(u64),
    /// No more units on this connection: say goodbye.
    Last,
    /// Nothing now.
    Wait,
}

/// One protocol's client side, as the engine drives it: open a connection, run units of
/// work on it one after another, record what they did, close it.
pub trait Driver: Send + Sync + 'static {
    /// An open connection, set up and ready for a unit.
    type Conn: Send + 'static;
    /// What ends a connection.
    type Failure: Failure + Send + 'static;
    /// How a completed unit ended.
    type Outcome: Send;
    /// The protocol's step names: its latency rows in results and on `/metrics`.
    const STEPS: Steps;

    /// Opens the `n`-th connection of the run.
    fn open(
        &self,
        n: u64,
        rng: &mut fastrand::Rng,
    ) -> impl Future<Output = Result<Self::Conn, Self::Failure>> + Send;
    /// True when the connection uses TLS.
    fn tls(conn: &Self::Conn) -> bool;
    /// True when the connection can take a unit now (not closed by the server).
    fn idle(conn: &Self::Conn) -> bool;
    /// Starts unit `seq` on the connection (nothing is written yet).
    fn begin(
        &self,
        conn: &mut Self::Conn,
        seq: u64,
        rng: &mut fastrand::Rng,
    ) -> Result<(), Self::Failure>;
    /// Drives the unit in flight to its end. `next` is asked when the protocol could
    /// send what follows before that end (SMTP asks at most once, IMAP's `--pipeline` up
    /// to its depth); every [`Next::Unit`] is then in flight, in order, when this returns.
    fn complete(
        &self,
        conn: &mut Self::Conn,
        next: &mut (dyn FnMut() -> Next + Send),
        rng: &mut fastrand::Rng,
    ) -> impl Future<Output = Result<Self::Outcome, Self::Failure>> + Send;
    /// A completed unit's own time, where the protocol timed it better than the engine
    /// can: pipelined, a unit's clock would start where the one before it on the wire
    /// completed, though it was written with it. `None`: the engine's (from its start, or
    /// the previous unit's completion on a pipelined connection). Not used for the unit
    /// that opened its connection: its time counts from its start, the opening included.
    fn took(&self, _outcome: &Self::Outcome) -> Option<std::time::Duration> {
        None
    }
    /// Records the steps a connection timed since the last call and, for a completed
    /// unit `seq`, its outcome; true when the unit failed (was refused).
    fn record(
        &self,
        rec: &mut Recorder,
        conn: &mut Self::Conn,
        seq: u64,
        outcome: Option<&Self::Outcome>,
    ) -> bool;
    /// Closes the connection politely; the step it timed (SMTP's QUIT), if it did.
    fn close(&self, conn: Self::Conn) -> impl Future<Output = Option<(Metric, Duration)>> + Send;
    /// [`Driver::close`], with the octets the goodbye wrote, for a driver that counts them
    /// (IMAP's LOGOUT belongs in `bytes_out`).
    fn close_counted(
        &self,
        conn: Self::Conn,
    ) -> impl Future<Output = (Option<(Metric, Duration)>, u64)> + Send {
        async move { (self.close(conn).await, 0) }
    }
}

/// What a finished load measured, for the protocol's summary.
pub struct Loaded {
    /// Everything the run skeleton kept.
    pub finished: Finished,
    /// The run id.
    pub run_id: u64,
    /// Units the schedule wanted started before scheduling ended (closed loop: started).
    pub intended: u64,
    /// Seconds from the start to the end of the last unit.
    pub active_s: f64,
    /// When the generator, not the target, may have limited the result.
    pub warnings: Vec<String>,
    /// Ctrl-C or SIGTERM cut the run short.
    pub interrupted: bool,
    /// The protocol's step names.
    pub steps: Steps,
    /// With `--start-at`: seconds between the shared start and this agent's (positive:
    /// it began late, and its schedule still counts from the shared start).
    pub start_offset_s: Option<f64>,
}

impl Loaded {
    /// The results document of a finished load run. `summary` derives the protocol's
    /// headline numbers from the totals, the intended count, the run's length and its
    /// active span.
    pub fn into_results(
        self,
        command: &'static str,
        config: serde_json::Value,
        summary: impl FnOnce(&Recorder, u64, f64, f64) -> Summary,
    ) -> Results {
        let f = self.finished;
        let summary = summary(&f.total, self.intended, f.duration_s, self.active_s);
        let mut r = Results::assemble(RunParts {
            command,
            run_id: self.run_id,
            started_us: f.started_us,
            duration_s: f.duration_s,
            config,
            summary,
            steps: self.steps,
            self_report: f.self_report(self.warnings),
            total: f.total,
            series: f.series,
        });
        r.interrupted = self.interrupted;
        r
    }
}

/// What all workers of a run share.
struct Shared<D: Driver> {
    plan: LoadPlan,
    driver: D,
    schedule: Schedule,
    shards: Shards,
    /// Units started and not yet recorded (what shutdown may cut off).
    in_flight: AtomicU64,
    /// Failed units so far (for `--max-errors`).
    failures: AtomicU64,
    /// Connections opened so far (the driver spreads them over targets and addresses).
    conns_opened: AtomicU64,
    /// Microseconds from the start to the latest end of a unit: the rate is taken over
    /// this span, so closing connections after the last unit does not dilute it.
    last_done_us: AtomicU64,
    /// Set on Ctrl-C, SIGTERM, the error limit or an unreachable target.
    stop: CancellationToken,
    /// Lag beyond which an open-loop unit counts as late ([`late_after`]).
    late: Duration,
    /// Set once any connection was opened.
    connected: AtomicBool,
    /// Set when the first connections failed and none ever succeeded: why.
    unreachable: OnceLock<String>,
}

/// Runs the load to completion (or until stopped). The error is the one line that says
/// the target never accepted a connection (nothing was measured).
pub async fn run<D: Driver>(
    plan: LoadPlan,
    driver: D,
    shutdown: Shutdown,
) -> Result<Loaded, String> {
    let (start, start_offset_s) = match plan.start_at {
        Some(at) => start_at(at, &shutdown, plan.progress.quiet).await,
        None => (Instant::now(), None),
    };
    let run_id = plan.run_id.unwrap_or_else(crate::run::new_run_id);
    let shards_n = crate::stats::collector::shards_for(plan.concurrency);
    let eng = Arc::new(Shared {
        schedule: Schedule::new(
            start,
            plan.pacing,
            plan.count,
            plan.duration,
            run_id,
            plan.shard,
        ),
        shards: Shards::new(shards_n),
        in_flight: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        conns_opened: AtomicU64::new(0),
        last_done_us: AtomicU64::new(0),
        stop: shutdown.stop.clone(),
        late: late_after(&plan.pacing),
        connected: AtomicBool::new(false),
        unreachable: OnceLock::new(),
        driver,
        plan,
    });
    let plan = &eng.plan;
    let mut workers = JoinSet::new();
    for i in 0..plan.concurrency {
        workers.spawn(worker::run(i, eng.clone()));
    }
    let mut runner = Runner::new(start, plan.progress);
    // When scheduling ended: the stop, or the end of --duration.
    let mut sched_end: Option<Instant> = None;
    let far = start + Duration::from_secs(86_400 * 365);
    let mut drain_until = plan.duration.map_or(far, |d| start + d + plan.grace);
    let mut aborted = 0;
    let mut stopping = false;
    let mut crashed = Crashed::default();
    // On the alarm thread, like the interval ticks: no tokio timer while the load runs.
    let drained = Alarm::new();
    loop {
        tokio::select! {
            _ = runner.tick() => {
                let (p, total) = runner.close_interval(&eng.shards);
                let (extra, mut gauges) = plan.live_extra.as_ref().map(|f| f.figures(&total.counters)).unwrap_or_default();
                gauges.push(Gauge {
                    name: "in_flight",
                    help: "Units of work started and not finished.",
                    value: eng.in_flight.load(Ordering::Relaxed) as f64,
                });
                exporter::publish_interval(run_id, plan.units.noun, total, D::STEPS, &p, gauges);
                let counters = total.counters.clone();
                let made_up = plan.outage.as_ref().map_or(0, |o| o.units_made_up());
                let count = match plan.count {
                    u64::MAX => u64::MAX,
                    n => n.saturating_add(made_up),
                };
                let extra = format!("{extra}{}", done_share(count, plan.duration, counters.sent, p.t_s));
                runner.live().update(&p, &counters, plan.units, &extra);
            }
            joined = workers.join_next() => match joined {
                None => break,
                Some(j) => crashed.note(j),
            },
            _ = eng.stop.cancelled(), if !stopping => {
                // Workers sleeping until their slot see the same token and leave.
                stopping = true;
                sched_end = Some(Instant::now());
                eng.schedule.stop();
                drain_until = drain_until.min(Instant::now() + plan.grace);
            }
            _ = drained.until(drain_until) => {
                aborted = eng.in_flight.load(Ordering::Relaxed);
                workers.abort_all();
                break;
            }
            _ = shutdown.abort.cancelled() => {
                aborted = eng.in_flight.load(Ordering::Relaxed);
                workers.abort_all();
                break;
            }
        }
    }
    while let Some(j) = workers.join_next().await {
        crashed.note(j);
    }
    if let Some(why) = eng.unreachable.get() {
        runner.live().finish();
        return Err(why.clone());
    }
    let mut finished = runner.finish(&eng.shards);
    let c = &mut finished.total.counters;
    c.sent += aborted;
    c.aborted += aborted;
    let active_s = match eng.last_done_us.load(Ordering::Relaxed) {
        0 => finished.duration_s,
        us => us as f64 / 1e6,
    };
    // What the schedule wanted started until scheduling ended, against what started.
    let sched_end = sched_end.map_or(Duration::from_secs_f64(finished.duration_s), |t| {
        t.duration_since(start)
    });
    let sent = finished.total.counters.sent;
    let intended = eng.schedule.due_before(sched_end).unwrap_or(sent).max(sent);
    let mut warnings = bottleneck_warnings(plan, &finished, eng.late);
    warnings.extend(crashed.warning());
    Ok(Loaded {
        finished,
        run_id,
        intended,
        active_s,
        warnings,
        interrupted: shutdown.interrupted(),
        steps: D::STEPS,
        start_offset_s,
    })
}

/// Load workers that ended in a panic (a mailbench bug): the run goes on with the others,
/// and its results say so instead of showing less load as the server's doing.
#[derive(Default)]
struct Crashed {
    count: usize,
    first: Option<String>,
}

impl Crashed {
    /// Counts `joined` when it is a worker's panic (an abort at the drain's end is not).
    fn note(&mut self, joined: Result<(), tokio::task::JoinError>) {
        let Err(e) = joined else { return };
        if !e.is_panic() {
            return;
        }
        self.count += 1;
        if self.first.is_none() {
            let payload = e.into_panic();
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            self.first = Some(why);
        }
    }

    /// The results' warning, when any worker crashed.
    fn warning(&self) -> Option<String> {
        let why = self.first.as_ref()?;
        Some(format!(
            "{} of the load's workers stopped on a panic (a mailbench bug: please report it), \
             so the run carried less load than asked; the first said: {why}",
            self.count
        ))
    }
}

/// Waits for the shared start `at` and returns it as time zero, with how far this agent
/// is off it. An agent that comes late says so and still counts from `at`, so that its
/// schedule and series stay on the grid the other agents share: its first units start
/// late, and that lateness is measured, not hidden. A stop during the wait starts at once
/// (the workers see the stop and the run ends empty).
pub(crate) async fn start_at(
    at: std::time::SystemTime,
    shutdown: &Shutdown,
    quiet: bool,
) -> (Instant, Option<f64>) {
    if let Ok(ahead) = at.duration_since(std::time::SystemTime::now()) {
        tokio::select! {
            _ = tokio::time::sleep(ahead) => {}
            _ = shutdown.stop.cancelled() => {}
        }
    }
    let now = Instant::now();
    let (behind, offset) = match std::time::SystemTime::now().duration_since(at) {
        Ok(late) => (late, late.as_secs_f64()),
        Err(e) => (Duration::ZERO, -e.duration().as_secs_f64()),
    };
    if behind > Duration::from_millis(100) && !quiet {
        crate::run::live::say(&format!(
            "mailbench: started {:.3} s after --start-at; the schedule still counts from it, so the first units start late",
            behind.as_secs_f64()
        ));
    }
    (now.checked_sub(behind).unwrap_or(now), Some(offset))
}

/// How far the run is towards its end (`-n` units or `-z` time, whichever comes first),
/// for the live line: `  42% done`; nothing when the run has no end. `count` includes the
/// units an outage cut, as their replacements are still to be sent (a crash run read
/// "100% done" with its replacements still going out).
fn done_share(count: u64, duration: Option<Duration>, sent: u64, elapsed_s: f64) -> String {
    let by_count = (count != u64::MAX).then(|| sent as f64 / count.max(1) as f64);
    let by_time = duration.map(|d| elapsed_s / d.as_secs_f64().max(1e-9));
    match by_count.into_iter().chain(by_time).reduce(f64::max) {
        Some(share) => format!("  {:.0}% done", (share * 100.0).min(100.0)),
        None => String::new(),
    }
}

/// When an open-loop unit counts as late: later than one gap between units at the target
/// rate, and never less than 5 ms. The timer alone wakes up to about 2 ms late (tokio's
/// 1 ms wheel, rounded up), which is noise, not a server falling behind.
pub fn late_after(pacing: &Pacing) -> Duration {
    let floor = Duration::from_millis(5);
    match pacing {
        Pacing::Open { rate, .. } if *rate > 0.0 => {
            floor.max(Duration::from_secs_f64((1.0 / rate).min(3600.0)))
        }
        _ => floor,
    }
}

/// Says when the generator, not the target, may have limited the result.
fn bottleneck_warnings(plan: &LoadPlan, f: &Finished, late_after: Duration) -> Vec<String> {
    let mut w = Vec::new();
    let cpu_peak = f.cpu_peak_pct();
    let cores = crate::stats::cpu::cpu_count();
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    let usable = threads.min(cores) as f64;
    if cpu_peak >= 90.0 * usable {
        let more = if threads < cores {
            "; --threads lets it use more cores"
        } else {
            ""
        };
        w.push(format!(
            "the generator used {cpu_peak:.0} % CPU in its busiest interval, all that its {threads} thread(s) can use: it may be the bottleneck{more}"
        ));
    } else if cpu_peak >= 90.0 {
        w.push(format!(
            "the generator used {cpu_peak:.0} % of a core in its busiest interval; on a shared machine that CPU was taken from the server"
        ));
    }
    let (late, sent) = (f.total.counters.late_starts, f.total.counters.sent);
    if matches!(plan.pacing, Pacing::Open { .. }) && sent > 0 {
        let p99 = crate::stats::hist::ms(f.total.hist(Metric::Lag), 0.99);
        let late_ms = late_after.as_secs_f64() * 1000.0;
        if late * 100 > sent || p99 > 2.0 * late_ms {
            w.push(format!(
                "{late} of {sent} sends started more than {late_ms:.0} ms late (lag p99 {p99:.1} ms): the target did not keep up with the schedule, or -c {} connections are too few",
                plan.concurrency
            ));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::{Crashed, done_share};
    use std::time::Duration;

    /// The share is of the count or of the time, whichever is further; nothing without an
    /// end; never above 100 %.
    #[test]
    fn the_share_done_is_of_the_count_or_the_time() {
        assert_eq!(done_share(400, None, 300, 1.0), "  75% done");
        // 300 + 100 made up after an outage: 300 sent is not yet the end.
        assert_eq!(done_share(300 + 100, None, 300, 1.0), "  75% done");
        assert_eq!(
            done_share(400, Some(Duration::from_secs(2)), 100, 1.0),
            "  50% done"
        );
        assert_eq!(done_share(u64::MAX, None, 5, 1.0), "");
        assert_eq!(done_share(10, None, 12, 1.0), "  100% done");
    }

    #[test]
    fn a_worker_that_panicked_is_in_the_warnings_and_an_aborted_one_is_not() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut crashed = Crashed::default();
        rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            set.spawn(async { panic!("slot 7 out of range") });
            set.spawn(async { panic!("second") });
            set.spawn(std::future::pending::<()>());
            set.spawn(async {});
            while set.len() > 1 {
                let joined = set.join_next().await.expect("a task ended");
                crashed.note(joined);
            }
            set.abort_all();
            while let Some(joined) = set.join_next().await {
                crashed.note(joined);
            }
        });
        let warning = crashed.warning().expect("a warning");
        assert!(
            warning.starts_with("2 of the load's workers stopped on a panic"),
            "{warning}"
        );
        assert!(
            warning.contains("slot 7 out of range") || warning.contains("second"),
            "{warning}"
        );
        assert_eq!(Crashed::default().warning(), None);
    }
}
