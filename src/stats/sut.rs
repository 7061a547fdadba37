//! The system under test, observed from /proc: CPU, disk I/O, memory and process count of
//! a process tree, including children that already exited (through the parents' cutime).

use std::collections::{HashMap, HashSet};

use super::SutPoint;

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// CPU seconds (user) including reaped children.
    pub user_s: f64,
    /// CPU seconds (system) including reaped children.
    pub sys_s: f64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// Resident memory in KiB.
    pub rss_kib: u64,
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
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(str::to_string).collect())
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

impl Sample {
    /// What the tree used per second between `prev` and this reading, `dt_s` apart (the
    /// time between the readings themselves, not the series' nominal interval: a late
    /// reading holds more than one interval's work).
    pub fn rates_since(&self, prev: &Sample, dt_s: f64) -> SutPoint {
        let dt = dt_s.max(1e-9);
        let kib_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / 1024.0 / dt;
        let count_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
        SutPoint {
            cpu_user_pct: (self.user_s - prev.user_s).max(0.0) / dt * 100.0,
            cpu_sys_pct: (self.sys_s - prev.sys_s).max(0.0) / dt * 100.0,
            read_kib_s: kib_s(self.read_bytes, prev.read_bytes),
            write_kib_s: kib_s(self.write_bytes, prev.write_bytes),
            rss_kib: self.rss_kib,
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
}

/// Reads the tree of `pids` now. A child reaped while the tree is being read moves its CPU
/// and I/O into its parent's totals, so, depending on which of the two was read first, it
/// would count twice or not at all (a spike, then a dip). The reading is repeated until
/// two passes in a row see the same processes and the same reaped totals (a few tries).
pub fn sample(pids: &[u32]) -> Sample {
    let mut last = read_pass(pids);
    for _ in 0..4 {
        let again = read_pass(pids);
        if again.reaped == last.reaped {
            return again.sample;
        }
        last = again;
    }
    last.sample
}

fn read_pass(pids: &[u32]) -> Pass {
    let tick = {
        #[allow(unsafe_code)]
        // SAFETY: sysconf has no preconditions.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 { t as f64 } else { 100.0 }
    };
    let page_kib = 4;
    let mut s = Sample::default();
    let mut live = Vec::with_capacity(pids.len());
    let mut child_ticks = 0u64;
    for &pid in pids {
        let Some(f) = stat_fields(pid) else { continue };
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // Fields after ')': 9 majflt, 10 cmajflt, 11 utime, 12 stime, 13 cutime,
        // 14 cstime, 21 rss (pages).
        s.major_faults += (num(9) + num(10)) as u64;
        s.shared_kib += statm_shared_pages(pid) * page_kib;
        s.user_s += (num(11) + num(13)) / tick;
        s.sys_s += (num(12) + num(14)) / tick;
        s.rss_kib += num(21) as u64 * page_kib;
        s.procs += 1;
        live.push(pid);
        child_ticks += (num(13) + num(14)) as u64;
        if let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) {
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
    }
    Pass {
        sample: s,
        reaped: (live, child_ticks),
    }
}

/// The third figure of /proc/PID/statm: resident pages backed by a file or shared memory.
fn statm_shared_pages(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(0)
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
    fn this_process_is_its_own_tree_and_has_cpu_and_memory() {
        let me = std::process::id();
        let tree = descendants(&[me]);
        assert!(tree.contains(&me));
        let s = sample(&[me]);
        assert_eq!(s.procs, 1);
        assert!(s.rss_kib > 0);
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
