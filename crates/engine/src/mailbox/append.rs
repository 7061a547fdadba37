//! Filling mailboxes over IMAP APPEND instead of LMTP: each user logs in once, gets its
//! folders created, and appends its messages round-robin over them, each with flags drawn
//! by share (`\Seen` on half of them, say) — what LMTP cannot set. Slower than LMTP, and
//! the way a client (or a migration) fills a store; every append is timed.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use crate::error::ErrorClass;
use crate::imap::conn::{ConnError, ImapConn, Login};
use crate::imap::proto::{Command, Cond, Phase};
use crate::imap::steps::{STEPS, metric};
use crate::lab::StoreUser;
use crate::message::trace::Trace;
use crate::shutdown::Shutdown;
use crate::stats::results::{RunParts, SelfReport};
use crate::stats::summary::{ImapSummary, Summary};
use crate::stats::{Recorder, Results};
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;

/// Flags every appended message may get, each on a share of the messages.
pub const FLAGGABLE: [&str; 4] = ["\\Seen", "\\Flagged", "\\Answered", "\\Draft"];

/// A validated APPEND fill.
#[derive(Clone)]
pub struct AppendPlan {
    /// The IMAP server (the lab's is filled in).
    pub imap: Option<Target>,
    /// The users (the lab's are filled in).
    pub users: Vec<StoreUser>,
    /// Messages per user.
    pub per_user: u64,
    /// Folders per user, INBOX included (the others are `f2`, `f3`, ...).
    pub folders: u32,
    /// Message sizes, smallest to largest (inclusive).
    pub size: (usize, usize),
    /// Each flag with the share of the messages that get it, 0–1.
    pub flags: Vec<(&'static str, f64)>,
    /// Users filled at once.
    pub concurrency: usize,
    /// Connect and response limits.
    pub connect: ConnectOptions,
    /// The configuration as recorded in the results file.
    pub config_json: serde_json::Value,
    /// Where each message the store answered `OK` is recorded by its trace sequence
    /// number (what `--fault` triggers on and judges by).
    pub accept_log: Option<Arc<crate::stats::timelog::TimeLog>>,
}

/// Parses `--flags '\Seen=50,\Flagged=10'` (percent of the messages per flag).
pub fn parse_flags(spec: &str) -> Result<Vec<(&'static str, f64)>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, share) = part
            .split_once('=')
            .ok_or_else(|| format!("--flags: {part:?} is not FLAG=PERCENT (e.g. '\\Seen=50')"))?;
        let flag = FLAGGABLE
            .iter()
            .find(|f| f.eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| format!("--flags: {name:?} is not one of {}", FLAGGABLE.join(", ")))?;
        let pct =
            crate::units::percent(share.trim()).map_err(|e| format!("--flags {name}: {e}"))?;
        out.push((*flag, pct / 100.0));
    }
    Ok(out)
}

/// Fills every user's mailboxes; the results are an IMAP run's (`appended`, the `append`
/// latency row).
pub async fn fill(plan: AppendPlan, shutdown: Shutdown) -> Result<Results, String> {
    let imap = plan.imap.clone().ok_or("no IMAP server to append to")?;
    if plan.users.is_empty() {
        return Err("no mailbox users to fill".into());
    }
    let started_us = crate::stats::clock::unix_us();
    // One id for the run, in every appended message's trace header and in the results.
    let run_id = crate::run::new_run_id();
    let start = Instant::now();
    let cpu0 = crate::stats::cpu::CpuTimes::of_self();
    let rec = Arc::new(Mutex::new(Recorder::new()));
    let plan = Arc::new(plan);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..plan.concurrency.max(1) {
        let (plan, imap, rec, next, stop) = (
            plan.clone(),
            imap.clone(),
            rec.clone(),
            next.clone(),
            shutdown.stop.clone(),
        );
        workers.spawn(async move {
            let mut rng = fastrand::Rng::with_seed(started_us ^ w as u64);
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= plan.users.len() || stop.is_cancelled() {
                    break;
                }
                let mut mine = Recorder::new();
                if let Err(e) = user(&plan, &imap, i, run_id, &mut mine, &mut rng).await {
                    if e.unreachable() && i == 0 {
                        return Err(e.to_string());
                    }
                    mine.counters.errors += 1;
                    mine.error(e.class(), metric(e.phase()), 0, || e.to_string());
                }
                rec.lock().unwrap_or_else(|p| p.into_inner()).merge(&mine);
            }
            Ok(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        if let Ok(Err(unreachable)) = joined {
            workers.abort_all();
            return Err(unreachable);
        }
    }
    let total = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
    let secs = start.elapsed().as_secs_f64();
    let cpu = crate::stats::cpu::CpuTimes::of_self().since(&cpu0);
    let mut config = plan.config_json.clone();
    config["target"] = imap.to_string().into();
    config["users"] = plan.users.len().into();
    let summary = ImapSummary::derive(&total, total.counters.sent, secs, secs);
    let mut r = Results::assemble(RunParts {
        command: crate::stats::kind::imap::POPULATE_IMAP.name,
        run_id,
        started_us,
        duration_s: secs,
        config,
        summary: Summary::Imap(summary),
        steps: STEPS,
        self_report: SelfReport::new(
            cpu,
            secs,
            cpu.total().as_secs_f64() / secs * 100.0,
            Vec::new(),
        ),
        total,
        series: Vec::new(),
    });
    r.interrupted = shutdown.interrupted();
    Ok(r)
}

impl ConnError {
    /// True when the server could not be reached at all.
    fn unreachable(&self) -> bool {
        matches!(self, ConnError::Link(l) if l.unreachable("").is_some())
    }
}

/// Fills user `i`: log in, create the folders, append, log out.
async fn user(
    plan: &AppendPlan,
    imap: &Target,
    i: usize,
    run_id: u64,
    rec: &mut Recorder,
    rng: &mut fastrand::Rng,
) -> Result<(), ConnError> {
    let u = &plan.users[i];
    let login = Login::Login {
        user: u.address.clone(),
        pass: u.password.clone(),
    };
    let mut conn = ImapConn::open(imap, &plan.connect, false, &login).await?;
    rec.counters.connections += 1;
    rec.counters.mailbox.logins += std::mem::take(&mut conn.logins);
    for f in 2..=plan.folders {
        // An existing folder is fine (a store filled before).
        conn.run(&Command::Create(format!("f{f}"))).await?;
    }
    let literal_plus = conn.offers("LITERAL+");
    for n in 0..plan.per_user {
        let folder = match (n % u64::from(plan.folders.max(1))) as u32 + 1 {
            1 => "INBOX".to_string(),
            f => format!("f{f}"),
        };
        let flags: Vec<&str> = plan
            .flags
            .iter()
            .filter(|(_, share)| rng.f64() < *share)
            .map(|(f, _)| *f)
            .collect();
        let size = rng.usize(plan.size.0..=plan.size.1);
        let seq = (i as u64) << 32 | n;
        let message = generate(&u.address, run_id, seq, size);
        let octets = message.len() as u64;
        let cmd = Command::Append {
            mailbox: folder,
            flags: intern(&flags),
            message,
            literal_plus,
        };
        let began = Instant::now();
        let r = conn.run(&cmd).await?;
        rec.record(crate::stats::Metric::Total, began.elapsed());
        for (p, d) in conn.timings.drain(..) {
            rec.record(metric(p), d);
        }
        rec.counters.sent += 1;
        if r.done.cond == Cond::Ok {
            rec.counters.accepted += 1;
            rec.counters.mailbox.appended += 1;
            rec.counters.bytes += octets;
            if let Some(log) = &plan.accept_log {
                log.record(seq);
            }
        } else {
            rec.counters.rejected += 1;
            rec.error(ErrorClass::Rejected, metric(Phase::Append), 0, || r.said());
        }
    }
    for (p, d) in conn.timings.drain(..) {
        rec.record(metric(p), d);
    }
    conn.logout().await;
    Ok(())
}

/// The flag list as APPEND writes it, from the few combinations there are.
fn intern(flags: &[&str]) -> &'static str {
    // Every subset of FLAGGABLE, space-separated, in FLAGGABLE's order.
    const ALL: [&str; 16] = [
        "",
        "\\Seen",
        "\\Flagged",
        "\\Seen \\Flagged",
        "\\Answered",
        "\\Seen \\Answered",
        "\\Flagged \\Answered",
        "\\Seen \\Flagged \\Answered",
        "\\Draft",
        "\\Seen \\Draft",
        "\\Flagged \\Draft",
        "\\Seen \\Flagged \\Draft",
        "\\Answered \\Draft",
        "\\Seen \\Answered \\Draft",
        "\\Flagged \\Answered \\Draft",
        "\\Seen \\Flagged \\Answered \\Draft",
    ];
    let bits = FLAGGABLE
        .iter()
        .enumerate()
        .filter(|(_, f)| flags.contains(f))
        .fold(0, |b, (i, _)| b | 1 << i);
    ALL[bits]
}

/// A message of exactly `size` octets to `to` (its headers alone when they are longer),
/// with a unique Message-ID and run `run`'s trace header.
fn generate(to: &str, run: u64, seq: u64, size: usize) -> Bytes {
    use std::fmt::Write as _;
    let mut m = String::with_capacity(size + 300);
    let _ = write!(
        m,
        "From: filler@mailbench.test\r\nTo: {to}\r\nSubject: mailbench fill {seq}\r\n\
         Message-ID: <{run:016x}.{seq:x}@mailbench.test>\r\n",
    );
    Trace {
        run,
        seq,
        sent_us: crate::stats::clock::unix_us(),
    }
    .write(&mut m);
    m.push_str("\r\n");
    let mut m = m.into_bytes();
    pad(&mut m, size);
    Bytes::from(m)
}

/// Fills `m` with text lines up to exactly `size` octets, every line ending in CRLF: what
/// a server stores from an APPEND literal, and reports as RFC822.SIZE, is then `size`
/// (nothing is added when `m` is already that long).
pub(super) fn pad(m: &mut Vec<u8>, size: usize) {
    const TEXT: &[u8] = b"Filler text of a message written by mailbench to reach its size.";
    const LINE: usize = TEXT.len() + 2;
    while m.len() < size {
        let left = size - m.len();
        if left == 1 {
            // Only when a single octet was asked for after the headers: it cannot be a line.
            m.push(b'.');
            break;
        }
        // A full line, unless it would leave a single octet behind (too short for a CRLF).
        let mut line = left.min(LINE);
        if left - line == 1 {
            line -= 1;
        }
        m.extend_from_slice(&TEXT[..line - 2]);
        m.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_shares_and_intern_in_order() {
        let f = parse_flags("\\Seen=50, \\flagged=10%").expect("valid");
        assert_eq!(f, [("\\Seen", 0.5), ("\\Flagged", 0.1)]);
        assert!(
            parse_flags("\\Deleted=5")
                .unwrap_err()
                .contains("not one of")
        );
        assert!(parse_flags("\\Seen").unwrap_err().contains("FLAG=PERCENT"));
        assert_eq!(intern(&["\\Flagged", "\\Seen"]), "\\Seen \\Flagged");
        assert_eq!(intern(&[]), "");
        assert_eq!(intern(&FLAGGABLE), "\\Seen \\Flagged \\Answered \\Draft");
    }

    #[test]
    fn messages_have_the_size_asked_and_a_trace() {
        for size in [4000, 5120, 0, 300, 301, 302, 367, 368, 369] {
            let m = generate("u@x", 0xabc, 7, size);
            let want = size.max(generate("u@x", 0xabc, 7, 0).len());
            assert_eq!(m.len(), want, "size {size}");
            assert!(
                !m.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'),
                "CRLF only"
            );
        }
        let m = generate("u@x", 0xabc, 7, 4000);
        assert_eq!(Trace::find(&m).map(|t| (t.run, t.seq)), Some((0xabc, 7)));
    }

    #[test]
    fn padding_ends_every_line_in_crlf_at_every_length() {
        for size in 0..300 {
            let mut m = b"H: v\r\n\r\n".to_vec();
            pad(&mut m, size);
            assert_eq!(m.len(), size.max(8), "size {size}");
            if size > 9 {
                assert!(
                    m.ends_with(b"\r\n"),
                    "size {size}: {:?}",
                    String::from_utf8_lossy(&m)
                );
                assert!(
                    !m.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'),
                    "size {size}"
                );
                assert!(
                    !m.windows(2).any(|w| w[0] == b'\r' && w[1] != b'\n'),
                    "size {size}"
                );
            }
        }
    }
}
