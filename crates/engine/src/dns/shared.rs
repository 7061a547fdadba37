//! What every socket of one server shares (`server`'s TCP side and `udp`'s threads):
//! the responder, the latency shards and the DNS counts, the rules' time zero, the query
//! log, and how many delayed answers wait (at most [`MAX_DELAYED`]; more are answered at
//! once and counted as `shed`).

use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::answer::{Answer, Outcome, Responder, Transport};
use super::tally::Tally;
use crate::stats::{Metric, Recorder, Shards};

/// Most delayed answers waiting at once.
pub const MAX_DELAYED: usize = 65_536;

/// What every socket of one server shares.
pub struct Shared {
    /// Zones and rules.
    pub responder: Arc<Responder>,
    /// Latencies and the shared counters (a query is a unit of work).
    pub shards: Shards,
    /// The DNS-specific counts.
    tally: Mutex<Tally>,
    /// Time zero of the series.
    pub start: Instant,
    /// Where the rules' windows (`until=`) begin, µs after `start`: a relay moves it to
    /// each run's start.
    rules_from_us: AtomicU64,
    /// One line per query, when asked (`--query-log`).
    log: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
    /// TCP connections open (at most `server::MAX_TCP`).
    pub(super) tcp_open: AtomicUsize,
    /// Delayed answers waiting.
    pub(super) delayed: AtomicUsize,
}

impl Shared {
    /// A server's shared state; `log` is the query log's file, if any.
    pub fn new(responder: Arc<Responder>, start: Instant, log: Option<std::fs::File>) -> Self {
        Shared {
            responder,
            shards: Shards::new(4),
            tally: Mutex::new(Tally::default()),
            start,
            rules_from_us: AtomicU64::new(0),
            log: log.map(|f| Mutex::new(std::io::BufWriter::new(f))),
            tcp_open: AtomicUsize::new(0),
            delayed: AtomicUsize::new(0),
        }
    }

    /// The counts so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether no query log is kept (then UDP may answer from its reply cache).
    pub(super) fn log_off(&self) -> bool {
        self.log.is_none()
    }

    /// Counts a delayed answer sent at once because too many were waiting.
    pub(super) fn count_shed(&self) {
        self.tally.lock().unwrap_or_else(|p| p.into_inner()).shed += 1;
    }

    /// How long after the rules' time zero `t` is.
    pub(super) fn rule_time(&self, t: Instant) -> Duration {
        let from = Duration::from_micros(self.rules_from_us.load(Ordering::Relaxed));
        t.duration_since(self.start).saturating_sub(from)
    }

    /// Takes the counts and the latencies recorded so far, starting again from zero, and
    /// starts the rules' windows again from now (a relay keeps each of its runs apart).
    pub fn take(&self) -> (Tally, Recorder) {
        let now = self.start.elapsed().as_micros() as u64;
        self.rules_from_us.store(now, Ordering::Relaxed);
        let t = std::mem::take(&mut *self.tally.lock().unwrap_or_else(|p| p.into_inner()));
        let mut rec = Recorder::new();
        self.shards.drain_into(&mut rec);
        (t, rec)
    }

    /// Writes out the query log's buffer.
    pub fn flush_log(&self) {
        if let Some(l) = &self.log {
            let _ = l.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }

    /// Counts a batch of packets that arrived at `t0` and were answered just now, into
    /// latency shard `shard`: one lock of each kind for the batch, not one per packet.
    pub(super) fn record<'a>(
        &self,
        shard: usize,
        transport: Transport,
        t0: Instant,
        batch: impl IntoIterator<Item = (&'a Answer, IpAddr)>,
    ) {
        let took = t0.elapsed();
        let mut rec = self.shards.get(shard);
        let mut tally = self.tally.lock().unwrap_or_else(|p| p.into_inner());
        let mut log = self
            .log
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        for (a, from) in batch {
            rec.counters.sent += 1;
            match a.outcome {
                Outcome::Answered => rec.counters.accepted += 1,
                Outcome::Dropped => rec.counters.aborted += 1,
                Outcome::Ignored => rec.counters.errors += 1,
            }
            if let (Some(c), Outcome::Answered) = (a.class, a.outcome) {
                rec.record(Metric::Step(c.index() as u8), took);
                rec.record(Metric::Total, took);
            }
            tally.count(a, transport, from);
            if let Some(l) = &mut log {
                write_log(
                    &mut **l,
                    a,
                    transport,
                    from,
                    t0.duration_since(self.start),
                    took,
                );
            }
        }
    }
}

/// One line of the query log.
fn write_log(
    l: &mut impl Write,
    a: &Answer,
    transport: Transport,
    from: IpAddr,
    at: Duration,
    took: Duration,
) {
    let (name, qtype) = a
        .question
        .as_ref()
        .map(|(n, t)| (n.as_str(), t.to_string()))
        .unwrap_or(("-", "-".into()));
    let what = match a.outcome {
        Outcome::Answered => {
            format!("rcode={}{}", a.rcode, if a.truncated { " tc" } else { "" })
        }
        Outcome::Dropped => "dropped".into(),
        Outcome::Ignored => "ignored".into(),
    };
    let _ = writeln!(
        l,
        "{:.6} {from} {} {name} {qtype} {what} {:.3}ms",
        at.as_secs_f64(),
        match transport {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        },
        took.as_secs_f64() * 1e3
    );
}
