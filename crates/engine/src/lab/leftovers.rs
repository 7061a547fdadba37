//! Labs whose owner died: every lab directory carries an owner record (`owner`: the pid
//! and start time of the mailbench process that made it), so that a lab left behind by a
//! `kill -9` — its servers still running, its tmpfs still mounted, its directory still in
//! /tmp — can be told from a lab that another run on this machine is using right now.
//! [`sweep`] cleans only the first kind; a lab without a record (made by an older
//! mailbench) or whose owner is alive is never touched. Called before every lab-using
//! command and by `mailbench doctor`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The owner record's file name in a lab directory.
pub const OWNER_FILE: &str = "owner";
/// The prefix of every lab directory (in the temporary directory and in /dev/shm).
pub const PREFIX: &str = "mailbench-lab-";

/// A process, as the owner record names it: its pid and its start time (clock ticks
/// after boot), so that a pid reused by another process is not taken for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The process id.
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat`.
    pub started: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner {
            pid,
            started: start_time(pid)?,
        })
    }

    /// True while the process runs (a zombie has died; a reused pid is another process).
    pub fn alive(&self) -> bool {
        running(self.pid) && start_time(self.pid) == Some(self.started)
    }

    fn parse(text: &str) -> Option<Owner> {
        let mut f = text.split_whitespace();
        Some(Owner {
            pid: f.next()?.parse().ok()?,
            started: f.next()?.parse().ok()?,
        })
    }
}

/// Has `cmd` run in a process group of its own: a Ctrl-C at the terminal goes to the
/// whole foreground group, and a lab's servers and stop commands (`postfix stop`,
/// `doveadm stop`) must not die of it — the lab stops them itself, in order.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    std::os::unix::process::CommandExt::process_group(cmd, 0)
}

/// Writes the owner record into a lab directory just made.
pub fn claim(dir: &Path) -> std::io::Result<()> {
    let me = Owner::me().ok_or_else(|| std::io::Error::other("cannot read /proc/self/stat"))?;
    std::fs::write(dir.join(OWNER_FILE), format!("{} {}\n", me.pid, me.started))
}

/// The fields of `/proc/PID/stat` after the command name (state first).
fn stat_after_name(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn start_time(pid: u32) -> Option<u64> {
    // Field 22 overall; the 20th after the name (state is field 3).
    stat_after_name(pid)?.get(19)?.parse().ok()
}

/// A process that exists and is not a zombie.
pub(super) fn running(pid: u32) -> bool {
    stat_after_name(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z" && s != "X"))
}

/// What [`sweep`] did for the labs of one dead owner.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Cleaned {
    processes: usize,
    mounts: usize,
    dirs: Vec<PathBuf>,
}

/// Cleans every lab whose owner process is dead: stops the processes that run from its
/// directory (and their children), unmounts what is mounted under it, removes it. One
/// line per dead owner says what was done; none when there was nothing to clean.
pub fn sweep() -> Vec<String> {
    sweep_in(&[std::env::temp_dir(), PathBuf::from("/dev/shm")])
}

/// [`sweep`] over the lab directories in `roots`.
pub fn sweep_in(roots: &[PathBuf]) -> Vec<String> {
    let mut dead: BTreeMap<u32, Cleaned> = BTreeMap::new();
    for dir in orphans(roots) {
        let Some(owner) = std::fs::read_to_string(dir.join(OWNER_FILE))
            .ok()
            .and_then(|t| Owner::parse(&t))
        else {
            continue;
        };
        let c = dead.entry(owner.pid).or_default();
        c.processes += stop_processes(&dir);
        c.mounts += unmount_below(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        c.dirs.push(dir);
    }
    dead.into_iter()
        .map(|(pid, c)| {
            let dirs: Vec<String> = c.dirs.iter().map(|d| d.display().to_string()).collect();
            let n = |k: usize, one: &str, many: &str| {
                format!("{k} {}", if k == 1 { one } else { many })
            };
            format!(
                "cleaned up a lab left by mailbench process {pid}, which is gone: stopped {}, unmounted {}, removed {}",
                n(c.processes, "process", "processes"),
                n(c.mounts, "file system", "file systems"),
                dirs.join(", ")
            )
        })
        .collect()
}

/// Lab directories in `roots` with an owner record whose process is dead.
fn orphans(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        let Ok(rd) = std::fs::read_dir(root) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            if !name.to_string_lossy().starts_with(PREFIX)
                || !e.file_type().is_ok_and(|t| t.is_dir())
            {
                continue;
            }
            let record = std::fs::read_to_string(e.path().join(OWNER_FILE)).ok();
            if record
                .as_deref()
                .and_then(Owner::parse)
                .is_some_and(|o| !o.alive())
            {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Processes that run from `dir`: its path in their command line, their working
/// directory or their root below it (Postfix's daemons work in the queue directory,
/// Dovecot's login processes are chrooted below it, Exim and Dovecot name their
/// configuration), with all their descendants.
pub fn processes_of(dir: &Path) -> Vec<u32> {
    let d = dir.display().to_string();
    let me = std::process::id();
    let under = |link: PathBuf| {
        std::fs::read_link(link).is_ok_and(|p| {
            let p = p.display().to_string();
            p == d || p.starts_with(&format!("{d}/")) || p.starts_with(&format!("{d} "))
        })
    };
    let mut roots = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let names = cmd.contains(&format!("{d}/")) || cmd.contains(&format!("{d} "));
            if names || under(e.path().join("cwd")) || under(e.path().join("root")) {
                roots.push(pid);
            }
        }
    }
    crate::stats::sut::descendants(&roots)
        .into_iter()
        .filter(|p| *p != me && running(*p))
        .collect()
}

/// Stops the processes of `dir`: SIGTERM, up to 5 s to go, then SIGKILL. How many there
/// were. A lab's own stop ends with it, so that no server outlives its directory even
/// when the server's stop command was cut short.
pub fn stop_processes(dir: &Path) -> usize {
    end(&[dir], &[], Duration::from_secs(5))
}

/// The forced end of a lab: every process of the trees rooted at `roots` (taken before
/// its stop command ran: a master's children, whatever they became) and every process
/// that runs from one of `dirs` gets SIGTERM, and SIGCONT so that a stopped one takes it;
/// those still there after `grace` get SIGKILL, and so do any started meanwhile (a
/// master respawning one). How many there were.
pub fn end(dirs: &[&Path], roots: &[u32], grace: Duration) -> usize {
    let find = || {
        let mut pids = crate::stats::sut::descendants(roots);
        for d in dirs {
            pids.extend(processes_of(d));
        }
        let me = std::process::id();
        pids.retain(|p| *p != me && running(*p));
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    let pids = find();
    signal(&pids, "TERM");
    signal(&pids, "CONT");
    let deadline = Instant::now() + grace;
    while pids.iter().any(|p| running(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&pids, "KILL");
    // Children started while the others went (a Postfix master respawning one).
    let late = find();
    signal(&late, "KILL");
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().chain(&late).any(|p| running(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    pids.len() + late.iter().filter(|p| !pids.contains(p)).count()
}

/// Sends `sig` (a name `kill` knows) to those of `pids` still running.
pub(super) fn signal(pids: &[u32], sig: &str) {
    let live: Vec<String> = pids
        .iter()
        .filter(|p| running(**p))
        .map(u32::to_string)
        .collect();
    if !live.is_empty() {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .args(&live)
            .output();
    }
}

/// Unmounts every mount point at or below `dir`, deepest first (lazily when busy). How
/// many there were.
fn unmount_below(dir: &Path) -> usize {
    let d = dir.display().to_string();
    let mut points: Vec<String> = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(unescape)
        .filter(|p| *p == d || p.starts_with(&format!("{d}/")))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for p in &points {
        let ok = Command::new("umount")
            .arg(p)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            let _ = Command::new("umount").args(["-l", p]).output();
        }
    }
    points.len()
}

/// A mount point as /proc/mounts writes it, with `\040` and the like decoded.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_alive_only_with_its_start_time() {
        let me = Owner::me().expect("read /proc/self/stat");
        assert!(me.alive());
        let reused = Owner {
            started: me.started + 1,
            ..me
        };
        assert!(
            !reused.alive(),
            "a pid with another start time is another process"
        );
        assert_eq!(
            Owner::parse(&format!("{} {}\n", me.pid, me.started)),
            Some(me)
        );
        assert_eq!(Owner::parse("x"), None);
    }

    #[test]
    fn only_a_dead_owner_s_lab_is_removed() {
        let root = std::env::temp_dir().join(format!("mailbench-sweep-{}", fastrand::u64(..)));
        let (live, dead, unowned) = (
            root.join(format!("{PREFIX}live")),
            root.join(format!("{PREFIX}dead")),
            root.join(format!("{PREFIX}old")),
        );
        for d in [&live, &dead, &unowned] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        claim(&live).expect("claim");
        // A child that has exited and been reaped: its pid is dead.
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        let _ = child.wait();
        std::fs::write(dead.join(OWNER_FILE), format!("{pid} 1\n")).expect("write");
        let said = sweep_in(std::slice::from_ref(&root));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(&format!(
                "cleaned up a lab left by mailbench process {pid}, which is gone: stopped 0 processes, unmounted 0 file systems, removed {}",
                dead.display()
            )),
            "{said:?}"
        );
        assert!(!dead.exists());
        assert!(live.exists(), "a live owner's lab stays");
        assert!(unowned.exists(), "a lab without a record stays");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn mount_points_are_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/tmp/plain"), "/tmp/plain");
    }
}
