//! What a lab MTA's own log says about one run's messages: the recipients its last hop
//! delivered and those it bounced, its bounce and delay notices left out. A message the
//! MTA bounced is bounced whether or not its notice reached the sink (the receiver may
//! refuse the notice too); the log is where that is written. Only the lines written since
//! the run's [`Mark`] are read, so that earlier runs on the same lab (a sweep, a search)
//! do not count.
//!
//! Postfix names each message in its log (`cleanup: QID: message-id=<RUN.SEQ@…>`, the
//! Message-ID the generator gives), so its bounces are known by sequence number.
//! OpenSMTPD names none (its `msgid` is its own): its bounces are a count, the recipients
//! of non-null senders it ended with `result="PermFail"`. The other lab MTAs are read by
//! the lab alone ([`crate::lab::MtaLab::delivered_logged`]).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::lab::{LogSyntax, Mta};

/// Where each of a lab's logs ended when a run began.
#[derive(Debug, Clone, Default)]
pub(super) struct Mark {
    logs: Vec<(PathBuf, u64)>,
}

impl Mark {
    /// The logs' lengths now.
    pub(super) fn now(logs: Vec<PathBuf>) -> Mark {
        let logs = logs
            .into_iter()
            .map(|p| {
                let len = std::fs::metadata(&p).map_or(0, |m| m.len());
                (p, len)
            })
            .collect();
        Mark { logs }
    }

    /// What each log gained since the mark, first hop first (empty where it cannot be read).
    fn since(&self) -> Vec<String> {
        self.since_where(|_| true)
    }

    /// The same, of the logs `keep` keeps: a lab's logs may include its helpers' (a
    /// directory's access log) beside its MTA's.
    fn since_where(&self, keep: impl Fn(&Path) -> bool) -> Vec<String> {
        self.logs
            .iter()
            .filter(|(p, _)| keep(p))
            .map(|(p, from)| tail(p, *from))
            .collect()
    }
}

/// Whether the first 4 KiB of `path` hold `word` (an MTA logs its start there).
fn begins_with_word(path: &Path, word: &str) -> bool {
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    memchr::memmem::find(&head[..n], word.as_bytes()).is_some()
}

/// The part of `path` after its first `from` bytes (a log rewritten shorter is read whole).
fn tail(path: &Path, from: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let start = if len >= from { from } else { 0 };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// One run's messages, as the MTA's log tells them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LogSays {
    /// Recipients of the run's messages the last hop delivered onward (`status=sent`);
    /// the MTA's own notices (from the null sender) are not the run's messages.
    pub(super) sent: u64,
    /// Recipients bounced, per sequence number, where the log names the message.
    pub(super) bounced: HashMap<u64, u64>,
    /// Recipients bounced that the log names no message for.
    pub(super) bounced_unnamed: u64,
}

impl LogSays {
    /// Every recipient the log says the MTA bounced.
    pub(super) fn bounced_total(&self) -> u64 {
        self.bounced.values().sum::<u64>() + self.bounced_unnamed
    }
}

/// What the logs of `mta` say about run `run` since `mark`, when this module can read
/// the log syntax the MTA's features declare (Postfix's, OpenSMTPD's).
pub(super) fn read(mta: Mta, mark: &Mark, run: u64) -> Option<LogSays> {
    match mta.features().log {
        LogSyntax::Postfix => Some(postfix(
            &mark.since_where(|p| begins_with_word(p, "postfix/")),
            run,
        )),
        LogSyntax::Opensmtpd => Some(opensmtpd(&mark.since())),
        LogSyntax::Unread => None,
    }
}

/// Postfix: each instance's log in turn (first hop first), its queue IDs tied to the run's
/// sequence numbers by the Message-ID its cleanup logged. `status=sent` of the last hop
/// are deliveries; `status=bounced` (and `expired`, returned to the sender) of any hop
/// are bounces.
fn postfix(logs: &[String], run: u64) -> LogSays {
    let prefix = format!("<{run:016x}.");
    let mut says = LogSays::default();
    for (i, log) in logs.iter().enumerate() {
        let last = i + 1 == logs.len();
        // Queue IDs are reused once a message is gone: a later cleanup line wins.
        let mut seq_of: HashMap<&str, u64> = HashMap::new();
        for line in log.lines() {
            let Some((qid, rest)) = postfix_entry(line) else {
                continue;
            };
            if let Some(id) = rest.strip_prefix("message-id=") {
                match id
                    .strip_prefix(prefix.as_str())
                    .and_then(|r| r.split_once('@'))
                    .and_then(|(seq, _)| seq.parse::<u64>().ok())
                {
                    Some(seq) => seq_of.insert(qid, seq),
                    None => seq_of.remove(qid),
                };
                continue;
            }
            let Some(seq) = seq_of.get(qid).copied() else {
                continue;
            };
            if !rest.starts_with("to=<") {
                continue;
            }
            if rest.contains(", status=sent ") && last {
                says.sent += 1;
            } else if rest.contains(", status=bounced ") || rest.contains(", status=expired") {
                *says.bounced.entry(seq).or_insert(0) += 1;
            }
        }
    }
    says
}

/// A Postfix log line's queue ID and what follows it: `… postfix/DAEMON[PID]: QID: REST`
/// (whatever the line's time and host prefix).
fn postfix_entry(line: &str) -> Option<(&str, &str)> {
    let at = line.find("postfix")?;
    let (_, after) = line[at..].split_once("]: ")?;
    let (qid, rest) = after.split_once(": ")?;
    let hex_qid = !qid.is_empty() && qid.bytes().all(|b| b.is_ascii_alphanumeric());
    hex_qid.then_some((qid, rest))
}

/// OpenSMTPD: `mta delivery evpid=… from=<SENDER> … result="Ok"` of the last hop are
/// deliveries and `result="PermFail"` of any hop bounces, when SENDER is not null (the
/// null sender's are its own notices). The log names no message, so bounces are a count.
fn opensmtpd(logs: &[String]) -> LogSays {
    let mut says = LogSays::default();
    for (i, log) in logs.iter().enumerate() {
        let last = i + 1 == logs.len();
        for line in log.lines() {
            if !line.contains(" mta delivery ") || line.contains(" from=<> ") {
                continue;
            }
            if line.contains("result=\"Ok\"") && last {
                says.sent += 1;
            } else if line.contains("result=\"PermFail\"") {
                says.bounced_unnamed += 1;
            }
        }
    }
    says
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postfix_bounces_are_named_by_the_message_id_and_notices_are_not_deliveries() {
        // Seq 0 delivered; seq 1 bounced, its notice (no Message-ID of the run) refused in
        // turn; seq 2 bounced, its notice delivered; another run's message delivered; the
        // queue ID of seq 0 reused afterwards by a notice.
        let log = "\
Nov 28 10:42:43 lab0 postfix/cleanup[1]: D0: message-id=<00000000000000aa.0@mailbench.test>
Nov 28 10:42:43 lab0 postfix/cleanup[1]: D1: message-id=<00000000000000aa.1@mailbench.test>
Nov 28 10:42:43 lab0 postfix/cleanup[1]: D2: message-id=<00000000000000aa.2@mailbench.test>
Nov 28 10:42:43 lab0 postfix/cleanup[1]: E9: message-id=<00000000000000bb.0@mailbench.test>
Nov 28 10:42:43 lab0 postfix/qmgr[2]: D0: from=<mailbench@example.org>, size=2201, nrcpt=1 (queue active)
Nov 28 10:42:43 lab0 postfix/smtp[3]: D0: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2525, delay=0.09, dsn=2.0.0, status=sent (250 2.0.0 Ok)
Nov 28 10:42:43 lab0 postfix/qmgr[2]: D0: removed
Nov 28 10:42:43 lab0 postfix/smtp[3]: D1: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2525, delay=0.09, dsn=5.3.0, status=bounced (host said: 550 5.3.0 permanent failure (injected) (in reply to RCPT TO command))
Nov 28 10:42:43 lab0 postfix/cleanup[1]: D0: message-id=<20261128104243.D0@lab0.mailbench.test>
Nov 28 10:42:43 lab0 postfix/bounce[4]: D1: sender non-delivery notification: D0
Nov 28 10:42:43 lab0 postfix/qmgr[2]: D0: from=<>, size=4220, nrcpt=1 (queue active)
Nov 28 10:42:44 lab0 postfix/smtp[3]: D0: to=<mailbench@example.org>, relay=127.0.0.1[127.0.0.1]:2525, dsn=5.3.0, status=bounced (host said: 550 5.3.0 permanent failure (injected))
Nov 28 10:42:44 lab0 postfix/smtp[3]: D2: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2525, dsn=5.3.0, status=bounced (host said: 550 5.3.0 permanent failure (injected))
Nov 28 10:42:44 lab0 postfix/cleanup[1]: F1: message-id=<20261128104244.F1@lab0.mailbench.test>
Nov 28 10:42:44 lab0 postfix/smtp[3]: F1: to=<mailbench@example.org>, relay=127.0.0.1[127.0.0.1]:2525, dsn=2.0.0, status=sent (250 2.0.0 Ok)
Nov 28 10:42:44 lab0 postfix/smtp[3]: E9: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2525, dsn=2.0.0, status=sent (250 2.0.0 Ok)
";
        let says = postfix(&[log.to_string()], 0xaa);
        assert_eq!(says.sent, 1, "{says:?}");
        assert_eq!(says.bounced, HashMap::from([(1, 1), (2, 1)]), "{says:?}");
        assert_eq!(says.bounced_total(), 2);
        // Two hops: the first hop's deliveries are hand-overs to the second, not counted;
        // a bounce at either hop is.
        let hop1 = "\
Nov 28 10:42:43 lab0 postfix/cleanup[1]: A1: message-id=<00000000000000aa.7@mailbench.test>
Nov 28 10:42:43 lab0 postfix/smtp[3]: A1: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2600, dsn=2.0.0, status=sent (250 2.0.0 Ok)
";
        let hop2 = "\
Nov 28 10:42:43 lab1 postfix/cleanup[1]: B1: message-id=<00000000000000aa.7@mailbench.test>
Nov 28 10:42:43 lab1 postfix/smtp[3]: B1: to=<rcpt@example.com>, relay=127.0.0.1[127.0.0.1]:2525, dsn=5.0.0, status=bounced (host said: 554 no)
";
        let says = postfix(&[hop1.to_string(), hop2.to_string()], 0xaa);
        assert_eq!((says.sent, says.bounced_total()), (0, 1), "{says:?}");
    }

    #[test]
    fn opensmtpd_bounces_are_a_count_of_the_senders_permanent_failures() {
        let log = r#"7cf8 mta delivery evpid=3beb from=<mailbench@example.org> to=<rcpt@example.com> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="PermFail" stat="550 5.3.0 permanent failure (injected)"
7cf8 mta delivery evpid=4b29 from=<mailbench@example.org> to=<rcpt@example.com> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="Ok" stat="250 2.0.0 Ok"
7cf8 mta delivery evpid=94bc from=<> to=<mailbench@example.org> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="Ok" stat="250 2.0.0 Ok"
7cf8 mta delivery evpid=97a7 from=<> to=<mailbench@example.org> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="PermFail" stat="550 5.3.0 permanent failure (injected)"
7cf8 mta delivery evpid=9bb4 from=<mailbench@example.org> to=<rcpt@example.com> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=1s result="TempFail" stat="451 4.3.0 temporary failure (injected)"
"#;
        let says = opensmtpd(&[log.to_string()]);
        assert_eq!(
            says,
            LogSays {
                sent: 1,
                bounced: HashMap::new(),
                bounced_unnamed: 1,
            }
        );
    }

    #[test]
    fn a_mark_reads_only_what_the_log_gained_since() {
        let dir = std::env::temp_dir().join(format!("mailbench-maillog-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("maillog");
        std::fs::write(&p, "before\n").expect("write");
        let other = dir.join("access.log");
        std::fs::write(&other, "slapd: conn=1\n").expect("write");
        let mark = Mark::now(vec![p.clone(), dir.join("missing"), other.clone()]);
        std::fs::write(&p, "before\nafter\n").expect("write");
        assert_eq!(
            mark.since(),
            vec!["after\n".to_string(), String::new(), String::new()]
        );
        // A directory's access log beside the MTA's is no hop of the MTA.
        std::fs::write(&p, "postfix/master[1]: daemon started\nbefore\n").expect("write");
        let mark = Mark::now(vec![p.clone(), other.clone()]);
        std::fs::write(&other, "slapd: conn=1\nslapd: conn=2\n").expect("write");
        assert_eq!(
            mark.since_where(|p| begins_with_word(p, "postfix/")),
            vec![String::new()]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
