//! The exact CPU of what mailbench started: a cgroup of its own (the unified hierarchy,
//! cgroup v2) below the one it runs in, into which the watched processes that live in
//! mailbench's own cgroup (a lab it started; never a service the system started) are
//! moved while a run watches them. Their children are born in it. The kernel counts a
//! cgroup's CPU as it is used, to the microsecond: a server's processes that reap children
//! (qmail's `qmail-smtpd` reaping a `qmail-queue` per message) are counted when their
//! children run, not when they exit (`/proc`'s cutime is rounded down to a tick and shows
//! a child only once it is reaped), and a process that leaves the tree (reparented,
//! reaped without a wait) is still counted.
//!
//! It is made only where it changes nothing else: a cgroup with no controller enabled for
//! its children (`cgroup.subtree_control` empty) gives a child of it no limit, weight or
//! accounting of its own beyond the counts read here. Elsewhere (no unified hierarchy, a
//! cgroup that enables controllers, no permission) the tree is read from `/proc` alone.
//! The processes go back to mailbench's cgroup and the cgroup is removed when the watch
//! ends.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The watch's cgroup.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    /// mailbench's own cgroup: where the processes come from and go back to.
    home: PathBuf,
    /// mailbench's own cgroup's path, as `/proc/PID/cgroup` names it.
    home_name: String,
}

impl Cgroup {
    /// A new cgroup below mailbench's own; `None` where one cannot be made without
    /// changing how the processes are scheduled, or at all.
    pub fn new() -> Option<Cgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let root = unified_mount(&mountinfo)?;
        let home_name = unified_path(&std::fs::read_to_string("/proc/self/cgroup").ok()?)?;
        let home = root.join(home_name.trim_start_matches('/'));
        let controllers = std::fs::read_to_string(home.join("cgroup.subtree_control")).ok()?;
        if !controllers.trim().is_empty() {
            return None;
        }
        remove_stale(&home);
        let dir = home.join(format!("mailbench-{}-watch", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        // The counts this module reads; a kernel without them has nothing to give.
        if !dir.join("cpu.stat").exists() {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Cgroup {
            dir,
            home,
            home_name,
        })
    }

    /// Moves those of `pids` that live in mailbench's own cgroup into this one (with
    /// every thread; the children they have from then on are born in it). A process that
    /// ended meanwhile needs no move.
    pub fn adopt(&self, pids: &[u32]) {
        let members = self.members();
        for pid in pids {
            if members.contains(pid) {
                continue;
            }
            let here = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .ok()
                .and_then(|c| unified_path(&c));
            if here.as_deref() == Some(self.home_name.as_str()) {
                let _ = std::fs::write(self.dir.join("cgroup.procs"), pid.to_string());
            }
        }
    }

    /// Whether process `pid` is in it now (a child born to one of its processes is).
    pub fn holds(&self, pid: u32) -> bool {
        let name = format!(
            "{}/{}",
            self.home_name.trim_end_matches('/'),
            self.dir
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        );
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|c| unified_path(&c))
            .is_some_and(|p| p == name)
    }

    /// The processes in it now.
    pub fn members(&self) -> HashSet<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// The CPU seconds its processes have used in it: (all, system).
    pub fn cpu_s(&self) -> Option<(f64, f64)> {
        cpu_stat(&std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Children born in it while it empties come back on the next round.
        let home = self.home.join("cgroup.procs");
        for _ in 0..20 {
            let members = self.members();
            if members.is_empty() && std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            for pid in members {
                let _ = std::fs::write(&home, pid.to_string());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Where the unified hierarchy (cgroup2) is mounted.
fn unified_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let dash = f.iter().position(|x| *x == "-")?;
        let mount = f.get(4)?;
        (f.get(dash + 1) == Some(&"cgroup2")).then(|| PathBuf::from(mount))
    })
}

/// A process's cgroup on the unified hierarchy, from its `/proc/PID/cgroup` (`0::PATH`).
fn unified_path(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

/// CPU seconds (all, system) from a `cpu.stat`: `usage_usec` is exact, `system_usec` the
/// kernel's split of it by its ticks.
fn cpu_stat(text: &str) -> Option<(f64, f64)> {
    let field = |name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?
            .trim()
            .parse::<f64>()
            .ok()
    };
    let all = field("usage_usec")? / 1e6;
    let sys = field("system_usec").unwrap_or(0.0) / 1e6;
    Some((all, sys.min(all)))
}

/// Removes the watch cgroups of runs that ended without removing theirs (a run killed
/// outright); one still in use holds processes and stays.
fn remove_stale(home: &Path) {
    let Ok(rd) = std::fs::read_dir(home) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("mailbench-")
            .and_then(|r| r.strip_suffix("-watch"))
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unified_hierarchy_and_a_processs_place_in_it_are_read() {
        let info = "24 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw
35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
36 24 0:31 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct";
        assert_eq!(
            unified_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(unified_mount("36 24 0:31 / /x rw - cgroup cgroup rw"), None);
        assert_eq!(
            unified_path("2:cpuacct:/\n0::/user.slice/session-1.scope\n"),
            Some("/user.slice/session-1.scope".into())
        );
        assert_eq!(unified_path("2:cpuacct:/\n"), None);
    }

    #[test]
    fn cpu_stat_gives_the_exact_usage_and_the_system_share() {
        let text = "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnice_usec 0\n";
        assert_eq!(cpu_stat(text), Some((1.5, 0.5)));
        assert_eq!(cpu_stat("user_usec 5\n"), None);
    }

    #[test]
    fn a_child_process_is_counted_as_it_runs_and_goes_back_when_the_watch_ends() {
        // Made exactly where it changes nothing: the unified hierarchy is mounted and this
        // process's cgroup enables no controller for its children (tests run as root).
        let quiet = (|| {
            let root = unified_mount(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)?;
            let home = unified_path(&std::fs::read_to_string("/proc/self/cgroup").ok()?)?;
            let ctl = std::fs::read_to_string(
                root.join(home.trim_start_matches('/'))
                    .join("cgroup.subtree_control"),
            )
            .ok()?;
            Some(ctl.trim().is_empty())
        })()
        .unwrap_or(false);
        let cg = Cgroup::new();
        assert_eq!(
            cg.is_some(),
            quiet,
            "a watch cgroup where the unified hierarchy lets one be made unchanged, none elsewhere"
        );
        let Some(cg) = cg else {
            return;
        };
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .expect("sh");
        cg.adopt(&[child.id()]);
        assert!(cg.members().contains(&child.id()), "{cg:?}");
        assert!(cg.holds(child.id()) && !cg.holds(std::process::id()));
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let (all, sys) = cg.cpu_s().expect("cpu.stat");
        let dir = cg.dir.clone();
        drop(cg);
        let home = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id()))
            .ok()
            .and_then(|c| unified_path(&c));
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            all > 0.05 && sys <= all,
            "the loop's CPU: {all} s ({sys} s system)"
        );
        assert!(!dir.exists(), "the watch's cgroup is removed");
        assert_eq!(
            home,
            unified_path(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default()),
            "the child is back in this process's cgroup"
        );
    }
}
