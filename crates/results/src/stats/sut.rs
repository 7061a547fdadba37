//! The system under test, observed from /proc: CPU, disk I/O, memory and process count of
//! a process tree, including children that already exited (through the parents' cutime).
//!
//! CPU is read where the kernel keeps it exactly: a process's own time from
//! `/proc/PID/schedstat` (nanoseconds its threads ran), its reaped children's from
//! `stat`'s cutime and cstime (clock ticks, exact sums rounded down once). `stat`'s own
//! utime and stime are each rounded down to a tick: summed over a tree of hundreds of
//! processes that lost up to two ticks each, and found again all at once in their parent's
//! cutime when they exit together (an SMTP server's processes at the end of an
//! injection), they read as more CPU in one interval than the machine has. What remains
//! inexact is a reaped child's share rounded away in its parent's cutime: under a tick
//! per field and per process, found again when that process itself exits.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::SutPoint;
use super::sut_cgroup::Cgroup;
use super::sut_names::ProcCpu;

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// CPU seconds (user) including reaped children: the CPU not in `sys_s`.
    pub user_s: f64,
    /// CPU seconds (system) including reaped children, as the kernel splits its ticks.
    pub sys_s: f64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// Resident memory in KiB, summed over the processes (pages they share counted in
    /// each of them: see `pss_kib`).
    pub rss_kib: u64,
    /// Proportional set size summed, KiB (`/proc/PID/smaps_rollup`'s Pss: each page
    /// shared by N processes counted 1/N in each), when it was read: the memory the tree
    /// holds, shared pages counted once.
    pub pss_kib: Option<u64>,
    /// Of `procs`, those whose CPU is their cgroup's count (mailbench's, for what it
    /// started), not /proc's.
    pub cgroup_procs: u64,
    /// What reading `pss_kib` took, seconds (a walk of every process's page tables).
    pub pss_cost_s: f64,
    /// Processes in the tree: a server that forks per connection shows its load here.
    pub procs: u64,
    /// Read calls made (`syscr`): seed 001's disk requests, as the process asks for them
    /// (the page cache may answer some without the disk).
    pub read_calls: u64,
    /// Write calls made (`syscw`).
    pub write_calls: u64,
    /// Major page faults, reaped children's included: pages the tree waited on the disk
    /// for (seed 001's paging).
    pub major_faults: u64,
    /// Resident memory backed by files or shared memory (statm's shared), summed, KiB:
    /// what processes of one server share, so the sum overstates it as RSS does.
    pub shared_kib: u64,
    /// Bytes the run's clients moved over their connections to the store, when counted
    /// (at the client: loopback keeps no per-process byte count).
    pub net: Option<NetBytes>,
}

/// Bytes into and out of the store, counted where mailbench's clients write and read
/// their connections to it (seed 001's network bytes in and out).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetBytes {
    /// Written by the clients: into the store.
    pub into_store: u64,
    /// Read by the clients: out of the store.
    pub out_of_store: u64,
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    stat_read(pid).map(|(_, f)| f)
}

/// A process's name (comm, between the first `(` and the last `)`) and the fields of its
/// `stat` after it.
fn stat_read(pid: u32) -> Option<(String, Vec<String>)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (before, after) = s.rsplit_once(')')?;
    let comm = before.split_once('(').map_or("", |(_, c)| c).to_string();
    Some((comm, after.split_whitespace().map(str::to_string).collect()))
}

/// Every process whose ancestry includes one of `roots` (roots included).
pub fn descendants(roots: &[u32]) -> Vec<u32> {
    if roots.is_empty() {
        // Nothing watched (no lab, no --sut-pid): no pass over every process in /proc
        // each interval, charged to the client's own CPU.
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut seen: HashSet<u32> = HashSet::new();
    let mut stack: Vec<u32> = roots.to_vec();
    while let Some(p) = stack.pop() {
        if seen.insert(p) {
            stack.extend(children.get(&p).into_iter().flatten());
        }
    }
    let mut v: Vec<u32> = seen.into_iter().collect();
    v.sort_unstable();
    v
}

/// Every process in a session or process group that one of `leaders` leads: where a
/// daemon's children stay when it dies. A child forked while [`descendants`] read the
/// tree is reparented to init once its parent is killed, out of the tree but still in
/// its session: four smtpd a killed Postfix master had just forked kept its listening
/// socket and its accept lock, and the restarted Postfix never greeted.
pub fn led_by(leaders: &[u32]) -> Vec<u32> {
    if leaders.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut v: Vec<u32> = rd
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let f = stat_fields(pid)?;
            let led = |i: usize| f.get(i)?.parse::<u32>().ok();
            (pid != me
                && [led(2), led(3)]
                    .iter()
                    .flatten()
                    .any(|l| leaders.contains(l)))
            .then_some(pid)
        })
        .collect();
    v.sort_unstable();
    v
}

impl Sample {
    /// All the CPU seconds, user and system.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    /// What the tree used per second between `prev` and this reading, `dt_s` apart (the
    /// time between the readings themselves, not the series' nominal interval: a late
    /// reading holds more than one interval's work).
    pub fn rates_since(&self, prev: &Sample, dt_s: f64) -> SutPoint {
        let dt = dt_s.max(1e-9);
        let kib_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / 1024.0 / dt;
        let count_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
        // The user/system split of a process moves by a tick as the kernel rounds it:
        // the whole is taken as it grew, system at most all of it, user the rest.
        let cpu = (self.cpu_s() - prev.cpu_s()).max(0.0);
        let sys = (self.sys_s - prev.sys_s).clamp(0.0, cpu);
        SutPoint {
            cpu_user_pct: (cpu - sys) / dt * 100.0,
            cpu_sys_pct: sys / dt * 100.0,
            read_kib_s: kib_s(self.read_bytes, prev.read_bytes),
            write_kib_s: kib_s(self.write_bytes, prev.write_bytes),
            rss_kib: self.rss_kib,
            pss_kib: self.pss_kib,
            procs: self.procs,
            read_calls_s: Some(count_s(self.read_calls, prev.read_calls)),
            write_calls_s: Some(count_s(self.write_calls, prev.write_calls)),
            major_faults_s: Some(count_s(self.major_faults, prev.major_faults)),
            shared_kib: Some(self.shared_kib),
            net_in_bytes_s: net_since(self.net, prev.net, dt).map(|(i, _)| i),
            net_out_bytes_s: net_since(self.net, prev.net, dt).map(|(_, o)| o),
            ..SutPoint::default()
        }
    }
}

/// Bytes per second into and out of the store between two counts, when both were counted.
fn net_since(now: Option<NetBytes>, then: Option<NetBytes>, dt: f64) -> Option<(f64, f64)> {
    let (now, then) = (now?, then?);
    let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
    Some((
        per_s(now.into_store, then.into_store),
        per_s(now.out_of_store, then.out_of_store),
    ))
}

/// One pass over the tree, with what tells whether a child was reaped during it.
struct Pass {
    sample: Sample,
    /// The processes read and the CPU ticks their reaped children left them: unchanged
    /// between two passes means no child was reaped while they ran.
    reaped: (Vec<u32>, u64),
    /// The middle of the pass: when its counts were read, as near as one instant can say
    /// (a pass over a hundred processes takes some 10 ms, in which a busy server uses
    /// 15 ms of CPU).
    at: Instant,
    /// The processes read, one by one.
    procs: Vec<ProcCpu>,
}

/// Reads the tree of `pids` now (its memory as RSS and shared, without the proportional
/// set size: see [`sample_at`]).
pub fn sample(pids: &[u32]) -> Sample {
    sample_at(pids, false, None).0
}

/// One reading of a tree: its totals, the instant they were read, and its processes one
/// by one (for the counts by name, [`super::sut_names`]).
pub type Read = (Sample, Instant, Vec<ProcCpu>);

/// Reads the tree of `pids` now, with the proportional set size when `pss` (a walk of
/// each process's page tables: some 100 µs of CPU per process); with the instant its
/// counts were read. The CPU of the processes in `cg` (mailbench's own cgroup for what it
/// started, [`Cgroup::adopt`] having moved those of `pids` it may) is the cgroup's count,
/// exact; the others' is read from `/proc`. A child reaped while the tree is being read moves its CPU and I/O
/// into its parent's totals, so, depending on which of the two was read first, it would
/// count twice or not at all (a spike, then a dip). The reading is repeated until two
/// passes in a row see the same processes and the same reaped totals, twice at most: a
/// server at saturation reaps a child every millisecond, no pass agrees with the next,
/// and each pass costs the tool's CPU; such a reap misses a child of a few milliseconds,
/// found again at the next reading. Memory is read once, after. The processes are those
/// of the last pass, each with its own CPU as `/proc` counts it (in the cgroup too).
pub fn sample_at(pids: &[u32], pss: bool, cg: Option<&Cgroup>) -> Read {
    if let Some(cg) = cg {
        cg.adopt(pids);
    }
    let members = cg.map(Cgroup::members).unwrap_or_default();
    // The cgroup's count is read first, nearest the instant the reading was due (a
    // reading at an interval's end): when every process is in it, that instant is the
    // reading's.
    let counted = cg.and_then(Cgroup::cpu_s).map(|c| (c, Instant::now()));
    let mut last = read_pass(pids, &members, cg);
    for _ in 0..2 {
        let again = read_pass(pids, &members, cg);
        let same = again.reaped == last.reaped;
        last = again;
        if same {
            break;
        }
    }
    let mut at = last.at;
    let mut s = last.sample;
    if let Some(((all, sys), when)) = counted {
        s.user_s += all - sys;
        s.sys_s += sys;
        if s.cgroup_procs >= s.procs {
            at = when;
        }
    }
    // The switches after the CPU, not in the passes: they would lengthen each pass, and
    // the names' CPU would be read further from the cgroup's count.
    for p in &mut last.procs {
        (p.vol_cs, p.invol_cs) = switches(p.pid, p.threads);
    }
    let live = &last.reaped.0;
    let page_kib = page_kib();
    s.shared_kib = live.iter().map(|p| statm_shared_pages(*p)).sum::<u64>() * page_kib;
    if pss {
        let began = Instant::now();
        s.pss_kib = Some(live.iter().filter_map(|p| pss_kib(*p)).sum());
        s.pss_cost_s = began.elapsed().as_secs_f64();
    }
    (s, at, last.procs)
}

/// The kernel's clock ticks per second (`stat`'s CPU unit).
fn ticks_per_s() -> f64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The page size, KiB.
fn page_kib() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let b = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if b > 0 { b as u64 / 1024 } else { 4 }
}

/// Nanoseconds the threads of `pid` ran (`schedstat`'s first field, summed over its
/// `threads` when it has several); `None` where the kernel keeps no such count.
fn ran_ns(pid: u32, threads: u64) -> Option<u64> {
    let first = |path: String| -> Option<u64> {
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    if threads <= 1 {
        return first(format!("/proc/{pid}/schedstat"));
    }
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ran = None;
    for t in tasks.flatten() {
        let tid = t.file_name();
        if let Some(ns) = first(format!(
            "/proc/{pid}/task/{}/schedstat",
            tid.to_string_lossy()
        )) {
            *ran.get_or_insert(0) += ns;
        }
    }
    ran
}

/// One process's own CPU seconds: (all, system): the larger of what its threads ran
/// (exact, live threads only) and its ticks (every thread it had, each figure rounded down
/// to a tick).
fn own_cpu(pid: u32, f: &[String], tick: f64) -> (f64, f64) {
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Fields after ')': 11 utime, 12 stime, 17 num_threads.
    let (utime, stime) = (num(11), num(12));
    let ticks = (utime + stime) as f64 / tick;
    let ran = ran_ns(pid, num(17)).map_or(0.0, |ns| ns as f64 / 1e9);
    (ran.max(ticks), stime as f64 / tick)
}

/// One process's reaped children's CPU seconds: (all, system). cutime and cstime are
/// exact sums the kernel rounds down to a tick when it prints them: each is taken with the
/// half tick it loses on average added back (when it is not 0), so that a server's
/// processes that reap children (qmail's 20 `qmail-smtpd`, each reaping a `qmail-queue`
/// per message) do not hold back a fifth of a second until they exit and their parent's
/// count shows it all at once.
fn kids_cpu(f: &[String], tick: f64) -> (f64, f64) {
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Fields after ')': 13 cutime, 14 cstime.
    let reaped = |t: u64| match t {
        0 => 0.0,
        t => (t as f64 + 0.5) / tick,
    };
    (reaped(num(13)) + reaped(num(14)), reaped(num(14)))
}

/// One pass: `pids`, and the children each has when it is read (found through
/// `/proc/PID/task/TID/children`), theirs in turn. A server at saturation forks a
/// process a millisecond; those born since `pids` was listed are already using CPU (20
/// `qmail-queue` in flight, some 100 ms of CPU between them) and would be missed until
/// their parent reaps them.
fn read_pass(pids: &[u32], members: &HashSet<u32>, cg: Option<&Cgroup>) -> Pass {
    // Those born in the cgroup since its list was read are in it too: their CPU is the
    // cgroup's, never counted twice.
    let mut members = members.clone();
    let began = Instant::now();
    let tick = ticks_per_s();
    let page_kib = page_kib();
    let mut s = Sample::default();
    let mut queue: Vec<u32> = pids.to_vec();
    let mut listed: HashSet<u32> = pids.iter().copied().collect();
    let mut live = Vec::with_capacity(pids.len());
    let mut child_ticks = 0u64;
    let mut procs = Vec::with_capacity(pids.len());
    let mut next = 0;
    while let Some(&pid) = queue.get(next) {
        next += 1;
        let Some((comm, f)) = stat_read(pid) else {
            continue;
        };
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // Fields after ')': 9 majflt, 10 cmajflt, 13 cutime, 14 cstime, 17 num_threads,
        // 21 rss (pages).
        s.major_faults += num(9) + num(10);
        // (Nothing is born in an empty cgroup: no need to ask.)
        if let Some(cg) = cg
            && !members.is_empty()
            && !members.contains(&pid)
            && (members.contains(&(num(1) as u32)) || cg.holds(pid))
        {
            members.insert(pid);
        }
        let (own, own_sys) = own_cpu(pid, &f, tick);
        let (kids, kids_sys) = kids_cpu(&f, tick);
        if members.contains(&pid) {
            s.cgroup_procs += 1;
        } else {
            s.user_s += own + kids - own_sys - kids_sys;
            s.sys_s += own_sys + kids_sys;
            child_ticks += num(13) + num(14);
        }
        // Field 19 after ')': starttime.
        procs.push(ProcCpu {
            pid,
            ppid: num(1) as u32,
            start: num(19),
            comm,
            own_s: own,
            own_sys_s: own_sys,
            kids_s: kids,
            kids_sys_s: kids_sys,
            rss_kib: num(21) * page_kib,
            threads: num(17),
            ..ProcCpu::default()
        });
        s.rss_kib += num(21) * page_kib;
        s.procs += 1;
        live.push(pid);
        read_io(pid, &mut s);
        for child in children(pid, num(17)) {
            if listed.insert(child) {
                queue.push(child);
            }
        }
    }
    live.sort_unstable();
    Pass {
        sample: s,
        reaped: (live, child_ticks),
        at: began + began.elapsed() / 2,
        procs,
    }
}

/// The context switches of `pid`'s `threads` (voluntary, involuntary): `status`'s
/// counts, which are its main thread's alone, summed over `task/TID/status` when it has
/// several; (0, 0) where they cannot be read (it ended meanwhile).
fn switches(pid: u32, threads: u64) -> (u64, u64) {
    let of = |path: String| -> (u64, u64) {
        let Ok(status) = std::fs::read_to_string(path) else {
            return (0, 0);
        };
        let v = |l: &str| l.trim().parse::<u64>().unwrap_or(0);
        let (mut vol, mut invol) = (0, 0);
        for line in status.lines() {
            if let Some(n) = line.strip_prefix("voluntary_ctxt_switches:") {
                vol = v(n);
            } else if let Some(n) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                invol = v(n);
            }
        }
        (vol, invol)
    };
    if threads <= 1 {
        return of(format!("/proc/{pid}/status"));
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .map(|t| {
                    of(format!(
                        "/proc/{pid}/task/{}/status",
                        t.file_name().to_string_lossy()
                    ))
                })
                .fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
        })
        .unwrap_or_default()
}

/// Adds what `/proc/PID/io` counts of `pid` (its reaped children's included) to `s`.
fn read_io(pid: u32, s: &mut Sample) {
    let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) else {
        return;
    };
    for line in io.lines() {
        let v = |l: &str| {
            l.split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if line.starts_with("read_bytes:") {
            s.read_bytes += v(line);
        } else if line.starts_with("write_bytes:") {
            s.write_bytes += v(line);
        } else if line.starts_with("syscr:") {
            s.read_calls += v(line);
        } else if line.starts_with("syscw:") {
            s.write_calls += v(line);
        }
    }
}

/// The children of `pid`'s `threads` now (each thread lists those it forked).
fn children(pid: u32, threads: u64) -> Vec<u32> {
    let of = |tid: &str| -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect()
    };
    if threads <= 1 {
        return of(&pid.to_string());
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .flat_map(|t| of(&t.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default()
}

/// The third figure of /proc/PID/statm: resident pages backed by a file or shared memory.
fn statm_shared_pages(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(0)
}

/// A process's proportional set size, KiB (`smaps_rollup`'s `Pss:`); `None` for a
/// process gone or without memory of its own (a kernel thread).
pub fn pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_of_calls_faults_and_the_shared_memory_read() {
        let then = Sample {
            read_calls: 100,
            write_calls: 10,
            major_faults: 1,
            ..Sample::default()
        };
        let now = Sample {
            read_calls: 600,
            write_calls: 260,
            major_faults: 9,
            shared_kib: 2048,
            ..Sample::default()
        };
        let p = now.rates_since(&then, 0.5);
        assert_eq!(p.read_calls_s, Some(1000.0));
        assert_eq!(p.write_calls_s, Some(500.0));
        assert_eq!(p.major_faults_s, Some(16.0));
        assert_eq!(p.shared_kib, Some(2048));
        assert_eq!(p.net_in_bytes_s, None, "not counted: absent, not 0");
        let net = |into_store, out_of_store| {
            Some(NetBytes {
                into_store,
                out_of_store,
            })
        };
        let p = Sample {
            net: net(1_500, 40_000),
            ..now
        }
        .rates_since(
            &Sample {
                net: net(500, 0),
                ..then
            },
            0.5,
        );
        assert_eq!(p.net_in_bytes_s, Some(2_000.0), "1,000 bytes in 0.5 s");
        assert_eq!(p.net_out_bytes_s, Some(80_000.0));
    }

    #[test]
    fn a_reaped_childs_read_calls_count_in_its_parents_tree() {
        // dd makes one read call per byte (bs=1); its shell reaps it, and the kernel moves
        // its counts into the shell's /proc/PID/io.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "dd if=/dev/zero of=/dev/null bs=1 count=20000 2>/dev/null; sleep 5",
            ])
            .spawn()
            .expect("sh");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let s = sample(&[child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            (20_000..21_000).contains(&s.read_calls) && s.write_calls >= 20_000,
            "dd's 20,000 reads and writes of one byte: {s:?}"
        );
        assert!(s.shared_kib > 0, "sh maps its libraries: {s:?}");
    }

    #[test]
    fn a_process_is_its_own_tree_and_has_cpu_and_memory() {
        let me = std::process::id();
        assert!(descendants(&[me]).contains(&me));
        // A process without children (this one has those of the tests running beside it:
        // a reading takes in the children each process has when it is read).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        // Past its loader: a process just started may have no page mapped yet.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let s = sample(&[child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(s.procs, 1, "{s:?}");
        assert!(s.rss_kib > 0, "{s:?}");
    }

    #[test]
    fn rates_divide_by_the_time_between_the_readings() {
        let prev = Sample {
            user_s: 10.0,
            sys_s: 4.0,
            write_bytes: 1024,
            ..Sample::default()
        };
        let now = Sample {
            user_s: 11.5,
            sys_s: 4.5,
            write_bytes: 1024 + 4096,
            rss_kib: 2048,
            procs: 7,
            ..Sample::default()
        };
        // A reading 2 s after the previous one (say, one interval late): 1.5 s of user CPU
        // is 75 % of a core, not 150 %.
        let p = now.rates_since(&prev, 2.0);
        assert_eq!(p.cpu_user_pct, 75.0);
        assert_eq!(p.cpu_sys_pct, 25.0);
        assert_eq!(p.write_kib_s, 2.0);
        assert_eq!((p.rss_kib, p.procs), (2048, 7));
    }

    /// The kernel's own count of `pid`'s CPU, seconds: its stat's utime + stime
    /// (`own`) or cutime + cstime (its reaped children's).
    fn kernel_cpu_s(pid: u32, own: bool) -> f64 {
        let f = stat_fields(pid).expect("stat");
        let at = if own { 11 } else { 13 };
        let t = |i: usize| f[i].parse::<f64>().expect("ticks");
        (t(at) + t(at + 1)) / ticks_per_s()
    }

    /// Waits up to 30 s for `what` to hold, a panic naming it after.
    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "waited 30 s for {what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_process_that_burns_a_known_cpu_time_shows_under_its_name() {
        use crate::stats::sut_names::ByName;
        // A child of a shell names itself `mb-burner` (prctl PR_SET_NAME: its comm), burns
        // 0.3 s of CPU, sleeps, burns 0.3 s more and ends; the shell reaps it and sleeps.
        // The shell starts it when told to (a builtin read: no child before it).
        let burner = "import ctypes, time
ctypes.CDLL(None).prctl(15, b'mb-burner', 0, 0, 0)
def burn(s):
    while time.process_time() < s:
        pass
burn(0.3)
time.sleep(1.0)
burn(0.6)";
        let mut sh = std::process::Command::new("sh")
            .args(["-c", &format!("read go; python3 -c \"{burner}\"; sleep 30")])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let root = sh.id();
        let mut by = ByName::default();
        let read = |by: &mut ByName| {
            let (s, _, procs) = sample_at(&[root], false, None);
            (s.cpu_s(), by.update(procs))
        };
        // Before the burner is born: all its CPU is counted.
        let (t0, _) = read(&mut by);
        {
            use std::io::Write;
            let mut go = sh.stdin.take().expect("stdin");
            go.write_all(b"go\n").expect("tell the shell to start");
        }
        let pid = || {
            children(root, 1)
                .into_iter()
                .find(|p| stat_read(*p).is_some_and(|(c, _)| c == "mb-burner"))
        };
        wait_for("the burner to burn its first 0.3 s and sleep", || {
            pid().is_some_and(|p| {
                kernel_cpu_s(p, true) >= 0.29 && stat_fields(p).is_some_and(|f| f[0] == "S")
            })
        });
        let p = pid().expect("the burner");
        let (_, mid) = read(&mut by);
        let kernel = kernel_cpu_s(p, true);
        let named = mid["mb-burner"].cpu_s;
        // schedstat's nanoseconds against the kernel's ticks: a tick (10 ms) apart at most.
        assert!(
            (named - kernel).abs() <= 0.011
                && (0.3 - 1.0 / ticks_per_s() - 1e-9..0.4).contains(&named),
            "while it sleeps, mb-burner's CPU is the kernel's utime + stime ({kernel} s) and the 0.3 s it burned: got {named} s"
        );
        wait_for("the shell to reap the burner", || {
            pid().is_none() && kernel_cpu_s(root, false) > 0.0
        });
        let (t1, end) = read(&mut by);
        // The second 0.3 s was never read while it ran: it is the shell's reaped
        // children's count, less what was counted of the burner before. The shell
        // reaped the burner only, and the burner reaped what it started before it named
        // itself (a `python3` that is a pyenv shim runs its helpers):
        let reaped = kernel_cpu_s(root, false);
        let _ = sh.kill();
        let _ = sh.wait();
        let named = end["mb-burner"].cpu_s;
        let its_children = end.get("reaped by mb-burner").map_or(0.0, |c| c.cpu_s);
        // The kernel's two fields are each up to a tick short; the counts by name add
        // half a tick to each reaped field (the shell's, and the burner's own), so the two
        // agree within 3 ticks.
        let tolerance = 3.0 / ticks_per_s();
        assert!(
            // The burner stops once Python's clock says 0.6 s; the kernel's ticks round
            // that down (a run read 0.5999999999999999 s: 60 ticks summed as floats).
            (0.6 - 1.0 / ticks_per_s() - 1e-9..0.7).contains(&named)
                && (named + its_children - reaped).abs() <= tolerance,
            "after it ended, mb-burner's CPU is the 0.6 s it burned, and with its own children's ({its_children} s) the shell's reaped count {reaped} s ± {tolerance} s: got {named} s"
        );
        let sum: f64 = end.values().map(|c| c.cpu_s).sum();
        assert!(
            (sum - (t1 - t0)).abs() < 1e-6,
            "the names add up to the tree's growth {} s: got {sum} s ({end:?})",
            t1 - t0
        );
    }

    #[test]
    fn a_child_that_exits_and_is_reaped_keeps_the_tree_total() {
        // Run a child that burns CPU; its time must appear in our tree either live or,
        // once reaped, in our cutime/cstime.
        let me = std::process::id();
        // Our own CPU (not our children's): other tests run in this process meanwhile.
        let own = || {
            let f = stat_fields(me).expect("own stat");
            let t = |i: usize| f[i].parse::<f64>().expect("ticks");
            (t(11) + t(12)) / 100.0
        };
        let (before, own_before) = (sample(&descendants(&[me])), own());
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("run sh");
        assert!(status.success());
        let (after, own_after) = (sample(&descendants(&[me])), own());
        let grew = (after.user_s + after.sys_s) - (before.user_s + before.sys_s);
        let children = grew - (own_after - own_before);
        assert!(
            children >= 0.1,
            "the reaped child's ~0.25 s of CPU is counted: children grew by {children} s"
        );
    }
}
