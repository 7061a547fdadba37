//! Issue 42's faults during a relay run (`--fault KIND@WHEN`): after a count of accepted
//! messages or at a time, the lab MTA is crashed (SIGKILL of its whole tree; with
//! `power-loss`, its LazyFS queue then drops every write not fsynced), restarted on the
//! same configuration and queue, and injection and the drain go on; or, with `disk-full`,
//! its queue's file system (a small loop-mounted ext4) is filled by a ballast file for a
//! hold time, then freed. Afterwards every accepted message is judged by the sink's
//! correlation: delivered, lost (accepted and never delivered), duplicated (delivered
//! more than once); with the errors the cut connections caused, the 4xx replies the full
//! disk drew, and the times from the recovery (the restart, or the space freed) to the
//! first delivery and to the last.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::lab::{Crashable, Crashed, QueueFilled};
use crate::load::outage::{EndOnDrop, Outage};
use crate::shutdown::Shutdown;
use crate::sink::delivery::Delivery;
use crate::stats::Results;
use crate::stats::summary::Summary;
use crate::stats::timelog::TimeLog;

/// What is done to the MTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL of the MTA's process tree; the page cache survives.
    Crash,
    /// The crash, then the queue's unsynced writes dropped (LazyFS): a power cut.
    PowerLoss,
    /// The queue's file system filled (all but [`DISK_FULL_LEAVES`] bytes) for `hold`,
    /// then freed; the MTA keeps running.
    DiskFull {
        /// How long the disk stays full.
        hold: Duration,
    },
}

/// What a full disk leaves free: 1 MiB, below Postfix's smtpd's floor (1.5 ×
/// `message_size_limit`, 15 MB by default: MAIL FROM answered `452 4.3.1 Insufficient
/// system storage`) yet room for the messages already past MAIL FROM, so that the
/// refusals are the MTA's own policy and not write errors.
pub const DISK_FULL_LEAVES: u64 = 1 << 20;

/// When it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultWhen {
    /// Once the MTA has accepted this many messages (250 read by the generator).
    Accepted(u64),
    /// This long after injection started.
    After(Duration),
}

/// One fault of a run, as `--fault` gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// What.
    pub kind: FaultKind,
    /// When.
    pub when: FaultWhen,
}

impl FaultPlan {
    /// The fault as `--fault` spells it (`crash@150`, `power-loss@3s`, `disk-full@150`).
    pub fn label(&self) -> String {
        let kind = match self.kind {
            FaultKind::Crash => "crash",
            FaultKind::PowerLoss => "power-loss",
            FaultKind::DiskFull { .. } => "disk-full",
        };
        match self.when {
            FaultWhen::Accepted(n) => format!("{kind}@{n}"),
            FaultWhen::After(d) => format!("{kind}@{}s", d.as_secs_f64()),
        }
    }
}

/// What happened when the fault fired, on the wall clock (µs).
pub(crate) struct Fired {
    /// When the server was killed (or its disk began to fill).
    pub(crate) at_us: u64,
    /// Messages accepted by then.
    pub(crate) accepted_before: u64,
    /// What the crash did (nothing with `disk-full`).
    pub(crate) crashed: Crashed,
    /// With `disk-full`: how full the disk was made.
    pub(crate) filled: Option<QueueFilled>,
    /// When the server greeted again (with `disk-full`: when the space was freed).
    pub(crate) restarted_us: u64,
}

/// A fault waiting for its moment during injection.
pub(crate) struct Armed {
    plan: FaultPlan,
    injection_over: OverOnDrop,
    task: tokio::task::JoinHandle<Result<Option<Fired>, String>>,
}

/// The end of injection, told to the fault when [`Armed::finish`] is called or the armed
/// fault is dropped (a run that failed): a thread waiting for a count then gives up.
struct OverOnDrop(Arc<AtomicBool>);

impl Drop for OverOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How often the trigger looks at the clock (a fault at a time), and how often a wait for
/// a count looks whether injection has ended.
const POLL: Duration = Duration::from_millis(2);

/// Arms `plan` against `lab` (a lab MTA, or a lab store in `mailbox populate`): it fires
/// when `accepts` holds its count, or its time after `origin` has passed. `outage`, where
/// given, is begun just before a crash and ended once the restarted server greets (or
/// the fault task ends otherwise).
pub(crate) fn arm<L: Crashable + ?Sized + 'static>(
    plan: FaultPlan,
    lab: Arc<L>,
    accepts: Arc<TimeLog>,
    origin: Instant,
    shutdown: Shutdown,
    outage: Option<Arc<Outage>>,
) -> Armed {
    let injection_over = Arc::new(AtomicBool::new(false));
    let over = injection_over.clone();
    let task = tokio::spawn(async move {
        let power = plan.kind == FaultKind::PowerLoss;
        let _ends = outage.clone().map(EndOnDrop);
        let struck = match (plan.when, plan.kind) {
            // A crash after a count is struck by a thread the count's own message wakes,
            // the kill following it at once. Polled every 2 ms by a task of the runtime,
            // crash@100 fired at 148 to 182 accepted on a fast closed loop (qmail), the
            // runtime's workers busy with 64 connections.
            (FaultWhen::Accepted(n), FaultKind::Crash | FaultKind::PowerLoss) => {
                let (lab, over, outage) = (lab.clone(), over.clone(), outage.clone());
                tokio::task::spawn_blocking(move || {
                    let Some(before) = wait_for_count(&accepts, n, &over) else {
                        return Ok(None);
                    };
                    strike(&*lab, power, before, outage.as_deref()).map(Some)
                })
                .await
                .map_err(|e| format!("the crash failed: {e}"))??
            }
            _ => {
                loop {
                    let due = match plan.when {
                        FaultWhen::Accepted(n) => accepts.len() as u64 >= n,
                        FaultWhen::After(d) => origin.elapsed() >= d,
                    };
                    if due {
                        break;
                    }
                    // A count not reached by the end of injection is never reached; a
                    // time is still waited for (the drain goes on meanwhile).
                    if over.load(Ordering::Relaxed) && matches!(plan.when, FaultWhen::Accepted(_)) {
                        return Ok(None);
                    }
                    tokio::time::sleep(POLL).await;
                }
                let accepted_before = accepts.len() as u64;
                if let FaultKind::DiskFull { hold } = plan.kind {
                    let at_us = crate::stats::clock::unix_us();
                    let filled = disk_full(lab, hold, &shutdown).await?;
                    return Ok(Some(Fired {
                        at_us,
                        accepted_before,
                        crashed: Crashed::default(),
                        filled: Some(filled),
                        restarted_us: crate::stats::clock::unix_us(),
                    }));
                }
                let (lab, outage) = (lab.clone(), outage.clone());
                tokio::task::spawn_blocking(move || {
                    strike(&*lab, power, accepted_before, outage.as_deref()).map(Some)
                })
                .await
                .map_err(|e| format!("the crash failed: {e}"))??
            }
        };
        let Some((at_us, accepted_before, crashed)) = struck else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || lab.restart())
            .await
            .map_err(|e| format!("the restart failed: {e}"))??;
        Ok(Some(Fired {
            at_us,
            accepted_before,
            crashed,
            filled: None,
            restarted_us: crate::stats::clock::unix_us(),
        }))
    });
    Armed {
        plan,
        injection_over: OverOnDrop(injection_over),
        task,
    }
}

/// Waits until `accepts` holds `n` messages, or injection is `over` first (`None`); the
/// count when it was reached.
fn wait_for_count(accepts: &TimeLog, n: u64, over: &AtomicBool) -> Option<u64> {
    loop {
        let got = accepts.wait_len(n, Duration::from_millis(50));
        if got >= n {
            return Some(got);
        }
        if over.load(Ordering::Relaxed) {
            return None;
        }
    }
}

/// The crash itself: the outage begun, then the server killed (and with `power`, its
/// queue's unsynced writes dropped); when it was struck, the messages accepted before,
/// and what the crash did.
fn strike<L: Crashable + ?Sized>(
    lab: &L,
    power: bool,
    accepted_before: u64,
    outage: Option<&Outage>,
) -> Result<(u64, u64, Crashed), String> {
    let at_us = crate::stats::clock::unix_us();
    if let Some(o) = outage {
        o.begin();
    }
    let crashed = lab.crash(power)?;
    Ok((at_us, accepted_before, crashed))
}

/// The `disk-full` fault: fills the lab's queue file system, holds it full for `hold`
/// (cut short by Ctrl-C or SIGTERM, so that a stop does not wait out the hold), and frees
/// it — freed even when the hold was cut short, so that the drain can go on.
async fn disk_full<L: Crashable + ?Sized + 'static>(
    lab: Arc<L>,
    hold: Duration,
    shutdown: &Shutdown,
) -> Result<QueueFilled, String> {
    let l = lab.clone();
    let filled = tokio::task::spawn_blocking(move || l.fill_queue(DISK_FULL_LEAVES))
        .await
        .map_err(|e| format!("filling the queue failed: {e}"))?;
    let end = Instant::now() + hold;
    while filled.is_ok() && Instant::now() < end && !shutdown.interrupted() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let freed = tokio::task::spawn_blocking(move || lab.free_queue())
        .await
        .map_err(|e| format!("freeing the queue failed: {e}"))?;
    let filled = filled?;
    freed?;
    Ok(filled)
}

impl Armed {
    /// Called when injection has ended: waits for the fault to have fired (and the MTA to
    /// be up again), or learns it never will; a crash or restart that failed fails the run
    /// (the error is one line naming the fault).
    pub(crate) async fn finish(self) -> Result<(FaultPlan, Option<Fired>), String> {
        self.injection_over.0.store(true, Ordering::Relaxed);
        let fired = self
            .task
            .await
            .map_err(|e| format!("--fault: {e}"))?
            .map_err(|e| format!("--fault {}: {e}", self.plan.label()))?;
        Ok((self.plan, fired))
    }
}

/// Puts the fault's outcome in the results: the summary's `fault_*` fields, and
/// `extra.fault` with the lost, damaged and duplicated messages by sequence number (with the run's
/// trace id, to look each one up in the MTA's log). `made_up`: the messages a closed
/// loop made up for those cut or refused while the MTA was down (`None`: no outage).
pub(super) fn record(
    results: &mut Results,
    plan: FaultPlan,
    fired: Option<Fired>,
    delivery: &Delivery,
    accepts: &TimeLog,
    origin_us: u64,
    made_up: Option<u64>,
) {
    let run = results.run_id.clone();
    let lost_seqs = results.extra.get("lost_seqs").cloned().unwrap_or_default();
    let damaged_seqs = results
        .extra
        .get("damaged_seqs")
        .cloned()
        .unwrap_or_default();
    let Summary::Relay(s) = &mut results.summary else {
        return;
    };
    s.fault = Some(plan.label());
    let Some(f) = fired else {
        results.self_report.warnings.push(format!(
            "--fault {}: the fault never fired (the MTA accepted {} messages in all)",
            plan.label(),
            s.injection.accepted
        ));
        results.extra.insert(
            "fault".into(),
            serde_json::json!({"fault": plan.label(), "fired": false}),
        );
        return;
    };
    let dups = delivery
        .duplicated
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut by_seq = std::collections::BTreeMap::<u64, u64>::new();
    for (seq, _) in &dups {
        *by_seq.entry(*seq).or_insert(0) += 1;
    }
    // Deliveries after the restart: first arrivals and later copies alike.
    let after: Vec<u64> = delivery
        .arrivals
        .entries()
        .into_iter()
        .map(|(_, t)| t)
        .chain(dups.iter().map(|(_, t)| *t))
        .filter(|t| *t >= f.restarted_us)
        .collect();
    let secs = |us: u64| us as f64 / 1e6;
    s.fault_at_s = Some(secs(f.at_us.saturating_sub(origin_us)));
    s.fault_accepted_before = Some(f.accepted_before);
    s.fault_down_s = Some(secs(f.restarted_us.saturating_sub(f.at_us)));
    s.fault_duplicated_messages = Some(by_seq.len() as u64);
    s.restart_first_delivery_s = after
        .iter()
        .min()
        .map(|t| secs(t.saturating_sub(f.restarted_us)));
    s.restart_last_delivery_s = after
        .iter()
        .max()
        .map(|t| secs(t.saturating_sub(f.restarted_us)));
    s.fault_unsynced_files = f.crashed.unsynced_files.as_ref().map(|v| v.len() as u64);
    s.fault_made_up = made_up;
    // The full disk's refusals: every 4xx reply of the run (none come before the disk
    // fills or after it is freed), as the generator tallied them with their texts.
    let refusals: Vec<&crate::stats::results::ErrorRow> = results
        .errors
        .iter()
        .filter(|e| f.filled.is_some() && (400..500).contains(&e.code))
        .collect();
    if f.filled.is_some() {
        s.fault_refused_4xx = Some(refusals.iter().map(|e| e.count).sum());
    }
    let refusals: Vec<serde_json::Value> = refusals
        .iter()
        .map(|e| serde_json::json!({"code": e.code, "phase": e.phase, "count": e.count, "sample": e.sample}))
        .collect();
    results.extra.insert(
        "fault".into(),
        serde_json::json!({
            "fault": plan.label(),
            "fired": true,
            "trace_run": run,
            "at_s": s.fault_at_s,
            "accepted_before": f.accepted_before,
            "killed_processes": f.crashed.killed,
            "down_s": s.fault_down_s,
            "unsynced_files": f.crashed.unsynced_files,
            "unsynced_bytes": f.crashed.unsynced_bytes,
            "accepted_seqs": ranges(accepts),
            "lost_seqs": lost_seqs,
            "damaged_seqs": damaged_seqs,
            "duplicated_seqs": by_seq.iter().map(|(q, n)| [*q, *n]).collect::<Vec<_>>(),
            "errors": s.injection.errors,
            "rejected": s.injection.rejected,
            "queue_fs_bytes": f.filled.map(|d| d.size),
            "ballast_bytes": f.filled.map(|d| d.ballast),
            "free_bytes_left": f.filled.map(|d| d.free),
            "refusals_4xx": f.filled.map(|_| refusals),
        }),
    );
}

/// The accepted sequence numbers as `[first, last]` ranges, in order: a run's accepted
/// messages in a few pairs (gaps only where the fault refused or cut some), so that each
/// can be looked up in the MTA's log by its Message-ID (`<RUN.SEQ@mailbench.test>`).
pub(crate) fn ranges(accepts: &TimeLog) -> Vec<[u64; 2]> {
    let mut seqs: Vec<u64> = accepts.entries().into_iter().map(|(s, _)| s).collect();
    seqs.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for s in seqs {
        match out.last_mut() {
            Some(r) if r[1] + 1 == s => r[1] = s,
            _ => out.push([s, s]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_numbers_are_kept_as_ranges() {
        let log = TimeLog::default();
        for s in [0, 1, 2, 5, 7, 8] {
            log.record_at(s, 1);
        }
        assert_eq!(ranges(&log), vec![[0, 2], [5, 5], [7, 8]]);
        assert_eq!(ranges(&TimeLog::default()), Vec::<[u64; 2]>::new());
    }
}
