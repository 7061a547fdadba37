//! One sink connection: drives a [`ServerSession`] over a socket, performs its output
//! (replies batched per read, delays, STARTTLS, close), enforces the idle timeout and the
//! bandwidth limit, and records what happened into its statistics shard.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::correlate::Correlator;
use super::faults::{FaultKind, FaultState};
use super::plan::SinkPlan;
use super::store::Store;
use crate::message::trace::Trace;
use crate::smtp::proto::server::{
    Command, Decision, Envelope, Handler, Out, Received, ServerSession, SessionCounts, Verdict,
    reply,
};
use crate::smtp::stream::Stream;
use crate::stats::{Metric, Shards};

/// What all connections share.
pub struct Shared {
    /// The plan.
    pub plan: SinkPlan,
    /// Fault state and counts.
    pub faults: FaultState,
    /// Trace correlation.
    pub correlator: Correlator,
    /// Statistics.
    pub shards: Shards,
    /// Messages accepted so far (for `--exit-after-messages`).
    pub messages: AtomicU64,
    /// Open connections.
    pub open: AtomicU64,
    /// Milliseconds since `start` of the last byte received.
    pub last_activity_ms: AtomicU64,
    /// Time zero.
    pub start: Instant,
    /// Deliveries as they happen, for a relay waiting on the drain.
    pub delivery: Arc<Delivery>,
    /// Sends DSNs for recipients flagged `b`, when `--bounce-to` is set.
    pub bouncer: Option<super::bounce::Bouncer>,
    /// Stop serving.
    pub stop: CancellationToken,
}

/// Deliveries seen so far, readable while the sink runs.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Messages accepted.
    pub messages: AtomicU64,
    /// Recipients of those messages.
    pub recipients: AtomicU64,
    /// Milliseconds after the sink's start of the latest delivery.
    pub last_ms: AtomicU64,
}

/// First read size per connection: idle connections must stay small.
const READ_MIN: usize = 1024;
/// Largest read size; reads that fill the buffer double it up to this.
const READ_MAX: usize = 64 * 1024;

struct ConnHandler {
    sh: Arc<Shared>,
    ip: Option<IpAddr>,
    rng: fastrand::Rng,
    msgs: u64,
    e2e_us: Vec<u64>,
}

impl Handler for ConnHandler {
    fn decide(&mut self, cmd: Command, env: &Envelope, arg: &str) -> Decision {
        self.sh
            .faults
            .decide(&mut self.rng, cmd, self.ip, &env.from, arg, self.msgs)
    }
}

impl ConnHandler {
    /// Decides end of data for a complete message: faults first, then storage (on a
    /// blocking thread, so that a slow disk or `--fsync` holds up only this connection),
    /// then bounces and trace correlation.
    async fn message(&mut self, m: Received<'_>) -> Decision {
        self.msgs += 1;
        if m.oversize {
            return Decision::ACCEPT; // the session answers 552
        }
        let d = self.decide(Command::DataEnd, m.env, "");
        if d.verdict != Verdict::Accept {
            return d;
        }
        if !matches!(self.sh.plan.store, Store::Discard) {
            let (sh, env, data) = (self.sh.clone(), m.env.clone(), m.data.to_vec());
            let stored =
                tokio::task::spawn_blocking(move || sh.plan.store.put(&env, &data, sh.plan.fsync))
                    .await
                    .unwrap_or_else(|e| Err(format!("storage task failed: {e}")));
            if let Err(e) = stored {
                return reply(451, "4.3.0", e);
            }
        }
        if let Some(b) = &self.sh.bouncer {
            for rcpt in &m.env.rcpts {
                if self
                    .sh
                    .faults
                    .plan
                    .users
                    .get(&rcpt.to_ascii_lowercase())
                    .is_some_and(|f| f.contains('b'))
                {
                    b.bounce(&self.sh.plan.server.hostname, &m.env.from, rcpt, m.data);
                }
            }
        }
        match Trace::find(m.data) {
            Some(t) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros() as u64);
                self.e2e_us.push(now.saturating_sub(t.sent_us));
                if let Some((run, log)) = &self.sh.plan.arrival_log
                    && *run == t.run
                {
                    log.record_at(t.seq, now);
                }
                self.sh.correlator.arrived(&t, &m.env.rcpts);
            }
            None => self.sh.correlator.untracked_add(m.env.rcpts.len() as u64),
        }
        d
    }
}

/// Serves one accepted connection to its end.
pub async fn serve(mut stream: Stream, ip: Option<IpAddr>, sh: Arc<Shared>, id: usize) {
    let open = sh.open.fetch_add(1, Ordering::Relaxed) + 1;
    let ip_ok = sh.faults.conn_open(ip);
    sh.shards.get(id).counters.connections += 1;
    if !ip_ok || open > sh.plan.max_connections as u64 {
        sh.faults.count(FaultKind::Limit);
        let _ = stream
            .write_all(b"421 4.7.0 too many connections, try later\r\n")
            .await;
    } else {
        run_session(&mut stream, ip, &sh, id).await;
    }
    sh.faults.conn_close(ip);
    sh.open.fetch_sub(1, Ordering::Relaxed);
}

async fn run_session(stream: &mut Stream, ip: Option<IpAddr>, sh: &Arc<Shared>, id: usize) {
    let mut h = ConnHandler {
        sh: sh.clone(),
        ip,
        rng: fastrand::Rng::new(),
        msgs: 0,
        e2e_us: Vec::new(),
    };
    let mut session = ServerSession::new(sh.plan.server.clone(), false, &mut h);
    let mut reported = SessionCounts::default();
    let mut out = Vec::new();
    let mut buf = bytes::BytesMut::with_capacity(READ_MIN);
    let mut want = READ_MIN;
    let idle = sh.plan.idle_timeout;
    loop {
        session.take_output(&mut out);
        for item in out.drain(..) {
            match item {
                Out::Bytes(b) => {
                    if write_reply(stream, &b, sh.plan.drip).await.is_err() {
                        return report(sh, id, &session.counts, &mut reported, &mut h.e2e_us);
                    }
                }
                Out::Delay(d) => tokio::time::sleep(d).await,
                Out::StartTls => {
                    let Some(cfg) = sh.plan.tls.clone() else {
                        return;
                    };
                    let acceptor = TlsAcceptor::from(cfg);
                    // The handshake futures are boxed: inline they would double every
                    // connection's task, idle or not.
                    let upgraded = match std::mem::replace(stream, Stream::Gone) {
                        Stream::Tcp(s) => Box::pin(acceptor.accept(s))
                            .await
                            .map(|t| Stream::Tls(Box::new(t))),
                        Stream::Unix(s) => Box::pin(acceptor.accept(s))
                            .await
                            .map(|t| Stream::Tls(Box::new(t))),
                        other => {
                            *stream = other;
                            return;
                        }
                    };
                    match upgraded {
                        Ok(s) => {
                            *stream = s;
                            sh.shards.get(id).counters.tls_connections += 1;
                            session.tls_established();
                        }
                        Err(_) => {
                            return report(sh, id, &session.counts, &mut reported, &mut h.e2e_us);
                        }
                    }
                }
                Out::Close => {
                    let _ = stream.flush().await;
                    return report(sh, id, &session.counts, &mut reported, &mut h.e2e_us);
                }
            }
        }
        report(sh, id, &session.counts, &mut reported, &mut h.e2e_us);
        if session.is_closed() {
            return;
        }
        buf.clear();
        buf.reserve(want);
        let n = tokio::select! {
            r = tokio::time::timeout(idle, stream.read_buf(&mut buf)) => match r {
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(n)) => n,
                Err(_) => {
                    let _ = stream.write_all(b"421 4.4.2 idle timeout\r\n").await;
                    return;
                }
            },
            _ = sh.stop.cancelled() => {
                let _ = stream.write_all(b"421 4.3.2 sink shutting down\r\n").await;
                return;
            }
        };
        sh.last_activity_ms
            .store(sh.start.elapsed().as_millis() as u64, Ordering::Relaxed);
        if sh.plan.bandwidth > 0 {
            let secs = n as f64 / sh.plan.bandwidth as f64;
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        }
        if n >= want && want < READ_MAX {
            want *= 2;
        }
        let mut at = 0;
        loop {
            at += session.feed(&buf[at..n], &mut h);
            let Some(m) = session.received() else {
                break;
            };
            let d = h.message(m).await;
            session.finish(std::slice::from_ref(&d));
        }
    }
}

/// Writes replies at once, or a byte at a time with `drip` between bytes (a tarpit that
/// drips its replies, as some receivers do to slow senders down).
async fn write_reply(stream: &mut Stream, bytes: &[u8], drip: Duration) -> std::io::Result<()> {
    if drip.is_zero() {
        return stream.write_all(bytes).await;
    }
    for b in bytes {
        stream.write_all(std::slice::from_ref(b)).await?;
        stream.flush().await?;
        tokio::time::sleep(drip).await;
    }
    Ok(())
}

/// Adds what changed since the last report into the shard.
fn report(
    sh: &Shared,
    id: usize,
    now: &SessionCounts,
    last: &mut SessionCounts,
    e2e: &mut Vec<u64>,
) {
    if now == last && e2e.is_empty() {
        return;
    }
    let new_msgs = now.messages - last.messages;
    {
        let mut rec = sh.shards.get(id);
        let c = &mut rec.counters;
        c.accepted += new_msgs;
        c.sent += now.transactions - last.transactions;
        c.rcpts_delivered += now.recipients - last.recipients;
        c.bytes += now.bytes - last.bytes;
        c.rejected += now.rejected - last.rejected;
        c.errors += now.protocol_errors - last.protocol_errors;
        for us in e2e.drain(..) {
            rec.record_us(Metric::E2e, us);
        }
    }
    if new_msgs > 0 {
        let d = &sh.delivery;
        d.recipients
            .fetch_add(now.recipients - last.recipients, Ordering::Relaxed);
        d.messages.fetch_add(new_msgs, Ordering::Relaxed);
        d.last_ms
            .store(sh.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    *last = now.clone();
    let total = sh.messages.fetch_add(new_msgs, Ordering::Relaxed) + new_msgs;
    if let Some(max) = sh.plan.exit_after_messages
        && new_msgs > 0
        && total >= max
    {
        sh.stop.cancel();
    }
}
