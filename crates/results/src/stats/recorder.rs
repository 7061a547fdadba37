//! `Recorder`: the counters and histograms of one shard of workers for one interval.
//! Recording is a handful of integer operations; merging adds everything exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::metric::Metric;
use crate::error::ErrorClass;

/// Significant figures kept by every latency histogram (0.1 % resolution).
pub const SIGFIG: u8 = 3;
/// Largest value recorded (one hour in µs); longer samples are clamped to it.
pub const MAX_US: u64 = 3_600_000_000;

/// Event counters. Every field is a plain count; all are summed on merge. The names are
/// a client's (a unit of work is an SMTP transaction); a server part says in its results
/// documentation what each means for it. Protocol-specific counts are the protocol's own
/// group (`rcpts` for SMTP), written beside the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Counters {
    /// Units started (messages attempted).
    pub sent: u64,
    /// Units the server accepted (final positive reply).
    pub accepted: u64,
    /// Units refused by a negative reply.
    pub rejected: u64,
    /// Units lost to a connection failure (timeout, disconnect, TLS, protocol).
    pub errors: u64,
    /// Units cut off by shutdown before their reply.
    pub aborted: u64,
    /// SMTP's recipients.
    #[serde(flatten)]
    pub rcpts: RcptCounters,
    /// A mailbox workload's messages (absent from the file when none were touched).
    #[serde(flatten, default, skip_serializing_if = "MailboxCounters::is_empty")]
    pub mailbox: MailboxCounters,
    /// Message octets of accepted messages.
    pub bytes: u64,
    /// Octets written to the network (commands and bodies).
    pub bytes_out: u64,
    /// Connections opened.
    pub connections: u64,
    /// Connections that used TLS.
    pub tls_connections: u64,
    /// Connection attempts that failed before a session was ready.
    pub connect_failures: u64,
    /// Sends that started more than 1 ms after their intended time.
    pub late_starts: u64,
}

/// SMTP's per-recipient counts (`rcpts_accepted`, `rcpts_refused`, `rcpts_delivered`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RcptCounters {
    /// Recipients accepted at RCPT.
    #[serde(rename = "rcpts_accepted")]
    pub accepted: u64,
    /// Recipients refused at RCPT (or, for LMTP, after the body).
    #[serde(rename = "rcpts_refused")]
    pub refused: u64,
    /// Recipients the message was accepted for.
    #[serde(rename = "rcpts_delivered")]
    pub delivered: u64,
}

/// A mailbox workload's counts (`retrieved`, `deleted`, and IMAP's `appended` and
/// state violations).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MailboxCounters {
    /// Messages downloaded (POP3 RETR or TOP, IMAP whole messages).
    #[serde(default)]
    pub retrieved: u64,
    /// Messages deleted (POP3: committed at QUIT; IMAP: expunged by EXPUNGE).
    #[serde(default)]
    pub deleted: u64,
    /// Messages appended (IMAP APPEND).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub appended: u64,
    /// IMAP: messages copied (COPY: each one more in the mailbox copied into).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copied: u64,
    /// IMAP: messages moved out of the selected mailbox (MOVE).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub moved: u64,
    /// IMAP: EXPUNGE commands answered while another session of the same user was open.
    /// Their replies may report that session's expunges too, so `deleted` is then an
    /// upper bound, not a count (RFC 3501 announces every expunge to every session).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expunges_shared: u64,
    /// IMAP: sections of messages downloaded that are not the whole message (a header,
    /// the text, a body part).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parts: u64,
    /// Logins the server accepted (POP3 and IMAP: what its log counts as logins).
    #[serde(default)]
    pub logins: u64,
    /// Sessions that failed to open (connect, greeting, login, IMAP's SELECT): each took
    /// the unit it was opened for with it, before that unit's command was sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_failures: u64,
    /// IMAP state violations, by kind.
    #[serde(default, skip_serializing_if = "ViolationCounts::is_empty")]
    pub violations: ViolationCounts,
    /// Sessions that connected and were refused at login (POP3 USER/PASS, APOP or AUTH;
    /// IMAP LOGIN or AUTHENTICATE): not connect failures, the server was there.
    #[serde(default)]
    pub login_failures: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// State violations by kind name (IMAP's state checks): a correct server shows none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ViolationCounts(pub std::collections::BTreeMap<String, u64>);

impl ViolationCounts {
    /// Counts one violation of the kind named `kind`.
    pub fn add(&mut self, kind: &str) {
        match self.0.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.0.insert(kind.to_string(), 1);
            }
        }
    }

    /// All violations.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// True when none were counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn merge(&mut self, o: &ViolationCounts) {
        for (k, n) in &o.0 {
            *self.0.entry(k.clone()).or_default() += n;
        }
    }
}

impl MailboxCounters {
    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == MailboxCounters::default()
    }
}

impl Counters {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Counters) {
        self.sent += o.sent;
        self.accepted += o.accepted;
        self.rejected += o.rejected;
        self.errors += o.errors;
        self.aborted += o.aborted;
        self.rcpts.accepted += o.rcpts.accepted;
        self.rcpts.refused += o.rcpts.refused;
        self.rcpts.delivered += o.rcpts.delivered;
        self.mailbox.retrieved += o.mailbox.retrieved;
        self.mailbox.deleted += o.mailbox.deleted;
        self.mailbox.appended += o.mailbox.appended;
        self.mailbox.copied += o.mailbox.copied;
        self.mailbox.moved += o.mailbox.moved;
        self.mailbox.expunges_shared += o.mailbox.expunges_shared;
        self.mailbox.parts += o.mailbox.parts;
        self.mailbox.logins += o.mailbox.logins;
        self.mailbox.setup_failures += o.mailbox.setup_failures;
        self.mailbox.violations.merge(&o.mailbox.violations);
        self.mailbox.login_failures += o.mailbox.login_failures;
        self.bytes += o.bytes;
        self.bytes_out += o.bytes_out;
        self.connections += o.connections;
        self.tls_connections += o.tls_connections;
        self.connect_failures += o.connect_failures;
        self.late_starts += o.late_starts;
    }
}

/// Key of the error table: what kind, where (a protocol step), and the reply code (0 when
/// none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ErrorKey {
    /// The class.
    pub class: ErrorClass,
    /// The step it happened in.
    pub step: Metric,
    /// The reply code, 0 when the failure had none.
    pub code: u16,
}

/// Counters, error table and one histogram per [`Metric`].
#[derive(Debug, Clone)]
pub struct Recorder {
    hists: Vec<Histogram<u64>>,
    /// The event counters.
    pub counters: Counters,
    /// Failures by class, step and code.
    pub errors: BTreeMap<ErrorKey, u64>,
    /// A few distinct reasons seen for each key of `errors` (replies or error messages),
    /// so that a report can say why, not only how often: one code often has several
    /// causes ("451 4.3.0 Temporary lookup failure" beside "451 4.7.1 greylisted").
    pub samples: BTreeMap<ErrorKey, ReplySamples>,
}

/// Distinct reply texts kept per error key: at most [`ReplySamples::KEEP`], found among
/// the first [`ReplySamples::LOOKS`] failures of the key, so that a flood of one failure
/// costs no allocation after those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplySamples {
    /// The distinct texts, first seen first.
    pub texts: Vec<String>,
    /// Failures looked at for a new text.
    looks: u32,
}

impl ReplySamples {
    /// Distinct texts kept per key.
    pub const KEEP: usize = 3;
    /// Failures looked at per key (per recorder) before sampling stops.
    pub const LOOKS: u32 = 64;

    /// Looks at one more failure's text while there is room and looks are left.
    fn offer(&mut self, why: impl FnOnce() -> String) {
        if self.texts.len() >= Self::KEEP || self.looks >= Self::LOOKS {
            return;
        }
        self.looks += 1;
        self.add(why());
    }

    /// Keeps `text` if it says something new and there is room: texts that differ only in
    /// the address they quote (`<user12@…>: Recipient address rejected`) are one reason.
    fn add(&mut self, text: String) {
        if self.texts.len() < Self::KEEP && !self.texts.iter().any(|t| same_reason(t, &text)) {
            self.texts.push(text);
        }
    }
}

/// Whether two reply texts differ only inside `<…>`.
fn same_reason(a: &str, b: &str) -> bool {
    fn outside(t: &str) -> impl Iterator<Item = char> + '_ {
        let mut depth = 0u32;
        t.chars().filter(move |c| match c {
            '<' => {
                depth += 1;
                false
            }
            '>' if depth > 0 => {
                depth -= 1;
                false
            }
            _ => depth == 0,
        })
    }
    outside(a).eq(outside(b))
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// A fresh auto-resizing histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    // Auto-resizing keeps memory proportional to the largest value seen.
    Histogram::new(SIGFIG).expect("3 significant figures is a valid histogram")
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder {
            hists: (0..Metric::COUNT).map(|_| new_histogram()).collect(),
            counters: Counters::default(),
            errors: BTreeMap::new(),
            samples: BTreeMap::new(),
        }
    }

    /// Records one latency sample.
    #[inline]
    pub fn record(&mut self, metric: Metric, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.record_us(metric, us);
    }

    /// Records one latency sample given in microseconds.
    #[inline]
    pub fn record_us(&mut self, metric: Metric, us: u64) {
        record_clamped(&mut self.hists[metric.index()], us, 1);
    }

    /// Counts one failure and offers `why` as a sample of its key (`why` is only called
    /// while the key samples, so a repeated failure soon costs no allocation).
    pub fn error(
        &mut self,
        class: ErrorClass,
        step: Metric,
        code: u16,
        why: impl FnOnce() -> String,
    ) {
        let key = ErrorKey { class, step, code };
        *self.errors.entry(key).or_insert(0) += 1;
        self.samples.entry(key).or_default().offer(why);
    }

    /// The histogram of a metric.
    pub fn hist(&self, metric: Metric) -> &Histogram<u64> {
        &self.hists[metric.index()]
    }

    /// Adds the samples of `h` to `metric`'s histogram (a results file's histograms,
    /// when `mailbench merge` rebuilds a run from them).
    pub fn add_samples(&mut self, metric: Metric, h: &Histogram<u64>) {
        add_hist(&mut self.hists[metric.index()], h);
    }

    /// Total failures in the error table.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds everything in `other` into `self`, exactly.
    pub fn merge(&mut self, other: &Recorder) {
        // Most metrics are never recorded in a run: adding an empty histogram still walks
        // all its counts.
        for (mine, theirs) in self.hists.iter_mut().zip(&other.hists) {
            if !theirs.is_empty() {
                add_hist(mine, theirs);
            }
        }
        self.counters.add(&other.counters);
        for (k, v) in &other.errors {
            *self.errors.entry(*k).or_insert(0) += v;
        }
        for (k, v) in &other.samples {
            let mine = self.samples.entry(*k).or_default();
            for t in &v.texts {
                mine.add(t.clone());
            }
        }
    }

    /// Empties the recorder, keeping its allocations.
    pub fn reset(&mut self) {
        // Resetting zeroes every count: a run records a few of the metrics, and clearing
        // all of them at each interval's drain was a tenth of a pipelined IMAP client's
        // instructions. One never written to since its last reset is left as it is.
        for h in self.hists.iter_mut().filter(|h| !untouched(h)) {
            h.reset();
        }
        self.counters = Counters::default();
        self.errors.clear();
        self.samples.clear();
    }
}

/// True when nothing was recorded in `h` since it was made or reset (not even a value
/// with a count of 0, which still moves its minimum and maximum).
fn untouched(h: &Histogram<u64>) -> bool {
    h.is_empty() && h.max() == 0 && h.min_nz() == u64::MAX
}

/// Records `n` samples of `us`, clamped to [`MAX_US`]. (`saturating_record` would clamp to
/// the *current* top of an auto-resizing histogram instead of growing it.)
#[inline]
pub fn record_clamped(h: &mut Histogram<u64>, us: u64, n: u64) {
    // Below MAX_US an auto-resizing histogram always has room.
    let _ = h.record_n(us.min(MAX_US), n);
}

/// Adds `src` into `dst` bucket by bucket; exact. Histograms of the same layout add their
/// count arrays directly: walking every recorded value was 4 % of a pipelined IMAP
/// client's CPU, at one merge per interval.
pub fn add_hist(dst: &mut Histogram<u64>, src: &Histogram<u64>) {
    if dst.add(src).is_ok() {
        return;
    }
    for v in src.iter_recorded() {
        record_clamped(dst, v.value_iterated_to(), v.count_at_value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_histograms_and_errors_exactly() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        a.record(Metric::Total, Duration::from_micros(100));
        b.record(Metric::Total, Duration::from_micros(300));
        b.record(Metric::Total, Duration::from_secs(2));
        a.counters.sent = 1;
        b.counters.sent = 2;
        a.error(ErrorClass::Timeout, Metric::Step(6), 0, || "first".into());
        b.error(ErrorClass::Timeout, Metric::Step(6), 0, || "second".into());
        b.error(ErrorClass::Rejected5xx, Metric::Step(5), 550, || {
            "550 no".into()
        });
        a.merge(&b);
        assert_eq!(a.hist(Metric::Total).len(), 3);
        assert_eq!(a.hist(Metric::Total).min(), 100);
        assert!(a.hist(Metric::Total).max() >= 2_000_000);
        assert_eq!(a.counters.sent, 3);
        assert_eq!(a.error_count(), 3);
        let sample = |k: ErrorKey| a.samples.get(&k).map(|s| s.texts.clone());
        let timeout = ErrorKey {
            class: ErrorClass::Timeout,
            step: Metric::Step(6),
            code: 0,
        };
        assert_eq!(
            sample(timeout),
            Some(vec!["first".to_string(), "second".to_string()]),
            "distinct reasons are kept, first seen first"
        );
        a.reset();
        assert_eq!(a.hist(Metric::Total).len(), 0);
        assert_eq!(
            a.hist(Metric::Total).max(),
            0,
            "a reset forgets the maximum"
        );
        assert!(a.samples.is_empty());
        assert_eq!(a.counters, Counters::default());
    }

    #[test]
    fn only_untouched_histograms_are_skipped_by_reset() {
        let mut h = Histogram::<u64>::new(3).expect("histogram");
        assert!(untouched(&h));
        // A value recorded with a count of 0 still moves the extremes: not untouched.
        let _ = h.record_n(500, 0);
        assert!(!untouched(&h));
        h.reset();
        assert!(untouched(&h));
    }

    #[test]
    fn a_few_distinct_reply_texts_are_kept_and_sampling_stops() {
        let mut r = Recorder::new();
        let key = ErrorKey {
            class: ErrorClass::Rejected4xx,
            step: Metric::Step(5),
            code: 451,
        };
        let mut calls = 0;
        for i in 0..1000 {
            let text = if i % 2 == 0 {
                "451 4.3.0 Temporary lookup failure"
            } else {
                "451 4.7.1 greylisted"
            };
            r.error(key.class, key.step, key.code, || {
                calls += 1;
                text.to_string()
            });
        }
        r.error(key.class, key.step, key.code, || {
            "451 never looked at".into()
        });
        assert_eq!(r.errors[&key], 1001);
        assert_eq!(
            r.samples[&key].texts,
            ["451 4.3.0 Temporary lookup failure", "451 4.7.1 greylisted"],
            "both causes of one code are kept"
        );
        assert_eq!(
            calls,
            ReplySamples::LOOKS,
            "texts are made only while sampling"
        );
        for i in 0..10 {
            r.error(ErrorClass::Timeout, Metric::Step(6), 0, || format!("t{i}"));
        }
        let timeouts = ErrorKey {
            class: ErrorClass::Timeout,
            step: Metric::Step(6),
            code: 0,
        };
        assert_eq!(
            r.samples[&timeouts].texts,
            ["t0", "t1", "t2"],
            "at most three"
        );
        let rcpt = ErrorKey {
            class: ErrorClass::Rejected5xx,
            step: Metric::Step(5),
            code: 550,
        };
        for user in ["a", "b", "c"] {
            r.error(rcpt.class, rcpt.step, rcpt.code, || {
                format!("550 5.1.1 <{user}@example.com>: Recipient address rejected")
            });
        }
        r.error(rcpt.class, rcpt.step, rcpt.code, || {
            "550 5.2.2 <d@x>: mailbox full".into()
        });
        assert_eq!(
            r.samples[&rcpt].texts,
            [
                "550 5.1.1 <a@example.com>: Recipient address rejected",
                "550 5.2.2 <d@x>: mailbox full"
            ],
            "the quoted address does not make a new reason"
        );
    }
}
