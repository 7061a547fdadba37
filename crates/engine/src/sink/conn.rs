//! One sink connection: drives a [`ServerSession`] over a socket, performs its output
//! (replies batched per read, delays, STARTTLS, close), enforces the idle timeout and the
//! bandwidth limit, and records what happened into its statistics shard. A message it
//! accepts counts as delivered only once the accepting reply has been written, and after
//! an injected hold only if the client is still there: an MTA that gave up waiting will
//! send the message again.

use std::net::IpAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::delivery::{Confirmed, Delivery};
use super::faults::{FaultKind, FaultState};
use super::plan::SinkPlan;
use super::store::{Store, StoreCounts, StoreError};
use crate::message::trace::{Trace, Traced};
use crate::smtp::proto::server::{
    Command, Decision, Envelope, Handler, Out, Received, ServerSession, SessionCounts, Verdict,
    reply,
};
use crate::stats::{Metric, Shards};
use crate::transport::stream::Stream;
use crate::transport::tls;

/// What all connections share.
pub struct Shared {
    /// The plan.
    pub plan: SinkPlan,
    /// Fault state and counts.
    pub faults: FaultState,
    /// The latency and counter shards this connection records into.
    pub shards: Shards,
    /// Messages delivered so far (for `--exit-after-messages`).
    pub messages: AtomicU64,
    /// Open connections.
    pub open: AtomicU64,
    /// Milliseconds since `start` of the last byte received.
    pub last_activity_ms: AtomicU64,
    /// Milliseconds since `start` of the first byte a client sent: where the sink's
    /// active span begins (a sink waits for its clients, and a port probe that says
    /// nothing is no client).
    pub first_input_ms: std::sync::OnceLock<u64>,
    /// Transaction attempts this sink refused (see [`SessionCounts::refused`]).
    pub refused: AtomicU64,
    /// Connections answered 421 at the greeting by a connection limit.
    pub sessions_refused: AtomicU64,
    /// Transaction attempts the clients gave up on.
    pub abandoned: AtomicU64,
    /// Messages accepted whose reply never reached the client (it had gone, or the write
    /// failed): not delivered, the client will send them again or count them failed.
    pub unconfirmed: AtomicU64,
    /// What the store did with the messages it was given (`--store`).
    pub stored: StoreCounts,
    /// Time zero.
    pub start: Instant,
    /// Deliveries and correlation, shared with a relay waiting on the drain.
    pub delivery: Arc<Delivery>,
    /// Sends DSNs for recipients flagged `b`, when `--bounce-to` is set.
    pub bouncer: Option<super::bounce::Bouncer>,
    /// Stop serving.
    pub stop: CancellationToken,
}

/// First read size per connection: idle connections must stay small.
const READ_MIN: usize = 1024;
/// Largest read size; reads that fill the buffer double it up to this.
const READ_MAX: usize = 64 * 1024;

/// A message this connection accepted whose reply is not yet written.
struct Accepted {
    /// Its reply waits for an [`Out::Hold`] (an injected delay) first.
    held: bool,
    trace: Option<Trace>,
    /// For a bounce: the recipients it reports failed.
    bounced: u64,
    /// For a notice to the null sender: the recipients it reports only late.
    delayed: u64,
    /// Its body is not the one its trace header describes (cut or altered on the way).
    damaged: bool,
    /// Its recipients' correlation keys in `ConnHandler::keys`.
    keys: Range<usize>,
    recipients: u64,
    bytes: u64,
    null_sender: bool,
}

struct ConnHandler {
    sh: Arc<Shared>,
    ip: Option<IpAddr>,
    rng: fastrand::Rng,
    msgs: u64,
    /// Accepted messages waiting for their reply to be written.
    accepted: Vec<Accepted>,
    keys: Vec<u64>,
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
    /// then bounces.
    async fn message(&mut self, m: Received<'_>) -> Decision {
        self.msgs += 1;
        if m.oversize {
            return Decision::ACCEPT; // the session answers 552
        }
        let d = self.decide(Command::DataEnd, m.env, "");
        if d.verdict != Verdict::Accept {
            return d;
        }
        if let Some(v) = &self.sh.plan.dkim {
            v.check(m.data).await;
        }
        if !matches!(self.sh.plan.store, Store::Discard) {
            let (sh, env, data) = (self.sh.clone(), m.env.clone(), m.data.to_vec());
            let stored =
                tokio::task::spawn_blocking(move || sh.plan.store.put(&env, &data, sh.plan.fsync))
                    .await
                    .unwrap_or_else(|e| {
                        Err(StoreError::Failed(format!("storage task failed: {e}")))
                    });
            self.sh.stored.count(&stored);
            match stored {
                Ok(()) => {}
                // RFC 5321's 452, "insufficient system storage"; RFC 3463's 4.3.1, "mail
                // system full": the client keeps the message and tries again later.
                Err(StoreError::Full(e)) => {
                    return reply(452, "4.3.1", format!("insufficient system storage: {e}"));
                }
                Err(StoreError::Failed(e)) => return reply(451, "4.3.0", e),
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
        // Accepted (one decision covers every recipient): delivered once the reply is out.
        let first = self.keys.len();
        let c = &self.sh.delivery.correlator;
        self.keys.extend(m.env.rcpts.iter().map(|r| c.key(r)));
        let null_sender = m.env.from == "<>";
        // A bounce is about the message whose headers it returns; another message's body is
        // checked against the sum its trace header carries.
        let (trace, bounced, delayed, damaged) = if null_sender {
            crate::message::trace::notice(m.data).map_or((None, 0, 0, false), |n| {
                (Some(n.trace), n.failed, n.delayed, false)
            })
        } else {
            Traced::find(m.data).map_or((None, 0, 0, false), |t| {
                (Some(t.trace), 0, 0, t.intact == Some(false))
            })
        };
        self.accepted.push(Accepted {
            held: !d.delay.is_zero(),
            trace,
            bounced,
            delayed,
            damaged,
            keys: first..self.keys.len(),
            recipients: m.env.rcpts.len() as u64,
            bytes: m.data.len() as u64,
            null_sender,
        });
        d
    }

    /// Every reply queued so far reached the client: those messages are delivered.
    fn confirm(&mut self, id: usize) {
        let n = self.accepted.len();
        self.confirm_first(id, n);
    }

    /// At a hold: the messages before the held one had their replies written already.
    fn confirm_before_hold(&mut self, id: usize) {
        let n = self.accepted.iter().take_while(|a| !a.held).count();
        self.confirm_first(id, n);
    }

    /// The held message's wait is over and its client is still there.
    fn hold_passed(&mut self) {
        if let Some(a) = self.accepted.first_mut() {
            a.held = false;
        }
    }

    /// Counts the first `n` accepted messages as delivered.
    fn confirm_first(&mut self, id: usize, n: usize) {
        if n == 0 {
            return;
        }
        let sh = &self.sh;
        let now_us = crate::stats::clock::unix_us();
        let now_ms = sh.start.elapsed().as_millis() as u64;
        {
            let mut rec = sh.shards.get(id);
            for a in &self.accepted[..n] {
                rec.counters.accepted += 1;
                rec.counters.rcpts.delivered += a.recipients;
                rec.counters.bytes += a.bytes;
                if let Some(t) = a.trace.as_ref().filter(|_| !a.null_sender) {
                    rec.record_us(Metric::E2e, now_us.saturating_sub(t.sent_us));
                }
            }
        }
        for a in self.accepted.drain(..n) {
            sh.delivery.confirm(
                &Confirmed {
                    trace: a.trace,
                    bounced: a.bounced,
                    delayed: a.delayed,
                    damaged: a.damaged,
                    keys: &self.keys[a.keys],
                    null_sender: a.null_sender,
                },
                now_us,
                now_ms,
            );
        }
        if self.accepted.is_empty() {
            self.keys.clear();
        }
        let n = n as u64;
        let total = sh.messages.fetch_add(n, Ordering::Relaxed) + n;
        if sh.plan.exit_after_messages.is_some_and(|max| total >= max) {
            sh.stop.cancel();
        }
    }

    /// The replies to the accepted messages never reached the client.
    fn unconfirmed(&mut self) {
        let n = self.accepted.len() as u64;
        self.sh.unconfirmed.fetch_add(n, Ordering::Relaxed);
        self.accepted.clear();
        self.keys.clear();
    }
}

/// Serves one accepted connection to its end.
pub async fn serve(mut stream: Stream, ip: Option<IpAddr>, sh: Arc<Shared>, id: usize) {
    let open = sh.open.fetch_add(1, Ordering::Relaxed) + 1;
    let ip_ok = sh.faults.conn_open(ip);
    sh.shards.get(id).counters.connections += 1;
    if !ip_ok || open > sh.plan.max_connections as u64 {
        sh.faults.count(FaultKind::Limit);
        sh.sessions_refused.fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"421 4.7.0 too many connections, try later\r\n")
            .await;
    } else {
        run_session(&mut stream, ip, &sh, id).await;
    }
    sh.faults.conn_close(ip);
    sh.open.fetch_sub(1, Ordering::Relaxed);
}

/// How a session's output ended.
enum Flushed {
    /// Everything written; keep reading.
    Open,
    /// The session is over (closed by either side, or the write failed).
    Over,
}

async fn run_session(stream: &mut Stream, ip: Option<IpAddr>, sh: &Arc<Shared>, id: usize) {
    let mut h = ConnHandler {
        sh: sh.clone(),
        ip,
        rng: fastrand::Rng::new(),
        msgs: 0,
        accepted: Vec::new(),
        keys: Vec::new(),
    };
    let mut session = ServerSession::new(sh.plan.server.clone(), false, &mut h);
    let mut reported = SessionCounts::default();
    let mut out = Vec::new();
    let mut buf = bytes::BytesMut::with_capacity(READ_MIN);
    // Bytes already in `buf` that were read while checking for a closed peer.
    let mut carried = 0;
    let mut want = READ_MIN;
    loop {
        let flushed = flush(
            stream,
            &mut session,
            &mut h,
            &mut out,
            &mut buf,
            &mut carried,
            id,
        )
        .await;
        report(sh, id, &session.counts, &mut reported);
        if matches!(flushed, Flushed::Over) || session.is_closed() {
            break;
        }
        let n = if carried > 0 {
            std::mem::take(&mut carried)
        } else {
            buf.clear();
            buf.reserve(want);
            let read = tokio::select! {
                r = tokio::time::timeout(sh.plan.idle_timeout, stream.read_buf(&mut buf)) => r,
                _ = sh.stop.cancelled() => {
                    let _ = stream.write_all(b"421 4.3.2 sink shutting down\r\n").await;
                    break;
                }
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => n,
                Err(_) => {
                    let _ = stream.write_all(b"421 4.4.2 idle timeout\r\n").await;
                    break;
                }
            }
        };
        let now_ms = sh.start.elapsed().as_millis() as u64;
        sh.last_activity_ms.store(now_ms, Ordering::Relaxed);
        sh.first_input_ms.get_or_init(|| now_ms);
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
    // Whatever was accepted and not yet answered never reached the client.
    h.unconfirmed();
    session.end();
    report(sh, id, &session.counts, &mut reported);
}

/// Performs the session's queued output. Accepted messages become deliveries once every
/// reply up to theirs is written; after an injected delay the peer is checked first, so a
/// client that gave up waiting (and will send the message again) is not counted as served.
async fn flush(
    stream: &mut Stream,
    session: &mut ServerSession,
    h: &mut ConnHandler,
    out: &mut Vec<Out>,
    buf: &mut bytes::BytesMut,
    carried: &mut usize,
    id: usize,
) -> Flushed {
    let sh = h.sh.clone();
    session.take_output(out);
    for item in out.drain(..) {
        match item {
            Out::Bytes(b) => {
                if write_reply(stream, &b, sh.plan.drip).await.is_err() {
                    return Flushed::Over;
                }
            }
            Out::Delay(d) => tokio::time::sleep(d).await,
            Out::Hold(d) => {
                h.confirm_before_hold(id);
                tokio::time::sleep(d).await;
                if *carried == 0 && peer_closed(stream, buf, carried).await {
                    return Flushed::Over;
                }
                h.hold_passed();
            }
            Out::StartTls => {
                let Some(cfg) = sh.plan.tls.clone() else {
                    return Flushed::Over;
                };
                // The handshake future is boxed: inline it would double every
                // connection's task, idle or not.
                let plain = std::mem::replace(stream, Stream::Gone);
                match Box::pin(tls::accept(plain, cfg)).await {
                    Ok(s) => {
                        *stream = s;
                        sh.shards.get(id).counters.tls_connections += 1;
                        session.tls_established();
                    }
                    Err(_) => return Flushed::Over,
                }
            }
            Out::Close => {
                let _ = stream.flush().await;
                h.confirm(id);
                return Flushed::Over;
            }
        }
    }
    h.confirm(id);
    Flushed::Open
}

/// True when the client has closed its side (or reset) while a reply was held back.
/// Bytes it sent meanwhile (pipelined commands) are kept in `buf` for the next feed.
async fn peer_closed(stream: &mut Stream, buf: &mut bytes::BytesMut, carried: &mut usize) -> bool {
    buf.clear();
    buf.reserve(READ_MIN);
    tokio::select! {
        biased;
        r = stream.read_buf(buf) => match r {
            Ok(0) | Err(_) => true,
            Ok(n) => {
                *carried = n;
                false
            }
        },
        _ = std::future::ready(()) => false,
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

/// Adds what changed since the last report into the shard and the shared counts.
fn report(sh: &Shared, id: usize, now: &SessionCounts, last: &mut SessionCounts) {
    if now == last {
        return;
    }
    {
        let mut rec = sh.shards.get(id);
        let c = &mut rec.counters;
        c.sent += now.transactions - last.transactions;
        c.rejected += now.rejected - last.rejected;
        c.errors += now.protocol_errors - last.protocol_errors;
    }
    sh.refused
        .fetch_add(now.refused - last.refused, Ordering::Relaxed);
    sh.abandoned
        .fetch_add(now.abandoned - last.abandoned, Ordering::Relaxed);
    *last = now.clone();
}
