//! One worker: claims units from the schedule, keeps a connection through the protocol's
//! driver, records each unit's latency from its intended (or actual) start. Cancellation
//! is checked only between units (never mid-transaction).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::outage::{Mark, Outage};
use super::schedule::Pacing;
use super::shard::Shard;
use super::{Driver, Failure, Next, Shared};
use crate::stats::{Metric, Recorder};

/// An open connection, how many more units it may carry, and where the outages stood
/// when it was attempted.
struct Open<C> {
    conn: C,
    left: u64,
    mark: Mark,
}

/// A unit whose work is on the wire.
struct InFlight {
    /// Sequence number.
    seq: u64,
    /// What latency counts from: the intended start (open loop), or when the connection
    /// was free for this unit (closed loop).
    t0: Instant,
    /// Set for open-loop slots: the intended start, for lag.
    intended: Option<Instant>,
    begun: Instant,
    /// Connections this unit opened: (opened, with TLS).
    opened: (u64, u64),
}

/// Runs one worker until the schedule is exhausted or the run stops.
///
/// In closed loop the driver may send the next unit in the same write as the current
/// one's end (SMTP: the next envelope after the content, RFC 2920 §3.1), or several before
/// the current one completes (IMAP's `--pipeline`), and the goodbye with a connection's
/// last unit. The follow-on's latency still counts from when the
/// current unit ended (the server could not start on it before), so pipelining never
/// charges one unit's wait to the next. A connection whose quota is used up is closed
/// right after its last unit, before the next slot is claimed: the goodbye is timed when
/// its reply arrives, and its wait is never charged to the next unit.
pub(super) async fn run<D: Driver>(id: usize, eng: Arc<Shared<D>>) {
    let closed_loop = matches!(eng.plan.pacing, Pacing::Closed);
    let mut rng = fastrand::Rng::with_seed(seed(id, eng.plan.shard));
    let mut live: Option<Open<D::Conn>> = None;
    let mut carried: VecDeque<InFlight> = VecDeque::new();
    // Follow-ons claimed while the current unit is driven (kept: no allocation per unit).
    let mut next: Vec<InFlight> = Vec::new();
    loop {
        if carried.is_empty()
            && let Some(old) = live.take_if(|o| o.left == 0 || !D::idle(&o.conn))
        {
            // Boxed: the close future is kilobytes and runs once per connection.
            Box::pin(close(old.conn, &eng, id)).await;
        }
        let cur = match carried.pop_front() {
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
                    let mark = outage_mark(&eng);
                    // open is boxed: its future is kilobytes and runs once per
                    // connection; inline it would make every task that large (10,000
                    // connections held 80 MB of task state).
                    let n = eng.conns_opened.fetch_add(1, Ordering::Relaxed);
                    match Box::pin(eng.driver.open(n, &mut rng)).await {
                        Ok(conn) => {
                            eng.connected.store(true, Ordering::Relaxed);
                            opened = (1, u64::from(D::tls(&conn)));
                            live = Some(Open {
                                conn,
                                left: quota(eng.plan.per_conn, &mut rng),
                                mark,
                            });
                        }
                        Err(e) => {
                            if !eng.connected.load(Ordering::Relaxed)
                                && let Some(why) = e.unreachable()
                            {
                                // Nothing ever connected: a typo or a server that is
                                // down; one line instead of a run full of errors.
                                let _ = eng.unreachable.set(why);
                                eng.schedule.stop();
                                eng.stop.cancel();
                            }
                            {
                                let mut rec = eng.shards.get(id);
                                e.record_setup(&mut rec);
                                let c = &mut rec.counters;
                                if e.reached() {
                                    // A connection, lost in its set-up (its error says
                                    // where) or refused at login.
                                    c.connections += 1;
                                    c.mailbox.login_failures += u64::from(e.login_refused());
                                } else {
                                    c.connect_failures += 1;
                                }
                            }
                            lost(&eng, id, &e, slot.intended, begun, t0);
                            if !outlast(&eng, 1, closed_loop, mark).await {
                                // Do not spin on a dead target; open loop shows this as lag.
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            continue;
                        }
                    }
                }
                let Some(o) = live.as_mut() else { continue };
                if let Err(e) = eng.driver.begin(&mut o.conn, slot.seq, &mut rng) {
                    lost(&eng, id, &e, slot.intended, begun, t0);
                    live = None;
                    continue;
                }
                InFlight {
                    seq: slot.seq,
                    t0,
                    intended: slot.intended,
                    begun,
                    opened,
                }
            }
        };
        let Some(o) = live.as_mut() else {
            eng.in_flight.fetch_sub(1, Ordering::Relaxed);
            continue;
        };
        o.left = o.left.saturating_sub(1);
        // Units this connection may still carry beyond those already in flight on it.
        let room = o.left.saturating_sub(carried.len() as u64);
        let may_follow = closed_loop && !eng.stop.is_cancelled();
        // A follow-on's clock is set where the current unit ends (below): until then it
        // holds the current one's start, and no time is read per follow-on.
        let placeholder = cur.begun;
        let result = {
            let (eng2, next2) = (&eng, &mut next);
            let mut ask = move || {
                let room = room.saturating_sub(next2.len() as u64);
                if may_follow && room > 0 {
                    let Some(slot) = eng2.schedule.claim() else {
                        return Next::Last;
                    };
                    eng2.in_flight.fetch_add(1, Ordering::Relaxed);
                    next2.push(InFlight {
                        seq: slot.seq,
                        t0: placeholder,
                        intended: None,
                        begun: placeholder,
                        opened: (0, 0),
                    });
                    Next::Unit(slot.seq)
                } else if room == 0 {
                    Next::Last
                } else {
                    Next::Wait
                }
            };
            eng.driver.complete(&mut o.conn, &mut ask, &mut rng).await
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
            record_start(&mut rec, cur.intended, cur.begun, eng.late);
            // The unit that opened its connection is charged the opening too (the
            // README's `total`), whatever the protocol timed of its own command.
            let took = result
                .as_ref()
                .ok()
                .and_then(|o| eng.driver.took(o))
                .filter(|_| cur.opened.0 == 0);
            rec.record(Metric::Total, took.unwrap_or(done - cur.t0));
            rec.counters.sent += 1;
            let failed = eng
                .driver
                .record(&mut rec, &mut o.conn, cur.seq, result.as_ref().ok());
            if let Err(e) = &result {
                rec.counters.errors += 1;
                rec.error(e.class(), e.step(), e.code(), || e.to_string());
            }
            failed || result.is_err()
        };
        eng.in_flight.fetch_sub(1, Ordering::Relaxed);
        if failed {
            count_failure(&eng);
        }
        match result {
            Ok(_) => {
                carried.extend(next.drain(..));
                // The server starts on the next unit only now: it waited in the server's
                // input behind the current one.
                for n in &mut carried {
                    n.t0 = done;
                    n.begun = done;
                }
            }
            Err(e) => {
                // The connection is gone, and with it every follow-on already sent: each
                // waited from its own start (where the unit before it ended, or for those
                // claimed during this one, where this one began) until now.
                let mut cut = 1;
                for n in next.drain(..).chain(carried.drain(..)) {
                    lost(&eng, id, &e, None, n.begun, n.t0);
                    cut += 1;
                }
                let mark = o.mark;
                live = None;
                outlast(&eng, cut, closed_loop, mark).await;
            }
        }
    }
    if let Some(old) = live.take() {
        Box::pin(close(old.conn, &eng, id)).await;
    }
}

/// Where the plan's outages stand now (nothing to mark without one).
fn outage_mark<D: Driver>(eng: &Shared<D>) -> Mark {
    eng.plan
        .outage
        .as_ref()
        .map(|o| o.mark())
        .unwrap_or_default()
}

/// In closed loop, where `n` units just failed with their connection, attempted at
/// `mark`, because the server was down on purpose (the plan's outage, [`Outage::cut`]):
/// waits for it to be up again (at most [`Outage::WAIT_AT_MOST`], or until the run
/// stops), then gives the count one more unit for each, so that the outage does not use
/// up the run's count. The failed units stay counted as they were (errors). False when
/// the failure was not the outage's (nothing waited).
async fn outlast<D: Driver>(eng: &Shared<D>, n: u64, closed_loop: bool, mark: Mark) -> bool {
    let Some(o) = eng
        .plan
        .outage
        .as_ref()
        .filter(|o| closed_loop && o.cut(mark))
    else {
        return false;
    };
    let up = tokio::select! {
        up = o.wait_up(Outage::WAIT_AT_MOST) => up,
        _ = eng.stop.cancelled() => false,
    };
    if up {
        o.made_up(n);
        for _ in 0..n {
            eng.schedule.extend();
        }
    }
    true
}

/// How many units a new connection may carry: `per_conn`'s fixed number or a draw from
/// its range; unlimited for 0.
fn quota(per_conn: (u64, u64), rng: &mut fastrand::Rng) -> u64 {
    match per_conn {
        (0, _) => u64::MAX,
        (lo, hi) if lo == hi => lo,
        (lo, hi) => rng.u64(lo..=hi),
    }
}

/// Counts a unit lost with its connection (after it was claimed and counted in flight).
fn lost<D: Driver>(
    eng: &Shared<D>,
    id: usize,
    e: &D::Failure,
    intended: Option<Instant>,
    begun: Instant,
    t0: Instant,
) {
    {
        let mut rec = eng.shards.get(id);
        rec.counters.sent += 1;
        rec.counters.errors += 1;
        rec.error(e.class(), e.step(), e.code(), || e.to_string());
        record_start(&mut rec, intended, begun, eng.late);
        rec.record(Metric::Total, Instant::now() - t0);
    }
    eng.in_flight.fetch_sub(1, Ordering::Relaxed);
    count_failure(eng);
}

/// Records how late an open-loop unit started; `late` is where lateness starts to count.
fn record_start(rec: &mut Recorder, intended: Option<Instant>, begun: Instant, late: Duration) {
    if let Some(at) = intended {
        let lag = begun.saturating_duration_since(at);
        rec.record(Metric::Lag, lag);
        if lag > late {
            rec.counters.late_starts += 1;
        }
    }
}

fn count_failure<D: Driver>(eng: &Shared<D>) {
    let n = eng.failures.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(max) = eng.plan.max_errors
        && n >= max
    {
        eng.schedule.stop();
        eng.stop.cancel();
    }
}

async fn close<D: Driver>(conn: D::Conn, eng: &Shared<D>, id: usize) {
    let (timed, bytes_out) = eng.driver.close_counted(conn).await;
    let mut rec = eng.shards.get(id);
    rec.counters.bytes_out += bytes_out;
    if let Some((step, d)) = timed {
        rec.record(step, d);
    }
}

/// The seed of worker `id`'s draws (a command of the mix, TLS or not, a user at random):
/// that of its connection slot in the whole run — agent I of N keeps slots I, I+N, … —
/// so that a split run's agents draw as one agent's workers would, not all alike.
fn seed(id: usize, shard: Shard) -> u64 {
    let slot = (id as u64)
        .wrapping_mul(shard.count)
        .wrapping_add(shard.index);
    0x5eed ^ slot.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44: every agent's worker k drew with the seed of k, so three agents of a
    /// split IMAP run ran the same commands; now each draws as its slot of the whole run.
    #[test]
    fn a_split_run_s_workers_draw_as_their_slots_of_the_whole_run() {
        let whole = |k| seed(k, Shard::WHOLE);
        assert_eq!(whole(3), 0x5eed ^ 3u64.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let agent = |i, k| seed(k, Shard { index: i, count: 3 });
        assert_eq!(agent(0, 0), whole(0));
        assert_eq!(agent(1, 0), whole(1));
        assert_eq!(agent(2, 1), whole(5));
        assert_ne!(agent(0, 0), agent(1, 0));
    }
}
