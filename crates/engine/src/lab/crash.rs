//! A crash of a lab server, as issue 42's `crash` and `power-loss` faults make it: every
//! process of its tree killed at once with SIGKILL (no handler runs, nothing is flushed,
//! the page cache survives), the master first so that it respawns nothing, then the wait
//! until the kernel has reaped them all, with a deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the killed processes get to be gone (SIGKILL cannot be caught: only a
/// process stuck in the kernel, e.g. on a hung FUSE mount, takes long).
const GONE_LIMIT: Duration = Duration::from_secs(10);

/// Kills the trees rooted at the pids in `pid_files` with SIGKILL (roots first), then those
/// of the processes still working in one of `queues`, then every process left in a root's
/// session or process group, and waits until none of them runs; how
/// many were killed, or which still ran at the deadline. A delivery process an MTA forked
/// twice, so that it left the tree (Sendmail's background delivery), still works in its
/// queue and holds its messages: a crash that spared it would let it deliver from its
/// memory what the cut dropped from the disk.
pub fn kill_trees(pid_files: &[PathBuf], queues: &[&Path]) -> Result<usize, String> {
    let roots: Vec<u32> = pid_files
        .iter()
        .filter_map(|f| super::host::read_pid(f))
        .filter(|p| super::leftovers::running(*p))
        .collect();
    if roots.is_empty() {
        return Err("no process to crash: the server's master is not running".into());
    }
    let mut all = crate::stats::sut::descendants(&roots);
    for pid in roots
        .iter()
        .chain(all.iter().filter(|p| !roots.contains(p)))
    {
        kill9(*pid);
    }
    // Then those that left the tree (looked for once the tree is down, so that the cut
    // comes no later than it did without them).
    let strays: Vec<u32> = working_in(queues)
        .into_iter()
        .filter(|p| !all.contains(p))
        .collect();
    for pid in crate::stats::sut::descendants(&strays) {
        kill9(pid);
        if !all.contains(&pid) {
            all.push(pid);
        }
    }
    let end = Instant::now() + GONE_LIMIT;
    loop {
        // What the roots forked while the tree was read, orphaned by their death.
        for pid in crate::stats::sut::led_by(&roots) {
            if !all.contains(&pid) {
                kill9(pid);
                all.push(pid);
            }
        }
        let left: Vec<u32> = all
            .iter()
            .copied()
            .filter(|p| super::leftovers::running(*p))
            .collect();
        if left.is_empty() {
            return Ok(all.len());
        }
        if Instant::now() >= end {
            return Err(format!(
                "processes {left:?} still ran {GONE_LIMIT:?} after SIGKILL (stuck in the kernel?)"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The processes whose working directory is one of `dirs` or below it.
fn working_in(dirs: &[&Path]) -> Vec<u32> {
    if dirs.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
            (pid != me && dirs.iter().any(|d| cwd.starts_with(d))).then_some(pid)
        })
        .collect()
}

/// SIGKILL to `pid` (one already gone is no error).
fn kill9(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    #[allow(unsafe_code)]
    // SAFETY: kill(2) with a plain pid and signal number touches no memory of ours.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A child its parent forked and left (reparented to init when the parent exits, as
    /// when a master is killed right after a fork) is still killed: it stays in the
    /// root's process group.
    #[test]
    fn an_orphan_left_in_the_roots_group_is_killed_too() {
        let dir = std::env::temp_dir().join(format!("mailbench-crash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let orphan_file = dir.join("orphan.pid");
        // The subshell starts the orphan and exits at once; the root sleeps on.
        let mut root = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "(sleep 60 & echo $! > {}); exec sleep 60",
                orphan_file.display()
            ))
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        let pid_file = dir.join("root.pid");
        std::fs::write(&pid_file, format!("{}\n", root.id())).expect("pid file");
        let deadline = Instant::now() + Duration::from_secs(5);
        let orphan = loop {
            if let Some(p) = super::super::host::read_pid(&orphan_file) {
                break p;
            }
            assert!(Instant::now() < deadline, "the orphan never started");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            !crate::stats::sut::descendants(&[root.id()]).contains(&orphan),
            "the orphan has left the root's tree"
        );
        let killed = kill_trees(&[pid_file], &[]);
        let _ = root.wait();
        let orphan_runs = super::super::leftovers::running(orphan);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            (killed.map(|n| n >= 2), orphan_runs),
            (Ok(true), false),
            "expected the root and the orphan {orphan} killed"
        );
    }
}
