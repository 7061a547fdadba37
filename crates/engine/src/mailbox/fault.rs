//! Issue 42's faults for a lab store (`mailbox populate --fault KIND@N`): while the
//! mailboxes fill (over LMTP or IMAP APPEND), the store is crashed after N accepted
//! messages (SIGKILL of its whole tree; with `power-loss`, its LazyFS mail then drops every
//! write not fsynced) and restarted on the same mail by relay's fault machinery
//! ([`crate::relay::fault`]); once the fill is over, every mailbox is read over IMAP and
//! every message the store answered `250`/`OK` is judged: there exactly once, lost
//! (accepted and missing), or duplicated. Lost messages are listed by Message-ID.

use std::collections::BTreeMap;

use crate::imap::conn::{ImapConn, Login};
use crate::imap::proto::{Command, Cond, Data, FetchItems, Section};
use crate::lab::StoreUser;
use crate::message::trace::{HEADER_NAME, Trace};
use crate::relay::fault::{FaultPlan, Fired};
use crate::stats::Results;
use crate::stats::timelog::TimeLog;
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;

/// What the mailboxes held after recovery, as read over IMAP.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Census {
    /// Copies of each of the run's messages found, by trace sequence number.
    pub copies: BTreeMap<u64, u64>,
    /// Messages found whose trace header cannot be read (e.g. a message file a power cut
    /// left empty): there, but not any accepted message intact.
    pub unreadable: u64,
    /// Messages found in all.
    pub messages: u64,
    /// How long reading them all took, seconds: how long after the restart the store
    /// took to serve every mailbox again (a lock left behind stalls a mailbox).
    pub took_s: f64,
}

/// Reads every user's INBOX and folders `f2` … `fN` over IMAP and counts the copies of
/// run `run`'s messages by their trace header. A folder that does not exist holds nothing.
/// A message the store cannot read back (Dovecot disconnects at the FETCH of a maildir file
/// a power cut left empty) is counted unreadable, and the mailbox read one message at a
/// time, on a new connection after each such one.
pub async fn census(
    imap: &Target,
    users: &[StoreUser],
    folders: u32,
    run: u64,
    connect: &ConnectOptions,
) -> Result<Census, String> {
    let mut c = Census::default();
    let began = std::time::Instant::now();
    for u in users {
        for f in 1..=folders.max(1) {
            let mailbox = match f {
                1 => "INBOX".to_string(),
                f => format!("f{f}"),
            };
            let reader = Reader {
                imap,
                user: u,
                mailbox: &mailbox,
                connect,
            };
            reader
                .read(run, &mut c)
                .await
                .map_err(|e| format!("reading {mailbox} of {}: {e}", u.address))?;
        }
    }
    c.took_s = began.elapsed().as_secs_f64();
    Ok(c)
}

/// One mailbox to read after a fault.
struct Reader<'a> {
    imap: &'a Target,
    user: &'a StoreUser,
    mailbox: &'a str,
    connect: &'a ConnectOptions,
}

impl Reader<'_> {
    /// A connection with the mailbox selected read-only, and its message count; `None`
    /// when the mailbox does not exist.
    async fn open(&self) -> Result<Option<(ImapConn, u32)>, String> {
        let login = Login::Login {
            user: self.user.address.clone(),
            pass: self.user.password.clone(),
        };
        let mut conn = ImapConn::open(self.imap, self.connect, false, &login)
            .await
            .map_err(|e| e.to_string())?;
        let sel = conn
            .run(&Command::Select {
                mailbox: self.mailbox.to_string(),
                read_only: true,
            })
            .await
            .map_err(|e| e.to_string())?;
        if sel.done.cond != Cond::Ok {
            return Ok(None);
        }
        let exists = sel
            .data
            .iter()
            .rev()
            .find_map(|d| match d {
                Data::Exists(n) => Some(*n),
                _ => None,
            })
            .unwrap_or(0);
        Ok(Some((conn, exists)))
    }

    /// Counts the mailbox's messages into `c`: all at once, or, when the store breaks off,
    /// one at a time.
    async fn read(&self, run: u64, c: &mut Census) -> Result<(), String> {
        let Some((mut conn, exists)) = self.open().await? else {
            return Ok(());
        };
        let all = conn
            .run(&Command::FetchHeader {
                first_uid: 1,
                field: HEADER_NAME,
            })
            .await;
        if let Ok(r) = &all
            && r.done.cond == Cond::Ok
        {
            for d in &r.data {
                if let Data::Fetch(f) = d {
                    c.count(f.body.as_ref().map(|b| b.kept.as_slice()), run);
                }
            }
            conn.logout().await;
            return Ok(());
        }
        let mut conn = None;
        for n in 1..=exists {
            let mut open = match conn.take() {
                Some(open) => open,
                None => match self.open().await? {
                    Some((open, _)) => open,
                    None => return Ok(()),
                },
            };
            let one = open
                .run(&Command::Fetch {
                    first: n,
                    last: n,
                    items: FetchItems::Part(Section::Header),
                })
                .await;
            match one {
                Ok(r) if r.done.cond == Cond::Ok => {
                    let body = r.data.iter().find_map(|d| match d {
                        Data::Fetch(f) => f.body.as_ref().map(|b| b.kept.clone()),
                        _ => None,
                    });
                    c.count(body.as_deref(), run);
                    conn = Some(open);
                }
                // Refused or cut off: the message is there and cannot be read.
                _ => c.count(None, run),
            }
        }
        if let Some(open) = conn {
            open.logout().await;
        }
        Ok(())
    }
}

impl Census {
    /// One message found, with its header as fetched (`None`: it could not be read).
    fn count(&mut self, header: Option<&[u8]>, run: u64) {
        self.messages += 1;
        match header.and_then(Trace::find).filter(|t| t.run == run) {
            Some(t) => *self.copies.entry(t.seq).or_insert(0) += 1,
            None => self.unreadable += 1,
        }
    }
}

/// How the fill wrote each message's Message-ID, from its run and sequence number.
pub type MessageId = fn(u64, u64) -> String;

/// Puts the fault's outcome in the results (`extra.fault`): accepted, lost (accepted and
/// not found after recovery, each by Message-ID), duplicated, the errors and refusals of the
/// fill (those of the cut connections), and LazyFS's report of what was unsynced at the cut.
pub(crate) fn record(
    results: &mut Results,
    plan: FaultPlan,
    fired: Option<Fired>,
    accepts: &TimeLog,
    census: &Census,
    message_id: MessageId,
    run: u64,
) {
    if fired.is_none() {
        results.self_report.warnings.push(format!(
            "--fault {}: the fault never fired (the store accepted {} messages in all)",
            plan.label(),
            accepts.len()
        ));
    }
    let counts = [results.counters.errors, results.counters.rejected];
    let judged = judge(
        plan,
        fired,
        accepts,
        census,
        message_id,
        run,
        results.started_at_us,
        counts,
    );
    results.extra.insert("fault".into(), judged);
}

/// The `extra.fault` record of [`record`], from run `run` started at `origin_us` with
/// `[errors, rejected]` of the fill.
#[allow(clippy::too_many_arguments)]
fn judge(
    plan: FaultPlan,
    fired: Option<Fired>,
    accepts: &TimeLog,
    census: &Census,
    message_id: MessageId,
    run: u64,
    origin_us: u64,
    [errors, rejected]: [u64; 2],
) -> serde_json::Value {
    let Some(f) = fired else {
        return serde_json::json!({"fault": plan.label(), "fired": false, "accepted": accepts.len()});
    };
    let mut accepted: Vec<u64> = accepts.entries().into_iter().map(|(s, _)| s).collect();
    accepted.sort_unstable();
    let lost: Vec<String> = accepted
        .iter()
        .filter(|s| !census.copies.contains_key(s))
        .map(|s| message_id(run, *s))
        .collect();
    let duplicated: Vec<[u64; 2]> = census
        .copies
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, n)| [*s, *n])
        .collect();
    let secs = |us: u64| us as f64 / 1e6;
    serde_json::json!({
        "fault": plan.label(),
        "fired": true,
        "at_s": secs(f.at_us.saturating_sub(origin_us)),
        "accepted_before": f.accepted_before,
        "killed_processes": f.crashed.killed,
        "down_s": secs(f.restarted_us.saturating_sub(f.at_us)),
        "accepted": accepted.len(),
        "lost": lost.len(),
        "lost_message_ids": lost,
        "duplicated": duplicated.len(),
        "duplicated_seqs": duplicated,
        "found": census.messages,
        "unreadable": census.unreadable,
        "look_s": census.took_s,
        "errors": errors,
        "rejected": rejected,
        "accepted_seqs": crate::relay::fault::ranges(accepts),
        "unsynced_files": f.crashed.unsynced_files.as_ref().map(Vec::len),
        "unsynced_paths": f.crashed.unsynced_files,
        "unsynced_bytes": f.crashed.unsynced_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_and_duplicated_are_judged_against_the_accepted() {
        let accepts = TimeLog::default();
        for s in [0, 1, 2, 3] {
            accepts.record_at(s, 1);
        }
        let census = Census {
            copies: [(0, 1), (2, 2), (9, 1)].into_iter().collect(),
            unreadable: 1,
            messages: 5,
            took_s: 0.25,
        };
        let fired = Fired {
            at_us: 2_000_000,
            accepted_before: 2,
            crashed: crate::lab::Crashed {
                killed: 3,
                unsynced_files: Some(vec!["/a".into(), "/b".into()]),
                unsynced_bytes: Some(10),
            },
            filled: None,
            restarted_us: 2_500_000,
        };
        let id: MessageId = |run, seq| format!("<{run:x}.{seq}@t>");
        let f = judge(
            crate::relay::fault::FaultPlan {
                kind: crate::relay::fault::FaultKind::PowerLoss,
                when: crate::relay::fault::FaultWhen::Accepted(2),
            },
            Some(fired),
            &accepts,
            &census,
            id,
            0xab,
            1_000_000,
            [1, 0],
        );
        assert_eq!(f["accepted"], 4);
        assert_eq!(f["lost"], 2);
        assert_eq!(
            f["lost_message_ids"],
            serde_json::json!(["<ab.1@t>", "<ab.3@t>"])
        );
        assert_eq!(f["duplicated_seqs"], serde_json::json!([[2, 2]]));
        assert_eq!(f["unsynced_files"], 2);
        assert_eq!(f["down_s"], 0.5);
        assert_eq!(f["at_s"], 1.0);
        assert_eq!(f["errors"], 1);
        assert_eq!(f["look_s"], 0.25);
    }
}
