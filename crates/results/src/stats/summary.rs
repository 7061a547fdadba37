//! The headline numbers of a run, one typed summary per command, each derived from the
//! recorded (mergeable) state — counters, histograms, times — so that a summary can be
//! recomputed from added-up recorders. They serialize to the `summary` object of the
//! results file (keys documented in docs/results-schema.md); thresholds name these keys.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::hist::ms;
use super::metric::{Metric, Steps};
use super::recorder::{Counters, Recorder};

/// What one command's thresholds may name.
#[derive(Debug, Clone, Copy)]
pub struct Vocabulary {
    /// The numeric keys of the command's results summary, in groups (commands that share
    /// a part of their summary share its group).
    pub keys: &'static [&'static [&'static str]],
    /// The names of the protocol's steps.
    pub steps: Steps,
    /// Which latency metrics the command records.
    pub metrics: fn(Metric) -> bool,
}

impl Vocabulary {
    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &'static str> {
        self.keys.iter().flat_map(|g| g.iter().copied())
    }

    /// The names of the metrics it records, in report order.
    pub fn metric_names(&self) -> Vec<&'static str> {
        self.steps
            .metrics()
            .filter(|m| (self.metrics)(*m))
            .map(|m| self.steps.name(m))
            .collect()
    }
}

/// What a generator did: shared by `send` and `relay`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Injection {
    /// Open loop: what the schedule wanted started before scheduling ended; closed loop:
    /// `sent`.
    pub intended: u64,
    /// Units started.
    pub sent: u64,
    /// Due and never started (`intended − sent`).
    pub unstarted: u64,
    /// Accepted.
    pub accepted: u64,
    /// Refused by a negative reply.
    pub rejected: u64,
    /// Lost to a connection failure.
    pub errors: u64,
    /// Cut off by the end of the run or a stop (not failures).
    pub aborted: u64,
    /// `rejected + errors`.
    pub failed: u64,
    /// Accepted per second over `span_s` (see [`Injection::new`]).
    pub msgs_per_sec: f64,
    /// The same per minute.
    pub mpm: f64,
    /// Octets of accepted messages.
    pub bytes: u64,
    /// The same per second over `rate_span_s`.
    #[serde(default)]
    pub bytes_per_sec: f64,
    /// The span every rate here is taken over, seconds: `send`'s active span, `relay`'s
    /// injection.
    #[serde(default)]
    pub rate_span_s: f64,
}

impl Injection {
    /// From the counters, what the schedule intended, and the span the rate is taken over.
    pub fn new(c: &Counters, intended: u64, span_s: f64) -> Injection {
        let intended = intended.max(c.sent);
        let span_s = span_s.max(1e-9);
        Injection {
            intended,
            sent: c.sent,
            unstarted: intended - c.sent,
            accepted: c.accepted,
            rejected: c.rejected,
            errors: c.errors,
            aborted: c.aborted,
            failed: c.rejected + c.errors,
            msgs_per_sec: c.accepted as f64 / span_s,
            mpm: c.accepted as f64 / span_s * 60.0,
            bytes: c.bytes,
            bytes_per_sec: c.bytes as f64 / span_s,
            rate_span_s: span_s,
        }
    }
}

/// `send`'s summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SendSummary {
    /// The injection; its rate is taken over `active_s`.
    #[serde(flatten)]
    pub injection: Injection,
    /// The whole run, seconds.
    pub duration_s: f64,
    /// From the start to the end of the last unit (closing connections left out).
    pub active_s: f64,
    /// Connections opened.
    pub connections: u64,
    /// Recipients accepted.
    pub rcpts_accepted: u64,
    /// Whole-unit latency, median, ms.
    pub p50_ms: f64,
    /// Whole-unit latency, 99th percentile, ms.
    pub p99_ms: f64,
    /// Schedule lag, 99th percentile, ms (open loop).
    pub lag_p99_ms: f64,
}

impl SendSummary {
    /// From everything recorded, what the schedule intended, and the run's times.
    pub fn derive(total: &Recorder, intended: u64, duration_s: f64, active_s: f64) -> Self {
        let c = &total.counters;
        let tot = total.hist(Metric::Total);
        SendSummary {
            injection: Injection::new(c, intended, active_s),
            duration_s,
            active_s,
            connections: c.connections,
            rcpts_accepted: c.rcpts.accepted,
            p50_ms: ms(tot, 0.5),
            p99_ms: ms(tot, 0.99),
            lag_p99_ms: ms(total.hist(Metric::Lag), 0.99),
        }
    }
}

/// DSNs a sink sent for recipients flagged `b`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BouncesSent {
    /// Delivered to the bounce target.
    pub sent: u64,
    /// Refused by it, or it was unreachable.
    pub failed: u64,
    /// Not sent because the queue was full.
    pub dropped: u64,
}

/// `sink`'s summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkSummary {
    /// Connections.
    pub sessions: u64,
    /// Connections that used TLS.
    pub tls_sessions: u64,
    /// MAIL commands accepted.
    pub transactions: u64,
    /// Messages delivered (accepted, and the reply reached the client).
    pub messages: u64,
    /// Their recipients.
    pub recipients: u64,
    /// Their octets.
    pub bytes: u64,
    /// Negative replies, not counting follow-ons of a refusal.
    pub rejected: u64,
    /// Transaction attempts the sink refused.
    pub refused: u64,
    /// Connections answered 421 at the greeting by a connection limit
    /// (`--max-connections`, `--max-conns-per-ip`): each a delivery the client had to try
    /// again, which no transaction count holds.
    #[serde(default)]
    pub sessions_refused: u64,
    /// Transaction attempts the clients gave up on.
    pub abandoned: u64,
    /// Accepted messages whose reply never reached the client.
    pub unconfirmed: u64,
    /// Protocol errors by clients.
    pub protocol_errors: u64,
    /// The same message to the same recipient again.
    pub duplicates: u64,
    /// Sequence numbers below the highest seen that never arrived.
    pub missing: u64,
    /// Missing, and neither refused nor given up.
    pub lost: u64,
    /// Messages with the null sender.
    pub null_sender: u64,
    /// Arrivals without a readable trace header.
    pub untracked: u64,
    /// Copies of traced messages whose body is not the one their trace header describes
    /// (length and CRC-32): cut or altered on the way, though they arrived.
    #[serde(default)]
    pub damaged: u64,
    /// Messages per second over `active_s`.
    pub msgs_per_sec: f64,
    /// The same per minute.
    pub mpm: f64,
    /// From the first byte a client sent to the last delivery, seconds: the span the rate
    /// is over (the whole run holds the wait for clients and the idle tail too).
    #[serde(default)]
    pub active_s: f64,
    /// End to end (trace send time to the confirmed reply), median, ms.
    pub e2e_p50_ms: f64,
    /// The same, 99th percentile.
    pub e2e_p99_ms: f64,
    /// Injected faults by kind.
    pub faults: BTreeMap<String, u64>,
    /// DSNs sent, with `--bounce-to`.
    pub bounces: Option<BouncesSent>,
    /// The whole run, seconds.
    pub duration_s: f64,
}

/// What a sink counts apart from its recorder: the attempts that ended without a
/// delivery, what it could not correlate, and the correlation's verdict.
#[derive(Debug, Clone, Default)]
pub struct SinkTallies {
    /// Transaction attempts the sink refused.
    pub refused: u64,
    /// Connections refused at the greeting by a connection limit.
    pub sessions_refused: u64,
    /// Transaction attempts the clients gave up on.
    pub abandoned: u64,
    /// Accepted messages whose reply never reached the client.
    pub unconfirmed: u64,
    /// Messages with the null sender.
    pub null_sender: u64,
    /// Arrivals without a readable trace header.
    pub untracked: u64,
    /// The same message to the same recipient again.
    pub duplicates: u64,
    /// Sequence numbers below the highest seen that never arrived.
    pub missing: u64,
    /// Copies whose body is not the one their trace header describes.
    pub damaged: u64,
    /// Injected faults by kind.
    pub faults: BTreeMap<String, u64>,
    /// DSNs sent.
    pub bounces: Option<BouncesSent>,
}

impl SinkSummary {
    /// From everything a sink recorded (or sinks, merged), what it counted apart, the
    /// run's length and its active span.
    pub fn derive(total: &Recorder, t: SinkTallies, duration_s: f64, active_s: f64) -> Self {
        let c = &total.counters;
        let span = active_s.max(1e-3);
        let e2e = total.hist(Metric::E2e);
        SinkSummary {
            sessions: c.connections,
            tls_sessions: c.tls_connections,
            transactions: c.sent,
            messages: c.accepted,
            recipients: c.rcpts.delivered,
            bytes: c.bytes,
            rejected: c.rejected,
            refused: t.refused,
            sessions_refused: t.sessions_refused,
            abandoned: t.abandoned,
            unconfirmed: t.unconfirmed,
            protocol_errors: c.errors,
            duplicates: t.duplicates,
            missing: t.missing,
            // A sequence number that never arrived is lost only if the sink did not refuse
            // it and its client did not give it up: each of those ends one attempt without
            // a delivery. Exact when the clients do not retry (mailbench send); behind a
            // retrying MTA use `relay`, which knows what the MTA accepted.
            lost: t
                .missing
                .saturating_sub(t.refused + t.abandoned + t.unconfirmed),
            null_sender: t.null_sender,
            untracked: t.untracked,
            damaged: t.damaged,
            msgs_per_sec: c.accepted as f64 / span,
            mpm: c.accepted as f64 / span * 60.0,
            active_s,
            e2e_p50_ms: ms(e2e, 0.5),
            e2e_p99_ms: ms(e2e, 0.99),
            faults: t.faults,
            bounces: t.bounces,
            duration_s,
        }
    }
}

/// `relay`'s summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelaySummary {
    /// The injection into the MTA; its rate is taken over the injection's duration.
    #[serde(flatten)]
    pub injection: Injection,
    /// Recipients the MTA accepted.
    pub expected_recipients: u64,
    /// Distinct recipients of those messages that arrived.
    pub delivered: u64,
    /// Distinct messages that arrived.
    pub delivered_messages: u64,
    /// Recipients the MTA bounced (the receiver refused them for good): known from the
    /// bounces that reached the sink and, where the lab's log is read (Postfix,
    /// OpenSMTPD), from the MTA's log — a bounce whose notice the receiver refused too is
    /// still a bounce.
    pub bounced: u64,
    /// `expected − delivered − bounced` once the drain ran its course (all arrived, or
    /// the drain timeout passed); 0 when a signal cut the drain short (those are
    /// `undelivered`, not lost).
    pub lost: u64,
    /// Accepted messages that arrived, but only with a body other than the one sent (cut
    /// or altered on the way: a queue file a power cut truncated); no intact copy arrived.
    /// They count in `delivered` (they arrived; `lost` is what never did): delivered
    /// intact is `delivered_messages − damaged`.
    #[serde(default)]
    pub damaged: u64,
    /// When a signal cut the drain short: the recipients neither delivered nor
    /// bounced by then — still with the MTA (see `queued_left`) or on their way, not lost.
    #[serde(default)]
    pub undelivered: u64,
    /// A signal cut the drain short: a second one, or the first 10 s after it.
    #[serde(default)]
    pub drain_aborted: bool,
    /// The same message to the same recipient again.
    pub duplicates: u64,
    /// Messages whose 250 never reached the client (cut off by the end of the run, a stop
    /// or a fault) that arrived anyway: the MTA had them, the client could not know.
    pub aborted_delivered: u64,
    /// Null-sender messages that arrived (bounces, delay notices and other notifications).
    pub bounces: u64,
    /// Delay notices of this run's messages that arrived: notices reporting recipients
    /// only late (`Action: delayed`), none failed — the MTA still tries them; not bounces.
    #[serde(default)]
    pub delay_notices: u64,
    /// Mail without this run's trace header.
    pub untraced: u64,
    /// Everything expected arrived and the MTA's queue was empty in time.
    pub drained: bool,
    /// Accepted messages per minute over the injection.
    pub inject_mpm: f64,
    /// Delivered messages per minute, first injection to last arrival (recipients per
    /// minute when `drain_per_recipient`); null when nothing arrived.
    pub drain_mpm: Option<f64>,
    /// First injection to last arrival (of any copy when `drain_per_recipient`), seconds;
    /// null when nothing arrived.
    pub drain_s: Option<f64>,
    /// The pace the MTA delivered at, whatever its latency: delivered messages per second
    /// (recipients when `drain_per_recipient`) between the arrivals of the first and the
    /// last 5 % (all arrivals under 20 of them); null under 2 arrivals.
    #[serde(default)]
    pub delivery_per_sec: Option<f64>,
    /// Messages arrived in several copies (a fan-out): the drain, its rate, the series'
    /// `delivered` and the backlog count recipients, not messages.
    #[serde(default)]
    pub drain_per_recipient: bool,
    /// End of the message's data (the client's last write of it) to the sink's confirmed
    /// reply, median, ms; null when nothing arrived.
    pub e2e_p50_ms: Option<f64>,
    /// The same, 99th percentile.
    pub e2e_p99_ms: Option<f64>,
    /// Messages that reached the receiver before the client read the MTA's 250 (an MTA
    /// that delivers before it replies).
    #[serde(default)]
    pub delivered_before_accept: u64,
    /// The largest lead of such an arrival on its 250, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_accept_max_ms: Option<f64>,
    /// Largest handed-over − delivered at an interval's end: messages whose data the MTA
    /// had and accepted, not yet delivered (recipients when `drain_per_recipient`).
    pub max_backlog: i64,
    /// Largest `--queue-cmd` value.
    pub max_queue: Option<f64>,
    /// A lab MTA's queues, each with the most messages it held at an interval's end
    /// (Postfix incoming, active, deferred, hold; qmail queue and todo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue_states: Option<Vec<super::queues::QueueState>>,
    /// Deliveries a lab MTA's log shows (its last hop's `status=sent` lines, one per
    /// recipient): of this run's messages only for Postfix and OpenSMTPD, whose logs are
    /// read message by message; every such line of the run for the others.
    pub maillog_sent: Option<u64>,
    /// Recipients of this run's messages a lab MTA's log says it bounced (Postfix,
    /// OpenSMTPD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maillog_bounced: Option<u64>,
    /// Messages a lab MTA still held at the end.
    pub queued_left: Option<u64>,
    /// Negative replies the embedded sink gave the MTA (its `--sink-rule` faults among
    /// them): each a delivery the MTA had to try again or bounce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_rejected: Option<u64>,
    /// With `--find-max`: the highest rate sustained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sustainable_per_sec: Option<f64>,
    /// The same per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sustainable_mpm: Option<f64>,
    /// A flush: messages on hold when they were released (`drain_s` and `drain_mpm` then
    /// count from the release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_held: Option<u64>,
    /// A flush: seconds from the first injection to the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_at_s: Option<f64>,
    /// Seed 003's "+s to flush": seconds from the end of injection (the generator's last
    /// reply) to the last arrival; 0 when everything arrived during injection, null when
    /// nothing arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_arrival_after_injection_s: Option<f64>,
    /// Seconds from the last arrival to the end of injection, where the last message
    /// arrived before injection ended (`last_arrival_after_injection_s` is 0 there): a
    /// newcomer read "+0.00 s to flush" as a flush that took no time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_arrival_before_injection_end_s: Option<f64>,
    /// Seconds from the end of injection to the end of the drain (everything arrived and
    /// the MTA's queue seen empty, the drain timeout, or a signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_end_after_injection_s: Option<f64>,
    /// Octets the generator wrote to the MTA's connections (commands and bodies, counted
    /// below TLS): the MTA's network in from its clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_to_mta_bytes: Option<u64>,
    /// Octets the embedded sink read from the MTA's connections (commands and bodies,
    /// counted below TLS): the MTA's network out to the next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_from_mta_bytes: Option<u64>,
    /// End to end per recipient, median, ms: present when messages arrived in several
    /// copies (a fan-out to many destinations), each recipient timed by its own copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_recipient_p50_ms: Option<f64>,
    /// The same, 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_recipient_p99_ms: Option<f64>,
    /// With the embedded DNS server: questions the MTA asked it during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_queries: Option<u64>,
    /// The same per delivered message (per delivered recipient: `dns_queries / delivered`
    /// is in `extra.dns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_queries_per_message: Option<f64>,
    /// The server's time to answer, median, ms (injected delays included): the resolver
    /// latency the MTA saw, from the server's side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_p50_ms: Option<f64>,
    /// The same, 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_p99_ms: Option<f64>,
    /// Deferrals the MTA's log blames on DNS (lookup failures, not found, timeouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_deferred: Option<u64>,
    /// With `--mta-lookup ldap`: recipient lookups the lab's directory answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups: Option<u64>,
    /// With `--mta-lookup ldap`: searches the proxy cut because the directory was down
    /// (`--ldap-fault down`; the MTA's reconnects in the window are refused before any
    /// search, so its 451s, counted in `errors`, can be more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups_failed: Option<u64>,
    /// `lookups` per message sent (refused messages were looked up too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups_per_msg: Option<f64>,
    /// A lookup's time from the MTA's search to the directory's last reply, median, ms
    /// (injected delays included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup_p50_ms: Option<f64>,
    /// The same, 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup_p99_ms: Option<f64>,
    /// With `--trace-io`: fsync, fdatasync and sync_file_range calls of the MTA's processes per
    /// delivered message, the forced writes that bound a disk queue's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsyncs_per_msg: Option<f64>,
    /// With `--trace-io`: opens with O_CREAT (and creat calls) per delivered message: the
    /// queue files an MTA makes for each (seed 004: one for Postfix, several for qmail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_created_per_msg: Option<f64>,
    /// With `--trace-io`: renames per delivered message (a queue file moving between states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renames_per_msg: Option<f64>,
    /// With `--trace-io`: unlinks per delivered message (queue files removed once delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlinks_per_msg: Option<f64>,
    /// With `--trace-io`: bytes the MTA's write calls wrote per delivered message (files,
    /// pipes and sockets alike: its queue and log writes beside the relayed copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_written_per_msg: Option<f64>,
    /// With `--trace-io`: times the MTA's processes left a CPU per delivered message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_switches_per_msg: Option<f64>,
    // --- `--fault` (issue 42): the crash or power cut during the run, and what it cost ---
    /// The fault as `--fault` gave it (`crash@150`, `power-loss@3s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// When the MTA was killed, seconds after injection started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_at_s: Option<f64>,
    /// Messages the MTA had accepted (250 read) when it was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_accepted_before: Option<u64>,
    /// From the kill to the restarted MTA's greeting, seconds (the power cut included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_down_s: Option<f64>,
    /// Accepted messages delivered more than once (`duplicates` counts the extra copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_duplicated_messages: Option<u64>,
    /// With `power-loss`: files of the queue with data not fsynced at the cut, as LazyFS
    /// reported them (the cut dropped that data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_unsynced_files: Option<u64>,
    /// With `crash` or `power-loss` in closed loop: messages cut or refused while the MTA
    /// was down (counted in `errors`) that the run made up with as many more once the
    /// restarted MTA greeted, so that the outage did not use up `-n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_made_up: Option<u64>,
    /// With `disk-full`: the MTA's 4xx replies to the generator (the full disk's
    /// refusals; `extra.fault.refusals_4xx` quotes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_refused_4xx: Option<u64>,
    /// From the restarted MTA's greeting (with `disk-full`: the space freed) to its first
    /// delivery, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_first_delivery_s: Option<f64>,
    /// From the restarted MTA's greeting (with `disk-full`: the space freed) to its last
    /// delivery (the drain's end), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_last_delivery_s: Option<f64>,
}

/// `mailbox pop3`'s summary: sessions as the units of work, and what they did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pop3Summary {
    /// Open loop: sessions the schedule wanted started; closed loop: `sessions`.
    pub intended: u64,
    /// Sessions started: attempts, a session that could not connect or log in included
    /// (it is one of `errors`).
    pub sessions: u64,
    /// Logins the server accepted (what its log counts).
    #[serde(default)]
    pub logins: u64,
    /// Due and never started.
    pub unstarted: u64,
    /// Sessions that did everything they set out to, without a `-ERR`.
    pub completed: u64,
    /// Sessions where the server answered a command with `-ERR`.
    pub refused: u64,
    /// Sessions lost to a connection failure, a refused login or a timeout.
    pub errors: u64,
    /// Sessions cut off by the end of the run or a stop.
    pub aborted: u64,
    /// Messages downloaded (RETR or TOP).
    pub retrieved: u64,
    /// Messages deleted (committed at QUIT).
    pub deleted: u64,
    /// Octets downloaded.
    pub bytes: u64,
    /// Sessions per second over `active_s`.
    pub sessions_per_sec: f64,
    /// Messages downloaded per second over `active_s`.
    pub retrieved_per_sec: f64,
    /// The whole run, seconds.
    pub duration_s: f64,
    /// From the start to the end of the last session.
    pub active_s: f64,
    /// Whole-session latency, median, ms.
    pub p50_ms: f64,
    /// Whole-session latency, 99th percentile, ms.
    pub p99_ms: f64,
    /// Schedule lag, 99th percentile, ms (open loop).
    pub lag_p99_ms: f64,
}

impl Pop3Summary {
    /// From everything recorded, what the schedule intended, and the run's times.
    pub fn derive(total: &Recorder, intended: u64, duration_s: f64, active_s: f64) -> Self {
        let c = &total.counters;
        let tot = total.hist(Metric::Total);
        let span = active_s.max(1e-9);
        let intended = intended.max(c.sent);
        Pop3Summary {
            intended,
            sessions: c.sent,
            logins: c.mailbox.logins,
            unstarted: intended - c.sent,
            completed: c.accepted,
            refused: c.rejected,
            errors: c.errors,
            aborted: c.aborted,
            retrieved: c.mailbox.retrieved,
            deleted: c.mailbox.deleted,
            bytes: c.bytes,
            sessions_per_sec: (c.accepted + c.rejected) as f64 / span,
            retrieved_per_sec: c.mailbox.retrieved as f64 / span,
            duration_s,
            active_s,
            p50_ms: ms(tot, 0.5),
            p99_ms: ms(tot, 0.99),
            lag_p99_ms: ms(total.hist(Metric::Lag), 0.99),
        }
    }
}

/// `mailbox imap`'s summary: commands as the units of work, what they did, and what the
/// state checks found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImapSummary {
    /// Open loop: commands the schedule wanted started; closed loop: `commands`.
    pub intended: u64,
    /// Commands sent (after the login and SELECT of their session).
    pub commands: u64,
    /// Due and never sent: not started, or lost with a session that failed to open.
    pub unstarted: u64,
    /// Commands completed with OK.
    pub completed: u64,
    /// Commands answered NO or BAD.
    pub refused: u64,
    /// Commands lost to a connection failure, a refused login or a timeout (those lost
    /// with a session that failed to open included).
    pub errors: u64,
    /// Commands cut off by the end of the run or a stop.
    pub aborted: u64,
    /// Sessions opened: logins the server accepted (what its log counts).
    pub sessions: u64,
    /// TCP connections made (a session lost in its set-up, or refused at login, included).
    #[serde(default)]
    pub connections: u64,
    /// Whole messages downloaded (`BODY[]`, `RFC822`).
    pub fetched: u64,
    /// Sections of messages downloaded that are not the whole message (a header, the
    /// text, a part: `fetch_part`).
    #[serde(default)]
    pub fetched_parts: u64,
    /// Messages appended.
    pub appended: u64,
    /// Messages copied into the mailbox (COPY).
    #[serde(default)]
    pub copied: u64,
    /// Messages expunged by EXPUNGE: exact when `expunges_shared` is 0, else an upper
    /// bound.
    pub expunged: u64,
    /// EXPUNGE commands answered while another session of the same user was open (more
    /// connections than users): their replies may report that session's expunges too.
    #[serde(default)]
    pub expunges_shared: u64,
    /// Messages moved out of the mailbox (MOVEs answered OK).
    #[serde(default)]
    pub moved: u64,
    /// Octets of message content downloaded (whole messages and sections).
    pub bytes: u64,
    /// State violations, all kinds (by kind in the counters).
    pub violations: u64,
    /// Commands the server answered (completed or refused) per second over `active_s`:
    /// one that timed out or lost its connection is not throughput.
    pub commands_per_sec: f64,
    /// The whole run, seconds.
    pub duration_s: f64,
    /// From the start to the end of the last command.
    pub active_s: f64,
    /// Command latency (from its intended start), median, ms.
    pub p50_ms: f64,
    /// Command latency, 99th percentile, ms.
    pub p99_ms: f64,
    /// Schedule lag, 99th percentile, ms (open loop).
    pub lag_p99_ms: f64,
}

impl ImapSummary {
    /// From everything recorded, what the schedule intended, and the run's times.
    pub fn derive(total: &Recorder, intended: u64, duration_s: f64, active_s: f64) -> Self {
        let c = &total.counters;
        let tot = total.hist(Metric::Total);
        let span = active_s.max(1e-9);
        let intended = intended.max(c.sent);
        let commands = c.sent.saturating_sub(c.mailbox.setup_failures);
        ImapSummary {
            intended,
            commands,
            unstarted: intended - commands,
            completed: c.accepted,
            refused: c.rejected,
            errors: c.errors,
            aborted: c.aborted,
            sessions: c.mailbox.logins,
            connections: c.connections,
            fetched: c.mailbox.retrieved,
            fetched_parts: c.mailbox.parts,
            appended: c.mailbox.appended,
            copied: c.mailbox.copied,
            expunged: c.mailbox.deleted,
            expunges_shared: c.mailbox.expunges_shared,
            moved: c.mailbox.moved,
            bytes: c.bytes,
            violations: c.mailbox.violations.total(),
            commands_per_sec: (c.accepted + c.rejected) as f64 / span,
            duration_s,
            active_s,
            p50_ms: ms(tot, 0.5),
            p99_ms: ms(tot, 0.99),
            lag_p99_ms: ms(total.hist(Metric::Lag), 0.99),
        }
    }
}

/// `mailbox profile`'s summary: actions of virtual users, and the capacity found. A
/// step's summary (in `extra.capacity.steps`) is the same, over the actions that fell due
/// in the step; the run's is over every step's, each action counted once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// Virtual users at the end (the last step's).
    pub users: u64,
    /// The largest user count whose step held (`None`: none did). For a ramp that never
    /// broke, a lower bound (`extra.capacity.capacity_at_least`).
    pub capacity_users: Option<u64>,
    /// Actions the users asked for (due before the run's end), each counted once:
    /// `completed + refused + errors + overdue`.
    pub actions: u64,
    /// The same, as thresholds' `%` base.
    pub sent: u64,
    /// Actions done.
    pub completed: u64,
    /// Actions the server refused (NO, BAD, -ERR, a refused delivery).
    pub refused: u64,
    /// Actions lost to a connection failure or a timeout.
    pub errors: u64,
    /// Actions that began more than 5 ms after they were due (the user's previous one
    /// still ran).
    pub late: u64,
    /// Actions never done: due before the run's end and, when it ended, still waiting or
    /// (after a 5 s grace) still running; in the `action` latency at the time they had
    /// waited when the run ended.
    #[serde(default)]
    pub overdue: u64,
    /// Actions the store had not begun when their step ended: waiting behind a login (or
    /// greeting) that had not completed, or behind the user's previous action.
    #[serde(default)]
    pub unstarted: u64,
    /// Users the store left waiting for half the step or more (at its end, an action of
    /// theirs due by its midpoint was not begun: a login not answered, or their previous
    /// action still running): users it did not carry. Over a run, the last step's.
    #[serde(default)]
    pub stuck_users: u64,
    /// Actions that finished, per minute.
    pub actions_per_min: f64,
    /// Mean response time of all actions, from their intended start to their end (for
    /// one never done, to the run's end), ms.
    pub mean_ms: f64,
    /// Its 95th percentile, ms.
    pub p95_ms: f64,
    /// Its 99th percentile, ms.
    pub p99_ms: f64,
    /// The store's CPU, % of a core (a step's; over a run, the last step's); absent when
    /// no store process was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sut_cpu: Option<f64>,
    /// Seconds.
    pub duration_s: f64,
}

impl ProfileSummary {
    /// The figures of what a step or run recorded (`all`: the metric of every action,
    /// whose histogram holds those never done too, counted `aborted`) over `duration_s`;
    /// the caller fills in what the recorder does not hold (users, capacity, the store's
    /// CPU, the actions not begun and the users left waiting).
    pub fn derive(total: &Recorder, all: Metric, duration_s: f64) -> Self {
        let c = &total.counters;
        let all = total.hist(all);
        ProfileSummary {
            users: 0,
            capacity_users: None,
            actions: c.sent,
            sent: c.sent,
            completed: c.accepted,
            refused: c.rejected,
            errors: c.errors,
            late: c.late_starts,
            overdue: c.aborted,
            unstarted: 0,
            stuck_users: 0,
            actions_per_min: c.sent.saturating_sub(c.aborted) as f64 / duration_s.max(1e-9) * 60.0,
            mean_ms: if all.is_empty() {
                0.0
            } else {
                all.mean() / 1000.0
            },
            p95_ms: ms(all, 0.95),
            p99_ms: ms(all, 0.99),
            sut_cpu: None,
            duration_s,
        }
    }
}

/// One command's summary.
// One per results document: the relay's being the largest costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Summary {
    /// `send`.
    Send(SendSummary),
    /// `sink`.
    Sink(SinkSummary),
    /// `relay`.
    Relay(RelaySummary),
    /// `mailbox pop3`.
    Pop3(Pop3Summary),
    /// `mailbox imap`.
    Imap(ImapSummary),
    /// `mailbox profile`.
    Profile(ProfileSummary),
    /// `dns`.
    Dns(super::dns::DnsSummary),
}

impl Summary {
    /// A number of the summary by its key (a yes/no reads as 1 or 0): what thresholds
    /// compare. `None` when the key is absent or not a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        let v = serde_json::to_value(self).ok()?;
        let v = v.get(key)?;
        v.as_f64().or_else(|| v.as_bool().map(f64::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_injection_is_derived_from_the_counters() {
        let c = Counters {
            sent: 90,
            accepted: 80,
            rejected: 6,
            errors: 4,
            aborted: 2,
            bytes: 8000,
            ..Counters::default()
        };
        let i = Injection::new(&c, 100, 10.0);
        assert_eq!((i.intended, i.unstarted, i.failed), (100, 10, 10));
        assert_eq!((i.msgs_per_sec, i.mpm), (8.0, 480.0));
        // Issue 25 item 13: bytes over the same span as messages, and the span named.
        assert_eq!((i.bytes_per_sec, i.rate_span_s), (800.0, 10.0));
        // Closed loop intends what it sent.
        assert_eq!(Injection::new(&c, 0, 10.0).unstarted, 0);
    }

    #[test]
    fn summaries_round_trip_and_name_their_numbers() {
        let s = Summary::Relay(RelaySummary {
            drained: true,
            lost: 3,
            ..RelaySummary::default()
        });
        assert_eq!(s.number("lost"), Some(3.0));
        assert_eq!(s.number("drained"), Some(1.0));
        assert_eq!(s.number("max_queue"), None, "null is not a number");
        assert_eq!(s.number("nope"), None);
        let v = serde_json::to_value(&s).expect("json");
        assert_eq!(crate::stats::kind::decode("relay", v), Ok(s));
        assert!(crate::stats::kind::decode("nope", serde_json::json!({})).is_err());
    }
}
