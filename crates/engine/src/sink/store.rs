//! What the sink does with a message: discard it (default), or keep it in a maildir, an
//! mbox, or one file per message (like smtp-sink's dump). `fsync` makes each stored message
//! durable before the 250 is sent: its data and the directory entry that names it.
//!
//! A message that cannot be stored is answered 4xx and left nowhere: a file half written
//! (or written and not made durable) is removed, an mbox is cut back to where the message
//! began, so that what is on disk is exactly what was acknowledged. A full disk (ENOSPC,
//! or a quota: EDQUOT) is told apart, for RFC 5321's 452 "insufficient system storage".

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::smtp::proto::server::Envelope;

/// Where messages go.
#[derive(Debug)]
pub enum Store {
    /// Nowhere: the default, so that the sink costs no disk and measures the sender alone.
    Discard,
    /// A maildir (tmp/, new/, cur/).
    Maildir(PathBuf),
    /// One mbox file.
    Mbox(Mutex<File>, PathBuf),
    /// One file per message, with the envelope as leading `X-Mailbench-*` lines.
    Files(PathBuf),
}

/// Why a message was not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The disk (or the quota) is full: answered 452 4.3.1.
    Full(String),
    /// Anything else: answered 451 4.3.0.
    Failed(String),
}

impl StoreError {
    fn of(e: std::io::Error) -> StoreError {
        let text = format!("cannot store message: {e}");
        match e.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => StoreError::Full(text),
            _ => StoreError::Failed(text),
        }
    }
}

/// What the store did, for the results (`extra.store`): messages stored, refused because
/// the disk was full, refused because storing failed otherwise.
#[derive(Debug, Default)]
pub struct StoreCounts {
    /// Messages stored (and, with `--fsync`, durable) before their 250.
    pub stored: AtomicU64,
    /// Messages answered 452: the disk or quota was full.
    pub full: AtomicU64,
    /// Messages answered 451: storing failed otherwise.
    pub failed: AtomicU64,
}

impl StoreCounts {
    /// Counts one outcome of [`Store::put`].
    pub fn count(&self, r: &Result<(), StoreError>) {
        let c = match r {
            Ok(()) => &self.stored,
            Err(StoreError::Full(_)) => &self.full,
            Err(StoreError::Failed(_)) => &self.failed,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts as the results file holds them.
    pub fn report(&self, fsync: bool) -> serde_json::Value {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "fsync": fsync,
            "stored": n(&self.stored),
            "full": n(&self.full),
            "failed": n(&self.failed),
        })
    }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Parses `discard`, `maildir:DIR`, `mbox:FILE` or `dir:DIR`, creating what is needed.
    pub fn open(spec: &str) -> Result<Store, String> {
        let (kind, path) = spec.split_once(':').unwrap_or((spec, ""));
        let p = PathBuf::from(path);
        let need_path = || {
            if path.is_empty() {
                Err(format!(
                    "--store {spec:?} needs a path, e.g. {kind}:/tmp/mail"
                ))
            } else {
                Ok(())
            }
        };
        let mk = |d: &Path| {
            fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))
        };
        match kind {
            "discard" => Ok(Store::Discard),
            "maildir" => {
                need_path()?;
                for sub in ["tmp", "new", "cur"] {
                    mk(&p.join(sub))?;
                }
                Ok(Store::Maildir(p))
            }
            "mbox" => {
                need_path()?;
                let f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&p)
                    .map_err(|e| format!("cannot open mbox {}: {e}", p.display()))?;
                Ok(Store::Mbox(Mutex::new(f), p))
            }
            "dir" => {
                need_path()?;
                mk(&p)?;
                Ok(Store::Files(p))
            }
            _ => Err(format!(
                "unknown --store {spec:?}; use discard, maildir:DIR, mbox:FILE or dir:DIR"
            )),
        }
    }

    /// Stores one message; with `fsync`, its data and its name are on stable storage when
    /// this returns `Ok`. On `Err` nothing of it is left in the store.
    pub fn put(&self, env: &Envelope, data: &[u8], fsync: bool) -> Result<(), StoreError> {
        let unique = || {
            format!(
                "{}.{}.mailbench",
                std::process::id(),
                UNIQUE.fetch_add(1, Ordering::Relaxed)
            )
        };
        match self {
            Store::Discard => Ok(()),
            Store::Maildir(dir) => {
                let name = unique();
                let (tmp, new) = (dir.join("tmp").join(&name), dir.join("new").join(&name));
                write_file(&tmp, &[data], fsync)?;
                let moved = fs::rename(&tmp, &new).map_err(StoreError::of);
                if let Err(e) = moved {
                    let _ = fs::remove_file(&tmp);
                    return Err(e);
                }
                // The rename is durable once new/ is.
                sync_dir_or_remove(&dir.join("new"), &new, fsync)
            }
            Store::Files(dir) => {
                let head = format!(
                    "X-Mailbench-Helo: {}\r\nX-Mailbench-From: {}\r\nX-Mailbench-To: {}\r\n",
                    env.helo,
                    env.from,
                    env.rcpts.join(", ")
                );
                let path = dir.join(unique());
                write_file(&path, &[head.as_bytes(), data], fsync)?;
                sync_dir_or_remove(dir, &path, fsync)
            }
            Store::Mbox(file, _) => {
                let buf = mbox_entry(env, data);
                let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
                let before = f.metadata().map_err(StoreError::of)?.len();
                let written = f
                    .write_all(&buf)
                    .and_then(|_| if fsync { f.sync_data() } else { Ok(()) });
                if let Err(e) = written {
                    // Cut the mbox back to where this message began: no half message.
                    let _ = f.set_len(before);
                    return Err(StoreError::of(e));
                }
                Ok(())
            }
        }
    }
}

/// Writes `parts` into a new file at `path` (fsynced when asked); on failure removes it.
fn write_file(path: &Path, parts: &[&[u8]], fsync: bool) -> Result<(), StoreError> {
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
        for p in parts {
            f.write_all(p)?;
        }
        if fsync {
            f.sync_all()?;
        }
        Ok(())
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(path);
        StoreError::of(e)
    })
}

/// With `fsync`, fsyncs `dir` so that the entry naming `file` survives a crash; if that
/// fails, removes `file` (the message was not stored).
fn sync_dir_or_remove(dir: &Path, file: &Path, fsync: bool) -> Result<(), StoreError> {
    if !fsync {
        return Ok(());
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| {
        let _ = fs::remove_file(file);
        StoreError::of(e)
    })
}

/// One message as an mbox holds it: a Unix text file (LF line ends), a From_ line with
/// the envelope sender and the arrival time in asctime form, mboxrd quoting.
fn mbox_entry(env: &Envelope, data: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(data.len() + 128);
    let sender = match env.from.as_str() {
        "<>" | "" => "MAILER-DAEMON",
        s => s,
    };
    let now = crate::stats::clock::unix_us() / 1_000_000;
    let _ = writeln!(buf, "From {sender} {}", asctime(now));
    for line in data.split_inclusive(|b| *b == b'\n') {
        // mboxrd: quote any line that starts with '>'*From .
        if line
            .trim_start_matches(b">".as_slice())
            .starts_with(b"From ")
        {
            buf.push(b'>');
        }
        let text = line
            .strip_suffix(b"\r\n")
            .or_else(|| line.strip_suffix(b"\n"))
            .unwrap_or(line);
        buf.extend_from_slice(text);
        buf.push(b'\n');
    }
    buf.push(b'\n');
    buf
}

/// A Unix time as asctime(3) writes it, `Thu Nov 22 21:34:52 2026` (UTC), as mbox From_
/// lines carry it; rearranged from mail-builder's RFC 5322 date.
pub fn asctime(unix_s: u64) -> String {
    let rfc = mail_builder::headers::date::Date::new(unix_s as i64).to_rfc822();
    // "Thu, 22 Nov 2026 21:34:52 +0000"
    let f: Vec<&str> = rfc.split_whitespace().collect();
    match f.as_slice() {
        [dow, day, mon, year, time, ..] => {
            format!("{} {mon} {day:>2} {time} {year}", dow.trim_end_matches(','))
        }
        _ => rfc,
    }
}

trait TrimGt {
    fn trim_start_matches(&self, pat: &[u8]) -> &[u8];
}

impl TrimGt for [u8] {
    fn trim_start_matches(&self, pat: &[u8]) -> &[u8] {
        let mut s = self;
        while s.starts_with(pat) {
            s = &s[pat.len()..];
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Envelope {
        Envelope {
            helo: "c".into(),
            from: "a@x.test".into(),
            rcpts: vec!["b@x.test".into()],
        }
    }

    #[test]
    fn maildir_and_files_keep_the_bytes() {
        let dir = std::env::temp_dir().join(format!("mailbench-store-{}", std::process::id()));
        let md = Store::open(&format!("maildir:{}", dir.join("md").display())).expect("maildir");
        md.put(&env(), b"Subject: x\r\n\r\n.dot\r\n", true)
            .expect("put");
        let new: Vec<_> = fs::read_dir(dir.join("md/new")).expect("new").collect();
        assert_eq!(new.len(), 1);
        let p = new.into_iter().next().expect("one").expect("entry").path();
        assert_eq!(fs::read(p).expect("read"), b"Subject: x\r\n\r\n.dot\r\n");
        let mb = Store::open(&format!("mbox:{}", dir.join("mbox").display())).expect("mbox");
        mb.put(&env(), b"Subject: y\r\n\r\nFrom here\r\n", false)
            .expect("put");
        let text = fs::read_to_string(dir.join("mbox")).expect("mbox");
        assert!(
            text.starts_with("From a@x.test ") && text.contains("\n>From here\n"),
            "{text}"
        );
        assert!(!text.contains('\r'), "mbox lines end in LF: {text:?}");
        let from_line = text.lines().next().expect("From_ line");
        let year = from_line.rsplit(' ').next().expect("year");
        assert!(year.parse::<u32>().is_ok_and(|y| y >= 2025), "{from_line}");
        assert_eq!(asctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(asctime(1_795_383_292), "Sun Nov 22 21:34:52 2026");
        assert!(Store::open("maildir").is_err());
        assert!(Store::open("tape:/dev/st0").is_err());
        let _ = fs::remove_dir_all(dir);
    }
}
