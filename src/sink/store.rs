//! What the sink does with a message: discard it (default), or keep it in a maildir, an
//! mbox, or one file per message (like smtp-sink's dump). `fsync` makes each stored message
//! durable before the 250 is sent.

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

    /// Stores one message; returns an error text for a 451 when storing failed.
    pub fn put(&self, env: &Envelope, data: &[u8], fsync: bool) -> Result<(), String> {
        let unique = || {
            format!(
                "{}.{}.mailbench",
                std::process::id(),
                UNIQUE.fetch_add(1, Ordering::Relaxed)
            )
        };
        let write = |path: &Path, parts: &[&[u8]]| -> std::io::Result<()> {
            let mut f = File::create(path)?;
            for p in parts {
                f.write_all(p)?;
            }
            if fsync {
                f.sync_all()?;
            }
            Ok(())
        };
        let result = match self {
            Store::Discard => Ok(()),
            Store::Maildir(dir) => {
                let name = unique();
                let tmp = dir.join("tmp").join(&name);
                write(&tmp, &[data]).and_then(|_| fs::rename(&tmp, dir.join("new").join(&name)))
            }
            Store::Files(dir) => {
                let head = format!(
                    "X-Mailbench-Helo: {}\r\nX-Mailbench-From: {}\r\nX-Mailbench-To: {}\r\n",
                    env.helo,
                    env.from,
                    env.rcpts.join(", ")
                );
                write(&dir.join(unique()), &[head.as_bytes(), data])
            }
            Store::Mbox(file, _) => {
                // An mbox is a Unix text file: LF line ends, and a From_ line with the
                // envelope sender and the arrival time in asctime form.
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
                let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
                f.write_all(&buf)
                    .and_then(|_| if fsync { f.sync_data() } else { Ok(()) })
            }
        };
        result.map_err(|e| format!("cannot store message: {e}"))
    }
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
