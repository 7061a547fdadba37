//! Counting a tracefs text trace: each line is one event the kernel recorded for the traced
//! process tree, and the counts are what `--trace-io` reports. Kept apart from the tracefs
//! plumbing so the parsing is tested on known lines without root.

use std::collections::HashSet;

use serde::Serialize;

/// What a process tree did, counted from the kernel's syscall and scheduler tracepoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IoCounts {
    /// fsync, fdatasync and sync_file_range calls: the forced writes to stable storage.
    pub fsyncs: u64,
    /// open, openat and creat calls asking for O_CREAT (creat always does) that succeeded.
    pub files_created: u64,
    /// rename, renameat and renameat2 calls that succeeded.
    pub renames: u64,
    /// unlink and unlinkat calls that succeeded.
    pub unlinks: u64,
    /// Bytes the write family (write, writev, pwrite64, pwritev, pwritev2) wrote, to files,
    /// pipes and sockets alike.
    pub bytes_written: u64,
    /// Times one of the tree's tasks was switched off a CPU.
    pub context_switches: u64,
    /// Tasks the tree started during the trace (processes and threads).
    pub forks: u64,
    /// Events the kernel dropped with its buffer full: the counts are short by as many.
    pub lost: u64,
}

/// Counts events of a trace in the order the kernel wrote them, knowing which tasks belong
/// to the tree: the syscall events are filtered to it in the kernel, but a context switch
/// is recorded when either side belongs to it, so the switched-off side is checked here.
#[derive(Debug, Default)]
pub struct Tally {
    /// The tree's task ids: those at the start and every one forked since.
    tree: HashSet<u32>,
    /// Tasks inside an open with O_CREAT: its exit says whether it succeeded (an exit
    /// carries no flags, and a task's entry and exit are next to each other in its events).
    creating: HashSet<u32>,
    /// The counts so far.
    pub counts: IoCounts,
}

impl Tally {
    /// A tally for a tree whose tasks at the start are `tasks`.
    pub fn new(tasks: impl IntoIterator<Item = u32>) -> Self {
        Tally {
            tree: tasks.into_iter().collect(),
            ..Tally::default()
        }
    }

    /// Counts one line of `trace_pipe` (comment lines and unknown events count nothing).
    /// Renames and unlinks count on their exit, filtered in the kernel to successes, so a
    /// file that was not there (Postfix removes a message's defer and bounce logs whether
    /// or not it has any) is not counted as removed.
    pub fn line(&mut self, line: &str) {
        let Some((task, event, rest)) = event_of(line) else {
            return;
        };
        let exit = returned(rest);
        let c = &mut self.counts;
        match (event, exit) {
            ("sys_fsync" | "sys_fdatasync" | "sys_sync_file_range", None) => c.fsyncs += 1,
            ("sys_open" | "sys_openat", None) => {
                self.creating.insert(task);
            }
            ("sys_open" | "sys_openat", Some(ret)) => {
                // The entry is forgotten whatever the outcome.
                let created = self.creating.remove(&task) && ret >= 0;
                c.files_created += u64::from(created);
            }
            ("sys_creat", Some(_)) => c.files_created += 1,
            ("sys_rename" | "sys_renameat" | "sys_renameat2", Some(_)) => c.renames += 1,
            ("sys_unlink" | "sys_unlinkat", Some(_)) => c.unlinks += 1,
            (
                "sys_write" | "sys_writev" | "sys_pwrite64" | "sys_pwritev" | "sys_pwritev2",
                Some(ret),
            ) => c.bytes_written += ret.max(0) as u64,
            ("sched_switch:", _) => {
                let ours = field(rest, "prev_pid=").is_some_and(|p| self.tree.contains(&p));
                c.context_switches += u64::from(ours);
            }
            ("sched_process_fork:", _) => {
                if let Some(child) = field(rest, "child_pid=") {
                    self.tree.insert(child);
                    c.forks += 1;
                }
            }
            _ => {}
        }
    }
}

/// The event's task, name and what follows the name: a line is
/// `COMM-PID [CPU] FLAGS TIMESTAMP: EVENT…`, where COMM may hold spaces and brackets, so
/// the name is found after the `[CPU]` column. A syscall entry reads `sys_fsync(fd: 0x5)`,
/// its exit `sys_write -> 0x5`, other events `sched_switch: prev_comm=…`.
fn event_of(line: &str) -> Option<(u32, &str, &str)> {
    line.match_indices("] ").find_map(|(i, _)| {
        let open = line[..i].rfind('[')?;
        let cpu = &line[open + 1..i];
        if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let task = line[..open].trim_end().rsplit_once('-')?.1.parse().ok()?;
        // The timestamp is right-aligned: before the machine is 10,000 s up, more than
        // one space comes before it.
        let (_flags, rest) = line[i + 2..].trim_start().split_once(' ')?;
        let (ts, body) = rest.trim_start().split_once(' ')?;
        ts.strip_suffix(':')?.parse::<f64>().ok()?;
        let body = body.trim_start();
        let end = body.find(['(', ' ']).unwrap_or(body.len());
        Some((task, &body[..end], &body[end..]))
    })
}

/// A syscall exit's return value (`sys_write -> 0x1f`; an error is negative, printed as
/// its two's complement), `None` for anything else.
fn returned(rest: &str) -> Option<i64> {
    let hex = rest.trim().strip_prefix("->")?.trim().strip_prefix("0x")?;
    u64::from_str_radix(hex, 16).ok().map(|v| v as i64)
}

/// The number after `key` (`prev_pid=` in a scheduler event).
fn field(rest: &str, key: &str) -> Option<u32> {
    let at = rest.find(key)? + key.len();
    let digits: String = rest[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
# tracer: nop
         python3-8631    [000] ..... 14830.837303: sys_openat(dfd: 0xffffff9c, filename: 0x55afb7630080, flags: 0x241, mode: 0x1b6)
         python3-8631    [000] ..... 14830.837304: sys_openat -> 0x3
         python3-8631    [000] ..... 14830.837305: sys_openat(dfd: 0xffffff9c, filename: 0x55afb7630080, flags: 0xc1, mode: 0x1b6)
         python3-8631    [000] ..... 14830.837306: sys_openat -> 0xffffffffffffffef
         python3-8631    [000] ..... 14830.837307: sys_openat -> 0x4
         python3-8631    [000] ..... 14830.837341: sys_write -> 0xed
         python3-8631    [000] ..... 14830.837342: sys_fsync(fd: 0x3)
         python3-8631    [000] ..... 14830.837343: sys_fdatasync(fd: 0x3)
         python3-8631    [000] ..... 14830.837344: sys_renameat2 -> 0x0
         python3-8631    [000] ..... 14830.837345: sys_unlink -> 0x0
         python3-8631    [000] ..... 14830.837443: sched_process_fork: comm=bash pid=8631 child_comm=bash child_pid=8634
            bash-8634    [000] ..... 14830.837606: sys_writev -> 0x12
            bash-8634    [000] d..2. 14830.837730: sched_switch: prev_comm=bash prev_pid=8634 prev_prio=120 prev_state=Z ==> next_comm=bash next_pid=8631 next_prio=120
 lto f2kbtfmkd60-8620    [000] d..2. 14830.846487: sched_switch: prev_comm=lto f2kbtfmkd60 prev_pid=8620 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=8636 next_prio=120
 odd [7] name-9    [001] d..2. 14830.846488: sched_switch: prev_comm=odd [7] name prev_pid=8631 prev_prio=120 prev_state=S ==> next_comm=x next_pid=1 next_prio=120
";

    #[test]
    fn every_event_of_the_tree_counts_once_and_switches_of_others_do_not() {
        let mut t = Tally::new([8631]);
        TRACE.lines().for_each(|l| t.line(l));
        assert_eq!(
            t.counts,
            IoCounts {
                fsyncs: 2,
                files_created: 1,
                renames: 1,
                unlinks: 1,
                bytes_written: 0xed + 0x12,
                context_switches: 2,
                forks: 1,
                lost: 0,
            }
        );
    }

    #[test]
    fn a_comm_with_spaces_or_brackets_does_not_hide_the_event() {
        let line = " a b] [c-1    [001] d..2. 1.5: sys_fsync(fd: 0x3)";
        assert_eq!(event_of(line).map(|e| (e.0, e.1)), Some((1, "sys_fsync")));
    }

    #[test]
    fn a_timestamp_padded_to_its_column_is_read() {
        // As a kernel up for less than 10,000 s prints it (seen on Linux 6.18).
        let line = "         python3-30658   [000] .....  8208.155975: sys_fsync(fd: 3)";
        assert_eq!(
            event_of(line).map(|e| (e.0, e.1)),
            Some((30658, "sys_fsync"))
        );
        let exit = "   python3-30658   [001] .....   812.5: sys_write -> 0x1";
        assert_eq!(
            event_of(exit).map(|e| (e.1, returned(e.2))),
            Some(("sys_write", Some(1)))
        );
    }
}
