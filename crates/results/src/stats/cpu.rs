//! CPU time and memory of this process, so that the tool can say when it is itself the
//! bottleneck.

use std::time::Duration;

/// User and system CPU time consumed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// User time.
    pub user: Duration,
    /// System time.
    pub sys: Duration,
}

impl CpuTimes {
    /// The CPU time of this process (all threads), from getrusage(2).
    pub fn of_self() -> CpuTimes {
        // SAFETY-free: rusage via libc is a plain out-parameter call.
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        #[allow(unsafe_code)]
        let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } == 0;
        if !ok {
            return CpuTimes::default();
        }
        #[allow(unsafe_code)]
        let ru = unsafe { ru.assume_init() };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        CpuTimes {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
        }
    }

    /// User plus system.
    pub fn total(&self) -> Duration {
        self.user + self.sys
    }

    /// The time spent since `earlier`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }
}

/// Peak resident set size of this process in KiB (VmHWM), 0 when unknown.
pub fn peak_rss_kib() -> u64 {
    status_field("VmHWM:")
}

fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Number of CPUs available to this process.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The machine's CPUs, however many this process may use: what a server under test (in
/// its own cgroup, on its own cores) can use at most.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf reads a system constant and has no preconditions.
    #[allow(unsafe_code)]
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or_else(cpu_count)
}

/// This thread's CPU time, ns: one clock_gettime, for costs of tens of µs or more (a
/// signature) measured apart from the wall clock a busy machine stretches.
pub fn thread_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: clock_gettime only writes the timespec passed by pointer.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if ok {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_time_grows_with_work() {
        let before = CpuTimes::of_self();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = CpuTimes::of_self();
        assert!(after.total() > before.total(), "{before:?} -> {after:?}");
        assert!(peak_rss_kib() > 0);
    }
}
