//! `relay --trace-io`: what the system under test's processes asked of the kernel per
//! delivered message (fsyncs, files created, renamed and unlinked, bytes written, context
//! switches), counted from the kernel's own tracepoints so nothing in the MTA changes.
//!
//! A private tracefs instance records the events, restricted by the kernel to the traced
//! tree (`set_event_pid` with `event-fork`: every task the tree forks is traced from its
//! first instruction, nothing else is), and a thread here reads and counts them as they
//! come. mailbench's own processes, and the commands it runs, are not in that tree. The
//! kernel's histogram triggers would count without the reader, but this kernel, like
//! many, is built without them (`CONFIG_HIST_TRIGGERS`); plain events work on every
//! kernel with syscall tracepoints. The trace's lines are counted in `events`, apart from
//! the tracefs plumbing, so the parsing is tested on known lines without root.

mod events;

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

pub use events::IoCounts;
use events::Tally;

/// Where tracefs is mounted (and mounted for the run when it is not).
const TRACEFS: &str = "/sys/kernel/tracing";

/// The events counted, with the kernel-side filter each needs: only opens that may create
/// (O_CREAT is 0o100; their exits say whether they did), only renames, unlinks and writes
/// that succeeded. Events a kernel lacks (`open` and
/// `rename` are absent on some architectures) are skipped.
const EVENTS: &[(&str, &str)] = &[
    ("syscalls/sys_enter_fsync", ""),
    ("syscalls/sys_enter_fdatasync", ""),
    ("syscalls/sys_enter_sync_file_range", ""),
    ("syscalls/sys_enter_open", "flags & 64"),
    ("syscalls/sys_exit_open", ""),
    ("syscalls/sys_enter_openat", "flags & 64"),
    ("syscalls/sys_exit_openat", ""),
    ("syscalls/sys_exit_creat", "ret >= 0"),
    ("syscalls/sys_exit_rename", "ret == 0"),
    ("syscalls/sys_exit_renameat", "ret == 0"),
    ("syscalls/sys_exit_renameat2", "ret == 0"),
    ("syscalls/sys_exit_unlink", "ret == 0"),
    ("syscalls/sys_exit_unlinkat", "ret == 0"),
    ("syscalls/sys_exit_write", "ret > 0"),
    ("syscalls/sys_exit_writev", "ret > 0"),
    ("syscalls/sys_exit_pwrite64", "ret > 0"),
    ("syscalls/sys_exit_pwritev", "ret > 0"),
    ("syscalls/sys_exit_pwritev2", "ret > 0"),
    ("sched/sched_switch", ""),
    ("sched/sched_process_fork", ""),
];

/// Traces started by this process: each has its own instance (tests run several at once).
static TRACES: AtomicU64 = AtomicU64::new(0);

/// A trace under way; dropping it stops it and removes everything it set up.
pub struct IoTrace {
    /// The private tracefs instance.
    instance: PathBuf,
    /// tracefs was mounted for this trace (unmounted when it ends).
    mounted: bool,
    /// Tells the reader the events are off: read what is left, then stop.
    stop: Arc<AtomicBool>,
    /// The reader, counting as it reads.
    reader: Option<JoinHandle<Result<Tally, String>>>,
}

/// Whether this process can trace at all, or the one line saying why not: checked before a
/// run starts anything.
pub fn available() -> Result<(), String> {
    let supported = fs::read_to_string("/proc/filesystems")
        .map(|f| f.lines().any(|l| l.ends_with("\ttracefs")))
        .unwrap_or(false);
    if !supported || !Path::new(TRACEFS).is_dir() {
        return Err(format!(
            "--trace-io: this kernel has no tracefs ({TRACEFS}): nothing can count the MTA's syscalls"
        ));
    }
    if !root() {
        return Err("--trace-io needs root: tracing the MTA's syscalls mounts tracefs and reads kernel events".into());
    }
    Ok(())
}

impl IoTrace {
    /// Starts counting what the tasks of `roots`' process trees (and everything they start
    /// from now on) do.
    pub fn start(roots: &[u32]) -> Result<IoTrace, String> {
        available()?;
        let tasks = tree_tasks(roots);
        if tasks.is_empty() {
            return Err("--trace-io: the MTA has no running process to trace".into());
        }
        let mounted = if mounted() {
            false
        } else {
            run("mount", &["-t", "tracefs", "nodev", TRACEFS])?;
            true
        };
        let instance = Path::new(TRACEFS).join("instances").join(format!(
            "mailbench-{}-{}",
            std::process::id(),
            TRACES.fetch_add(1, Ordering::Relaxed)
        ));
        let mut trace = IoTrace {
            instance: instance.clone(),
            mounted,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
        };
        let _ = fs::remove_dir(&instance);
        fs::create_dir(&instance).map_err(|e| refusal(&instance, &e))?;
        trace.set("buffer_size_kb", "4096")?;
        let list: Vec<String> = tasks.iter().map(u32::to_string).collect();
        trace.set("set_event_pid", &list.join(" "))?;
        trace.set("options/event-fork", "1")?;
        for (event, filter) in EVENTS {
            if !instance.join("events").join(event).is_dir() {
                continue;
            }
            if !filter.is_empty() {
                trace.set(&format!("events/{event}/filter"), filter)?;
            }
            trace.set(&format!("events/{event}/enable"), "1")?;
        }
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))
            .map_err(|e| refusal(&instance, &e))?;
        let stop = trace.stop.clone();
        trace.reader = Some(std::thread::spawn(move || read(pipe, tasks, &stop)));
        Ok(trace)
    }

    /// Stops the trace and gives the counts: the events are switched off first, so
    /// whatever the kernel recorded until then is read and counted.
    pub fn finish(mut self) -> Result<IoCounts, String> {
        let _ = fs::write(self.instance.join("events/enable"), "0");
        self.stop.store(true, Ordering::Relaxed);
        let tally = match self.reader.take().map(JoinHandle::join) {
            Some(Ok(t)) => t?,
            _ => return Err("--trace-io: the trace reader failed".into()),
        };
        let mut counts = tally.counts;
        counts.lost = self.overruns();
        Ok(counts)
    }

    /// Writes one tracefs setting of the instance.
    fn set(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.instance.join(file);
        fs::write(&path, value).map_err(|e| refusal(&path, &e))
    }

    /// Events the kernel dropped because the buffer was full (the counts are short by so
    /// many).
    fn overruns(&self) -> u64 {
        let Ok(cpus) = fs::read_dir(self.instance.join("per_cpu")) else {
            return 0;
        };
        cpus.flatten()
            .filter_map(|c| fs::read_to_string(c.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("overrun:")?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for IoTrace {
    fn drop(&mut self) {
        let _ = fs::write(self.instance.join("events/enable"), "0");
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let _ = fs::remove_dir(&self.instance);
        if self.mounted {
            let _ = run("umount", &[TRACEFS]);
        }
    }
}

/// Reads the instance's events as they come and counts them, until told the events are
/// off and nothing is left to read.
fn read(mut pipe: fs::File, tasks: Vec<u32>, stop: &AtomicBool) -> Result<Tally, String> {
    let mut tally = Tally::new(tasks);
    let mut buf = vec![0u8; 1 << 16];
    let mut partial: Vec<u8> = Vec::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                partial.extend_from_slice(&buf[..n]);
                if let Some(end) = partial.iter().rposition(|&b| b == b'\n') {
                    String::from_utf8_lossy(&partial[..end])
                        .lines()
                        .for_each(|l| tally.line(l));
                    partial.drain(..=end);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("--trace-io: reading the trace: {e}")),
        }
    }
    String::from_utf8_lossy(&partial)
        .lines()
        .for_each(|l| tally.line(l));
    Ok(tally)
}

/// Every task (thread) of `roots`' trees now, mailbench's own excepted.
fn tree_tasks(roots: &[u32]) -> Vec<u32> {
    let own = std::process::id();
    crate::stats::sut::descendants(roots)
        .into_iter()
        .filter(|&p| p != own)
        .flat_map(|p| {
            fs::read_dir(format!("/proc/{p}/task"))
                .map(|d| {
                    d.flatten()
                        .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// tracefs is mounted where it is looked for.
fn mounted() -> bool {
    Path::new(TRACEFS).join("instances").is_dir()
}

/// Whether this process runs as root (tracefs lets no one else in): the effective uid,
/// from `/proc/self/status`, read here because this layer does not reach `limits`.
fn root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

/// Runs a mount command, or says in one line why tracing cannot start.
fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("--trace-io: cannot run {cmd}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "--trace-io: {cmd} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// The one line a tracefs failure gives: permission is the usual reason.
fn refusal(path: &Path, e: &std::io::Error) -> String {
    if e.kind() == ErrorKind::PermissionDenied {
        return format!(
            "--trace-io needs root: tracefs refused {}: {e}",
            path.display()
        );
    }
    format!("--trace-io: tracefs: {}: {e}", path.display())
}
