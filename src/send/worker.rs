//! One worker: claims slots from the schedule, keeps a connection, sends, records.
//! Cancellation is checked only between transactions (never mid-DATA).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::plan::{Addresses, Auth, SendPlan, TlsMode};
use super::schedule::Pacing;
use super::schedule::Schedule;
use super::workload::Workload;
use crate::smtp::conn::{ClientConn, ConnError, ConnectOptions, Follow};
use crate::smtp::proto::{ClientConfig, Credentials, Phase, TxnOutcome};
use crate::stats::{Metric, Recorder, Shards};

/// Everything workers share.
pub struct Engine {
    /// The plan.
    pub plan: Arc<SendPlan>,
    /// Slots.
    pub schedule: Schedule,
    /// Where results go.
    pub shards: Shards,
    /// What to send.
    pub workload: Workload,
    /// Transactions started and not yet recorded (what shutdown may cut off).
    pub in_flight: AtomicU64,
    /// Failed transactions so far (for `--max-errors`).
    pub failures: AtomicU64,
    /// Connections opened so far (round-robin over targets and source IPs).
    pub conns_opened: AtomicU64,
    /// Microseconds from the start to the latest end of a transaction: the rate is taken
    /// over this span, so closing connections after the last message does not dilute it.
    pub last_done_us: AtomicU64,
    /// Set on Ctrl-C, SIGTERM, the error limit or an unreachable target.
    pub stop: CancellationToken,
    /// Lag beyond which an open-loop send counts as late ([`late_after`]).
    pub late: Duration,
    /// Set once any connection was opened.
    pub connected: AtomicBool,
    /// Set when the first connections failed and none ever succeeded: why.
    pub unreachable: OnceLock<String>,
}

struct Live {
    conn: ClientConn,
    left: u64,
    sender: Option<String>,
}

impl Live {
    /// True when this connection must be closed before the next message: its quota is
    /// used up, or the server ended the session.
    fn spent(&self) -> bool {
        self.left == 0 || !self.conn.is_idle()
    }
}

/// A message whose transaction is on the wire.
struct InFlight {
    /// Sequence number.
    seq: u64,
    /// What latency counts from: the intended start (open loop), or when the connection
    /// was free for this message (closed loop).
    t0: Instant,
    /// Set for open-loop slots: the intended start, for lag.
    intended: Option<Instant>,
    begun: Instant,
    size: u64,
    /// Connections this message opened: (opened, with TLS).
    opened: (u64, u64),
}

/// Runs one worker until the schedule is exhausted or the run stops.
///
/// In closed loop, when a transaction's content is written, the next message's envelope
/// goes out in the same write (RFC 2920 §3.1), and QUIT rides with a connection's last
/// message: one write and one read per message instead of two. The follow-on's latency
/// still counts from when the previous message's final reply arrived (the server could
/// not start on it before), so pipelining never charges one message's wait to the next.
/// A connection whose quota is used up is closed right after its last message, before
/// the next slot is claimed: the QUIT is timed when its reply arrives, and its wait is
/// never charged to the next message.
pub async fn run(id: usize, eng: Arc<Engine>) {
    let closed_loop = matches!(eng.plan.pacing, Pacing::Closed);
    let mut rng =
        fastrand::Rng::with_seed(0x5eed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut live: Option<Live> = None;
    let mut carried: Option<InFlight> = None;
    loop {
        if carried.is_none()
            && let Some(old) = live.take_if(|l| l.spent())
        {
            // Boxed: the close future is kilobytes and runs once per connection.
            Box::pin(close(old, &eng, id)).await;
        }
        let cur = match carried.take() {
            Some(c) => c,
            None => {
                let Some(slot) = eng.schedule.claim() else {
                    break;
                };
                if let Some(at) = slot.intended {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => {}
                        _ = eng.stop.cancelled() => break,
                    }
                }
                if eng.stop.is_cancelled() {
                    break;
                }
                let begun = Instant::now();
                let t0 = slot.intended.unwrap_or(begun);
                eng.in_flight.fetch_add(1, Ordering::Relaxed);
                let mut opened = (0, 0);
                if live.is_none() {
                    // open is boxed: its future is kilobytes and runs once per
                    // connection; inline it would make every task that large (10,000
                    // connections held 80 MB of task state).
                    match Box::pin(open(&eng, &mut rng)).await {
                        Ok(l) => {
                            eng.connected.store(true, Ordering::Relaxed);
                            opened = (1, u64::from(l.conn.tls_active()));
                            live = Some(l);
                        }
                        Err(e) => {
                            if !eng.connected.load(Ordering::Relaxed)
                                && let ConnError::Connect { target, source } = &e
                            {
                                // Nothing ever connected: a typo or a server that is
                                // down; one line instead of a run full of errors.
                                let _ = eng.unreachable.set(unreachable(target, source));
                                eng.schedule.stop();
                                eng.stop.cancel();
                            }
                            {
                                let mut rec = eng.shards.get(id);
                                rec.counters.sent += 1;
                                rec.counters.errors += 1;
                                rec.counters.connect_failures += 1;
                                rec.error(e.class(), e.phase(), e.code(), || e.to_string());
                                record_start(&mut rec, slot.intended, begun, eng.late);
                                rec.record(Metric::Total, Instant::now() - t0);
                            }
                            eng.in_flight.fetch_sub(1, Ordering::Relaxed);
                            count_failure(&eng);
                            // Do not spin on a dead target; open loop shows this as lag.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    }
                }
                let Some(l) = live.as_mut() else { continue };
                let txn = eng
                    .workload
                    .transaction(slot.seq, l.sender.as_deref(), &mut rng);
                let size = txn.size() as u64;
                if let Err(e) = l.conn.begin(txn) {
                    record_lost(&eng, id, &e, slot.intended, begun, t0);
                    live = None;
                    continue;
                }
                InFlight {
                    seq: slot.seq,
                    t0,
                    intended: slot.intended,
                    begun,
                    size,
                    opened,
                }
            }
        };
        let Some(l) = live.as_mut() else {
            eng.in_flight.fetch_sub(1, Ordering::Relaxed);
            continue;
        };
        l.left = l.left.saturating_sub(1);
        let may_follow = closed_loop && l.left > 0 && !eng.stop.is_cancelled();
        let quit_after = l.left == 0;
        let mut next: Option<InFlight> = None;
        let bytes_before = l.conn.bytes_out;
        let result = {
            let (eng2, rng2, next2, sender) = (&eng, &mut rng, &mut next, l.sender.clone());
            let mut follow = move || {
                if may_follow {
                    let Some(slot) = eng2.schedule.claim() else {
                        return Follow::Quit;
                    };
                    let begun = Instant::now();
                    eng2.in_flight.fetch_add(1, Ordering::Relaxed);
                    let txn = eng2.workload.transaction(slot.seq, sender.as_deref(), rng2);
                    *next2 = Some(InFlight {
                        seq: slot.seq,
                        t0: begun,
                        intended: None,
                        begun,
                        size: txn.size() as u64,
                        opened: (0, 0),
                    });
                    Follow::Txn(txn)
                } else if quit_after {
                    Follow::Quit
                } else {
                    Follow::Nothing
                }
            };
            l.conn.complete(&mut follow).await
        };
        let done = Instant::now();
        eng.last_done_us.fetch_max(
            (done - eng.schedule.start()).as_micros() as u64,
            Ordering::Relaxed,
        );
        let failed = {
            let mut rec = eng.shards.get(id);
            rec.counters.connections += cur.opened.0;
            rec.counters.tls_connections += cur.opened.1;
            for (phase, d) in l.conn.timings.drain(..) {
                rec.record(Metric::Phase(phase), d);
            }
            record_start(&mut rec, cur.intended, cur.begun, eng.late);
            rec.record(Metric::Total, done - cur.t0);
            rec.counters.sent += 1;
            rec.counters.bytes_out += l.conn.bytes_out - bytes_before;
            match &result {
                Ok(outcome) => record_outcome(&mut rec, outcome, cur.size),
                Err(e) => {
                    rec.counters.errors += 1;
                    rec.error(e.class(), e.phase(), e.code(), || e.to_string());
                    true
                }
            }
        };
        eng.in_flight.fetch_sub(1, Ordering::Relaxed);
        if failed {
            count_failure(&eng);
        } else if let Some(log) = &eng.plan.accept_log {
            log.record(cur.seq);
        }
        match (result, next) {
            (Ok(_), Some(mut n)) => {
                // The server starts on the follow-on only now: its envelope waited in
                // the server's input behind the previous message's content.
                n.t0 = done;
                n.begun = done;
                carried = Some(n);
            }
            (Ok(_), None) => {}
            (Err(e), next) => {
                // The connection is gone, and with it a follow-on already sent.
                if next.is_some() {
                    record_lost(&eng, id, &e, None, done, done);
                }
                live = None;
            }
        }
    }
    if let Some(old) = live.take() {
        Box::pin(close(old, &eng, id)).await;
    }
}

/// The one line that says a target never accepted a connection.
fn unreachable(target: &str, source: &std::io::Error) -> String {
    if source.kind() == std::io::ErrorKind::TimedOut {
        format!(
            "target {target} did not accept a connection in time; check the address and firewall"
        )
    } else {
        format!(
            "target {target} is not reachable: {source}; is the server running and listening there?"
        )
    }
}

/// Counts a message lost with its connection (after it was claimed and counted in flight).
fn record_lost(
    eng: &Engine,
    id: usize,
    e: &ConnError,
    intended: Option<Instant>,
    begun: Instant,
    t0: Instant,
) {
    {
        let mut rec = eng.shards.get(id);
        rec.counters.sent += 1;
        rec.counters.errors += 1;
        rec.error(e.class(), e.phase(), e.code(), || e.to_string());
        record_start(&mut rec, intended, begun, eng.late);
        rec.record(Metric::Total, Instant::now() - t0);
    }
    eng.in_flight.fetch_sub(1, Ordering::Relaxed);
    count_failure(eng);
}

/// Records how late an open-loop send started; `late` is where lateness starts to count.
fn record_start(rec: &mut Recorder, intended: Option<Instant>, begun: Instant, late: Duration) {
    if let Some(at) = intended {
        let lag = begun.saturating_duration_since(at);
        rec.record(Metric::Lag, lag);
        if lag > late {
            rec.counters.late_starts += 1;
        }
    }
}

/// When an open-loop send counts as late: later than one gap between sends at the
/// target rate, and never less than 5 ms. The timer alone wakes up to about 2 ms late
/// (tokio's 1 ms wheel, rounded up), which is noise, not a server falling behind.
pub fn late_after(pacing: &Pacing) -> Duration {
    let floor = Duration::from_millis(5);
    match pacing {
        Pacing::Open { rate, .. } if *rate > 0.0 => {
            floor.max(Duration::from_secs_f64((1.0 / rate).min(3600.0)))
        }
        _ => floor,
    }
}

/// Counts the outcome; true when the transaction failed.
fn record_outcome(rec: &mut Recorder, o: &TxnOutcome, size: u64) -> bool {
    rec.counters.rcpts_accepted += u64::from(o.rcpts_accepted);
    rec.counters.rcpts_refused += u64::from(o.rcpts_refused);
    rec.counters.rcpts_delivered += u64::from(o.rcpts_delivered);
    for (phase, code) in &o.rcpt_failures {
        rec.error(
            crate::error::ErrorClass::of_code(*code),
            *phase,
            *code,
            || o.rcpt_failure_text.clone().unwrap_or_default(),
        );
    }
    if o.accepted {
        rec.counters.accepted += 1;
        rec.counters.bytes += size;
        false
    } else {
        rec.counters.rejected += 1;
        if let Some((phase, code)) = o.failure
            && phase != Phase::Rcpt
        {
            // RCPT refusals are already in the table, one per recipient.
            rec.error(crate::error::ErrorClass::of_code(code), phase, code, || {
                o.failure_text.clone().unwrap_or_default()
            });
        }
        true
    }
}

fn count_failure(eng: &Engine) {
    let n = eng.failures.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(max) = eng.plan.max_errors
        && n >= max
    {
        eng.schedule.stop();
        eng.stop.cancel();
    }
}

async fn open(eng: &Engine, rng: &mut fastrand::Rng) -> Result<Live, ConnError> {
    let plan = &eng.plan;
    let n = eng.conns_opened.fetch_add(1, Ordering::Relaxed);
    let target = &plan.targets[(n % plan.targets.len() as u64) as usize];
    let use_tls = plan.tls != TlsMode::None && rng.f64() * 100.0 < plan.tls_percent;
    let (creds, sender) = match &plan.auth {
        Auth::None => (None, None),
        Auth::Fixed(c) => (Some(c.clone()), None),
        Auth::Senders => match &plan.from {
            Addresses::List(users) => {
                let u = &users[(n % users.len() as u64) as usize];
                (
                    Some(Credentials {
                        user: u.address.clone(),
                        pass: u.password.clone().unwrap_or_default(),
                    }),
                    Some(u.address.clone()),
                )
            }
            Addresses::Template(_) => (None, None),
        },
    };
    let opts = ConnectOptions {
        connect_timeout: plan.connect_timeout,
        command_timeout: plan.command_timeout,
        source_ip: if plan.source_ips.is_empty() {
            None
        } else {
            Some(plan.source_ips[(n % plan.source_ips.len() as u64) as usize])
        },
        tls: if use_tls {
            plan.tls_config.clone()
        } else {
            None
        },
        implicit_tls: plan.tls == TlsMode::Implicit,
    };
    let cfg = ClientConfig {
        lmtp: plan.lmtp,
        helo_name: plan.helo.clone(),
        pipelining: plan.pipelining,
        chunking: plan.chunking,
        starttls: use_tls && plan.tls == TlsMode::Starttls,
        auth: creds,
    };
    let conn = ClientConn::open(target, &opts, cfg).await?;
    let (lo, hi) = plan.per_conn;
    let left = match (lo, hi) {
        (0, _) => u64::MAX,
        (lo, hi) if lo == hi => lo,
        (lo, hi) => rng.u64(lo..=hi),
    };
    Ok(Live { conn, left, sender })
}

async fn close(mut l: Live, eng: &Engine, id: usize) {
    l.conn.timings.clear();
    let quit = l.conn.quit_timed().await;
    if let Some(d) = quit {
        eng.shards.get(id).record(Metric::Phase(Phase::Quit), d);
    }
}
