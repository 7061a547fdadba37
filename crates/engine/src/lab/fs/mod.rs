//! File systems that fail on purpose, for durability runs (issue 42): `lazyfs`, a LazyFS
//! mount whose power can be cut (every write not fsynced is dropped), and `loopfs`, a small
//! real ext4 image on a loop device that fills up (ENOSPC) and gets space back; `queue`
//! puts a lab MTA's queue on the LazyFS mount (what LazyFS cannot hold stays beside it).
//!
//! Both are disposable machinery like the labs: each runs every outside command and every
//! wait against a deadline, and each is torn down on drop whatever happened — no mount, no
//! loop device and no process left. Made inside a lab directory ([`lab_dir`], with its
//! owner record), what a run that died left of them (a LazyFS process, its mount, a loop
//! mount) is cleaned by `leftovers::sweep` like any lab: it stops the processes that name
//! the directory, unmounts what is mounted below it (a loop mount made with `-o loop`
//! frees its device on unmount) and removes it.

pub mod lazyfs;
pub mod loopfs;
pub mod queue;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use super::LabError;

/// A fresh lab directory for a file system of `tag` (`mailbench-lab-PID-TAG-RANDOM` in
/// the temporary directory, mode 755, with the owner record `leftovers` reads).
pub fn lab_dir(tag: &str) -> Result<PathBuf, LabError> {
    let dir = std::env::temp_dir().join(format!(
        "{}{}-{tag}-{}",
        super::leftovers::PREFIX,
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| super::host::io("create the lab directory", e))?;
    super::leftovers::claim(&dir)
        .map_err(|e| super::host::io("write the lab's owner record", e))?;
    super::host::set_mode(&dir, 0o755);
    Ok(dir)
}

/// The mount points in this process's mount namespace, as `/proc/self/mountinfo` lists
/// them (field 5, decoded), each with its file system type.
pub fn mounts() -> Vec<(PathBuf, String)> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let point = l.split_whitespace().nth(4)?;
            let fstype = l.split(" - ").nth(1)?.split_whitespace().next()?;
            Some((PathBuf::from(unescape(point)), fstype.to_string()))
        })
        .collect()
}

/// The file system type mounted at `point`, if something is (the topmost mount).
pub fn mounted(point: &Path) -> Option<String> {
    mounts()
        .into_iter()
        .rev()
        .find(|(p, _)| p == point)
        .map(|(_, t)| t)
}

/// A path as the kernel writes it in mount tables, with `\040` and the like decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(n) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(n);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `cmd` within `limit` (the lab's [`command::run`](super::command::run): past it,
/// what was stuck is named and killed with its process group) and requires success;
/// `Err` says what failed and its stderr.
pub fn run_ok(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let name = format!("{cmd:?}");
    let out = super::command::run(cmd, limit, &name)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{name} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `cmd` ran to a successful end within `limit` (for teardown, where a failure is
/// followed by a stronger means rather than reported).
pub fn succeeds(cmd: &mut Command, limit: Duration) -> bool {
    run_ok(cmd, limit).is_ok()
}

/// Waits up to `limit` for `child` to end; its status, or `None` while it still runs.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

/// Polls `cond` every 10 ms until it holds or `limit` passes; whether it held.
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_and_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert!(mounted(Path::new("/")).is_some(), "{:?}", mounts());
        assert_eq!(mounted(Path::new("/no/such/mount")), None);
    }
}
