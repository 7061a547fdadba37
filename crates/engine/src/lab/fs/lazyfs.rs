//! A LazyFS mount (third_party/lazyfs, built by scripts/install-lazyfs.sh): a FUSE file
//! system with a page cache of its own, mounted over a directory and backed by another
//! (its root), that drops every write not fsynced on command — a power cut for what lives
//! in it, the `power-loss` fault of issue 42.
//!
//! What LazyFS loses is unsynced file *data*: names (create, rename, link, unlink) reach
//! the root at once, so after [`LazyFs::clear_cache`] a file written but never fsynced is
//! still there with the bytes of its last fsync (none if never). It does not model lost
//! directory entries (see third_party/lazyfs/README.md).
//!
//! What it does not implement (a47a5ba, tried by hand with Postfix 3.7.11): `mknod`, so
//! neither a FIFO nor a Unix socket can be made in it (ENOSYS: Postfix's `public/` and
//! `private/` must be mounted over from elsewhere); `statfs`, so FUSE reported 0 blocks
//! free (Postfix's smtpd then answered MAIL `452 4.3.1 Insufficient system storage`, still
//! with `message_size_limit = 0` and `queue_minfree = 0`) — third_party/lazyfs/statfs.patch
//! now passes it through to the root; and the files it creates belong to its own user, not
//! the caller's. Locks (flock, fcntl) work, held by the kernel.
//!
//! It is driven through two FIFOs: commands go into one, and the completion of a
//! `clear-cache` comes back on the other; the other commands answer only in its log, which
//! is read for their end. Every wait has a deadline; the mount is undone on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{mounted, poll_until, succeeds, wait_bounded};

/// Where scripts/install-lazyfs.sh installs it (`$MAILBENCH_LAZYFS` moves it).
pub const DEFAULT_PREFIX: &str = "/opt/mailbench/lazyfs";

/// How long LazyFS gets to mount, and each command to finish.
const START_LIMIT: Duration = Duration::from_secs(15);
/// How long a command (clear-cache, checkpoint, report) gets to finish.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How long an unmount and LazyFS's exit get before the lazy unmount and SIGKILL.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// The LazyFS binary.
pub fn binary() -> PathBuf {
    let prefix = std::env::var_os("MAILBENCH_LAZYFS").map_or(DEFAULT_PREFIX.into(), PathBuf::from);
    prefix.join("bin/lazyfs")
}

/// Whether a LazyFS can be started here; the error says what is missing and the fix.
pub fn check() -> Result<(), String> {
    let bin = binary();
    if !bin.exists() {
        return Err(format!(
            "LazyFS is not installed ({} is missing): run scripts/install-lazyfs.sh",
            bin.display()
        ));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(
            "FUSE cannot mount here: /dev/fuse is missing (modprobe fuse; in a container, \
             --device /dev/fuse --cap-add SYS_ADMIN)"
                .into(),
        );
    }
    crate::lab::host::check_root("a LazyFS mount")
}

/// What LazyFS held in its cache and had not written to its root: the files (their paths
/// in the root) with unsynced data, and the unsynced bytes in all (of deleted files too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unsynced {
    /// Files with data not yet fsynced, as paths in the root, sorted.
    pub files: Vec<PathBuf>,
    /// Bytes not yet fsynced.
    pub bytes: u64,
}

/// A running LazyFS mount.
#[derive(Debug)]
pub struct LazyFs {
    mount: PathBuf,
    root: PathBuf,
    commands: PathBuf,
    log: PathBuf,
    /// Its stdout and stderr (its log, and what the C++ runtime says when it aborts).
    output: PathBuf,
    /// The completion FIFO, open for reading for as long as LazyFS runs: its command
    /// thread opens it for writing when it starts and reads no command until a reader is
    /// there, and a reader that came and went would leave it a broken pipe.
    done: File,
    child: Option<Child>,
}

impl LazyFs {
    /// Mounts a LazyFS over `mount` backed by `root` (both made if missing), with its
    /// configuration, FIFOs and log in `state` (made too), and a cache of `cache_bytes`
    /// (never evicted: what does not fit fails). Returns once it is mounted and reads
    /// commands.
    pub fn start(
        mount: &Path,
        root: &Path,
        state: &Path,
        cache_bytes: u64,
    ) -> Result<LazyFs, String> {
        // The error is a sentence, not a `LabError`: the labs that put their queue on
        // LazyFS import this file, which therefore imports nothing of `lab`'s own face.
        check()?;
        let failed = |what: &str, e: std::io::Error| format!("LazyFS: cannot {what}: {e}");
        for d in [mount, root, state] {
            std::fs::create_dir_all(d)
                .map_err(|e| failed(&format!("create {}", d.display()), e))?;
        }
        let commands = state.join("faults.fifo");
        let completed = state.join("completed.fifo");
        let log = state.join("lazyfs.log");
        for f in [&commands, &completed] {
            make_fifo(f).map_err(|e| failed(&format!("make the FIFO {}", f.display()), e))?;
        }
        let config = state.join("lazyfs.toml");
        let mib = cache_bytes.div_ceil(1 << 20).max(1);
        std::fs::write(
            &config,
            format!(
                "[faults]\nfifo_path={:?}\nfifo_path_completed={:?}\n\
                 [cache]\napply_eviction=false\n\
                 [cache.simple]\ncustom_size=\"{mib}mb\"\nblocks_per_page=1\n\
                 [filesystem]\nlog_all_operations=false\nlogfile={:?}\n",
                commands.display().to_string(),
                completed.display().to_string(),
                log.display().to_string()
            ),
        )
        .map_err(|e| failed("write its configuration", e))?;
        // Read-write, so that opening never waits for a writer and the FIFO never ends.
        let done = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&completed)
            .map_err(|e| failed("open its completion FIFO", e))?;
        let output = state.join("lazyfs.out");
        let out = File::create(&output).map_err(|e| failed("create its output file", e))?;
        let err = out
            .try_clone()
            .map_err(|e| failed("create its output file", e))?;
        let mut cmd = Command::new(binary());
        cmd.arg(mount)
            .arg("--config-path")
            .arg(&config)
            .args(["-o", "allow_other", "-o", "modules=subdir", "-o"])
            .arg(format!("subdir={}", root.display()))
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        crate::lab::leftovers::own_group(&mut cmd);
        let child = cmd.spawn().map_err(|e| failed("start lazyfs", e))?;
        let mut fs = LazyFs {
            mount: mount.to_path_buf(),
            root: root.to_path_buf(),
            commands,
            log,
            output,
            done,
            child: Some(child),
        };
        let ready = poll_until(START_LIMIT, || {
            fs.running()
                && mounted(&fs.mount).is_some()
                && fs.log_text().contains("waiting for fault commands")
        });
        if !ready {
            let why = fs.state_of();
            fs.stop();
            return Err(format!(
                "LazyFS over {} was not mounted and reading commands within {START_LIMIT:?}: {why}",
                mount.display()
            ));
        }
        Ok(fs)
    }

    /// Where it is mounted: what is written here is held in its cache until fsynced.
    pub fn mount_point(&self) -> &Path {
        &self.mount
    }

    /// The directory below it: what a power cut leaves ("the disk").
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The power cut: drops every write not fsynced (`lazyfs::clear-cache`) and returns
    /// once LazyFS says it has (`finished::clear-cache` on the completion FIFO).
    pub fn clear_cache(&mut self) -> Result<(), String> {
        self.drain_done();
        self.send("lazyfs::clear-cache")?;
        let end = Instant::now() + COMMAND_LIMIT;
        let mut got = Vec::new();
        while Instant::now() < end {
            let mut buf = [0u8; 256];
            match self.done.read(&mut buf) {
                Ok(n) if n > 0 => {
                    got.extend_from_slice(&buf[..n]);
                    if String::from_utf8_lossy(&got).contains("finished::clear-cache") {
                        return Ok(());
                    }
                }
                _ => {
                    if !self.running() {
                        return Err(format!(
                            "LazyFS ended during clear-cache: {}",
                            self.state_of()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        Err(format!(
            "LazyFS did not finish clear-cache within {COMMAND_LIMIT:?}: {}",
            self.state_of()
        ))
    }

    /// Writes everything in its cache to its root (`lazyfs::cache-checkpoint`, without
    /// fsync below): afterwards nothing is unsynced, as if the files had been fsynced.
    pub fn checkpoint(&mut self) -> Result<(), String> {
        self.command_logged("lazyfs::cache-checkpoint", &["checkpoint is done."])
            .map(|_| ())
    }

    /// What a power cut now would lose (`lazyfs::unsynced-data-report`, read from its log).
    pub fn unsynced(&mut self) -> Result<Unsynced, String> {
        let lines = self.command_logged(
            "lazyfs::unsynced-data-report",
            &[
                "report: all data blocks are synced!",
                "report: total number of bytes un-fsynced:",
            ],
        )?;
        Ok(parse_report(&lines))
    }

    /// True while its process runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Unmounts it and ends its process, whatever state it is in: `fusermount3 -u`, then
    /// (busy, or past its deadline) a lazy unmount; its process gets the same deadline to
    /// exit, then SIGKILL. Idempotent; called on drop. Its cache is dropped, not written
    /// back: what was not fsynced is lost as by a power cut.
    pub fn stop(&mut self) {
        if mounted(&self.mount).is_some_and(|t| t.starts_with("fuse")) {
            let ok = succeeds(
                Command::new("fusermount3").arg("-u").arg(&self.mount),
                STOP_LIMIT,
            ) || succeeds(Command::new("umount").arg(&self.mount), STOP_LIMIT);
            if !ok {
                succeeds(
                    Command::new("umount").arg("-l").arg(&self.mount),
                    STOP_LIMIT,
                );
            }
        }
        if let Some(mut child) = self.child.take()
            && wait_bounded(&mut child, STOP_LIMIT).is_none()
        {
            let _ = child.kill();
            let _ = wait_bounded(&mut child, STOP_LIMIT);
        }
        // Its process gone with the mount still there (it was killed): a dead FUSE mount.
        if mounted(&self.mount).is_some_and(|t| t.starts_with("fuse")) {
            succeeds(
                Command::new("umount").arg("-l").arg(&self.mount),
                STOP_LIMIT,
            );
        }
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Writes one command into the command FIFO (one write: LazyFS reads a command per
    /// read, so commands are sent one at a time, each after the last one finished).
    fn send(&mut self, command: &str) -> Result<(), String> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.commands)
            .map_err(|e| format!("LazyFS is not reading commands ({e}): {}", self.state_of()))?;
        f.write_all(format!("{command}\n").as_bytes())
            .map_err(|e| format!("cannot send {command} to LazyFS: {e}"))
    }

    /// Sends `command` and waits for one of `ends` in the log lines after it; those lines.
    fn command_logged(&mut self, command: &str, ends: &[&str]) -> Result<Vec<String>, String> {
        let from = self.log_text().len();
        self.send(command)?;
        let end = Instant::now() + COMMAND_LIMIT;
        loop {
            let text = self.log_text();
            let new = text.get(from..).unwrap_or("");
            if let Some(at) = new.find(&format!("received '{command}'")) {
                let lines: Vec<String> = new[at..].lines().map(str::to_string).collect();
                if lines.iter().any(|l| ends.iter().any(|e| l.contains(e))) {
                    return Ok(lines);
                }
            }
            if Instant::now() >= end {
                return Err(format!(
                    "LazyFS did not finish {command} within {COMMAND_LIMIT:?}: {}",
                    self.state_of()
                ));
            }
            if !self.running() {
                return Err(format!(
                    "LazyFS ended during {command}: {}",
                    self.state_of()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether it runs (or how it ended) and the last lines of its output, for an error.
    fn state_of(&mut self) -> String {
        let status = match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => "it runs".to_string(),
            Some(Ok(Some(s))) => format!("it exited ({s})"),
            _ => "it is not running".to_string(),
        };
        let out = std::fs::read_to_string(&self.output).unwrap_or_default();
        format!("{status}; its output ends: {}", tail(&out, 4))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Discards anything left on the completion FIFO.
    fn drain_done(&mut self) {
        let mut buf = [0u8; 256];
        while self.done.read(&mut buf).is_ok_and(|n| n > 0) {}
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Makes a FIFO at `path` (one already there is kept).
fn make_fifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    #[allow(unsafe_code)]
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0;
    if made {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        Ok(())
    } else {
        Err(e)
    }
}

/// The files and bytes of an unsynced-data report, from its log lines:
/// `report: [inode N] => file: 'PATH'` and `report: total number of bytes un-fsynced: N bytes.`
fn parse_report(lines: &[String]) -> Unsynced {
    let mut u = Unsynced::default();
    for l in lines {
        if let Some(at) = l.find("] => file: '") {
            let path = &l[at + "] => file: '".len()..];
            u.files
                .push(PathBuf::from(path.strip_suffix('\'').unwrap_or(path)));
        } else if let Some(at) = l.find("total number of bytes un-fsynced: ") {
            let n = &l[at + "total number of bytes un-fsynced: ".len()..];
            u.bytes = n
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
    }
    u.files.sort();
    u.files.dedup();
    u
}

/// The last `n` lines of `text`, on one line.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_files_and_bytes() {
        let log = "\
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.faults.worker]: received 'lazyfs::unsynced-data-report'
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: [inode 10043980] is not fully synced, info:
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: [inode 10043980] info: (block 0) to (block 0) [byte index 0 to index 2]
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: [inode 10043980] files mapped to this inode:
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: [inode 10043980] => file: '/tmp/r/b'
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: [inode 10043981] => file: '/tmp/r/a'
[2026-11-28 12:53:30.866] [global] [info] [lazyfs.cmds]: report: total number of bytes un-fsynced: 3 bytes.";
        let lines: Vec<String> = log.lines().map(str::to_string).collect();
        assert_eq!(
            parse_report(&lines),
            Unsynced {
                files: vec!["/tmp/r/a".into(), "/tmp/r/b".into()],
                bytes: 3
            }
        );
        let synced = vec!["... [lazyfs.cmds]: report: all data blocks are synced!".to_string()];
        assert_eq!(parse_report(&synced), Unsynced::default());
    }
}
