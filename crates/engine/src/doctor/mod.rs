//! `mailbench doctor`, and the preflight before every run: what on this machine would
//! distort a benchmark's results — descriptor limits against the planned connections, the
//! ephemeral port range against new connections per second × TIME_WAIT, the conntrack
//! table, whether a lab can keep its queue in RAM, CPU frequency scaling and steal, swap.
//! Each finding is one line with its fix. Warnings only: nothing here changes the system
//! (`mailbench doctor` itself also cleans the labs of runs that died, see `lab::leftovers`).
//!
//! `checks` judges readings; this file reads the machine.

pub mod checks;

use std::time::Duration;

/// What a run will ask of the machine.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    /// Connections open at once.
    pub connections: u64,
    /// Descriptors per connection in this process: 1 for a generator, 2 for a relay
    /// (the generator's end and the embedded sink's end).
    pub sides: u64,
    /// New connections per second, when the plan fixes it (open loop).
    pub new_conns_per_s: Option<f64>,
    /// Every target is on loopback (`tcp_tw_reuse = 2` covers it).
    pub loopback: bool,
    /// The run starts a lab, whose queue or mailboxes go to a RAM disk: only then is
    /// the room for one worth a warning (a `send` against one's own server has none).
    pub lab: bool,
}

impl Needs {
    /// Descriptors the connections take in this process.
    pub fn fds(&self) -> u64 {
        self.connections * self.sides
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked.
    pub check: &'static str,
    /// True when it will not distort the run.
    pub ok: bool,
    /// What was found.
    pub text: String,
    /// How to fix it, when it is not ok.
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, text: String) -> Finding {
        Finding {
            check,
            ok: true,
            text,
            fix: None,
        }
    }

    fn warn(check: &'static str, text: String, fix: String) -> Finding {
        Finding {
            check,
            ok: false,
            text,
            fix: Some(fix),
        }
    }

    /// The finding as one line: `ok   check: text` or `WARN check: text; fix: …`.
    pub fn line(&self) -> String {
        match &self.fix {
            Some(fix) if !self.ok => format!("WARN {}: {}; fix: {fix}", self.check, self.text),
            _ => format!("ok   {}: {}", self.check, self.text),
        }
    }
}

/// Every check on this machine for `needs`. `steal_over` samples CPU steal over that long
/// (the doctor's view of now); without it, steal is taken since boot (no wait before a run).
pub fn examine(needs: &Needs, steal_over: Option<Duration>) -> Vec<Finding> {
    let (steal_pct, over) = match steal_over {
        Some(d) => {
            let before = cpu_line();
            std::thread::sleep(d);
            (
                checks::steal_share(&before, &cpu_line()),
                format!("over the last {:.1} s", d.as_secs_f64()),
            )
        }
        None => (
            checks::steal_share(&[], &cpu_line()),
            "since boot".to_string(),
        ),
    };
    let meminfo = read("/proc/meminfo");
    let mem = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let mut findings = vec![
        checks::descriptors(crate::limits::nofile_hard(), needs),
        checks::ports(
            port_range(),
            number("/proc/sys/net/ipv4/tcp_tw_reuse").unwrap_or(0) as u8,
            needs,
        ),
        checks::conntrack(
            number("/proc/sys/net/netfilter/nf_conntrack_max"),
            number("/proc/sys/net/netfilter/nf_conntrack_count").unwrap_or(0),
            needs,
        ),
        checks::governors(&governors()),
        checks::steal(steal_pct, &over),
        checks::swap(mem("SwapTotal:"), mem("SwapFree:")),
    ];
    if needs.lab {
        let tmpfs = checks::tmpfs(crate::limits::is_root(), cap_sys_admin(), shm_free_mib());
        findings.insert(3, tmpfs);
    }
    findings
}

/// The preflight before a run: the lines of the findings that are not ok.
pub fn preflight(needs: &Needs) -> Vec<String> {
    examine(needs, None)
        .into_iter()
        .filter(|f| !f.ok)
        .map(|f| f.line())
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn number(path: &str) -> Option<u64> {
    read(path).trim().parse().ok()
}

/// The ephemeral port range (Linux's default when unreadable).
fn port_range() -> (u32, u32) {
    let text = read("/proc/sys/net/ipv4/ip_local_port_range");
    let mut it = text.split_whitespace().filter_map(|x| x.parse().ok());
    match (it.next(), it.next()) {
        (Some(a), Some(b)) if a <= b => (a, b),
        _ => (32768, 60999),
    }
}

/// The aggregate "cpu" line of /proc/stat, as numbers.
fn cpu_line() -> Vec<u64> {
    read("/proc/stat")
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether this process may mount (CAP_SYS_ADMIN, bit 21, in its effective set).
fn cap_sys_admin() -> bool {
    read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// Free space in /dev/shm, MiB.
fn shm_free_mib() -> Option<u64> {
    let path = std::ffi::CString::new("/dev/shm").ok()?;
    #[allow(unsafe_code)]
    // SAFETY: statvfs writes only into the zeroed struct passed by pointer; the path is a
    // valid NUL-terminated string.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(path.as_ptr(), &mut st) == 0).then_some(st)
    }?;
    Some(st.f_bavail as u64 * st.f_frsize as u64 / (1024 * 1024))
}

/// Each core's frequency governor, where the kernel exposes one.
fn governors() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("cpu") && n[3..].chars().all(|c| c.is_ascii_digit()) && n.len() > 3
        })
        .filter_map(|e| {
            std::fs::read_to_string(e.path().join("cpufreq/scaling_governor"))
                .ok()
                .map(|g| g.trim().to_string())
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::{Needs, examine};

    /// Room on a RAM disk is asked of the machine only for a run that starts a lab (a
    /// `send` in a container warned that "a lab's tmpfs queue may fill").
    #[test]
    fn the_ram_disk_is_checked_only_for_a_lab() {
        let needs = |lab| Needs {
            connections: 1,
            sides: 1,
            new_conns_per_s: None,
            loopback: true,
            lab,
        };
        let checks =
            |lab| -> Vec<&str> { examine(&needs(lab), None).iter().map(|f| f.check).collect() };
        assert!(!checks(false).contains(&"tmpfs"), "{:?}", checks(false));
        assert!(checks(true).contains(&"tmpfs"), "{:?}", checks(true));
    }
}
