//! The system under test, observed from /proc: CPU, disk I/O, memory and process count of
//! a process tree, including children that already exited (through the parents' cutime).

use std::collections::{HashMap, HashSet};

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
    /// Processes.
    pub procs: u64,
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// Every process whose ancestry includes one of `roots` (roots included).
pub fn descendants(roots: &[u32]) -> Vec<u32> {
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

/// Reads the tree of `pids` now.
pub fn sample(pids: &[u32]) -> Sample {
    let tick = {
        #[allow(unsafe_code)]
        // SAFETY: sysconf has no preconditions.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 { t as f64 } else { 100.0 }
    };
    let page_kib = 4;
    let mut s = Sample::default();
    for &pid in pids {
        let Some(f) = stat_fields(pid) else { continue };
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // Fields after ')': 11 utime, 12 stime, 13 cutime, 14 cstime, 21 rss (pages).
        s.user_s += (num(11) + num(13)) / tick;
        s.sys_s += (num(12) + num(14)) / tick;
        s.rss_kib += num(21) as u64 * page_kib;
        s.procs += 1;
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
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_its_own_tree_and_has_cpu_and_memory() {
        let me = std::process::id();
        let tree = descendants(&[me]);
        assert!(tree.contains(&me));
        let s = sample(&[me]);
        assert_eq!(s.procs, 1);
        assert!(s.rss_kib > 0);
    }
}
