//! The checks themselves, on readings passed in: each says whether one property of the
//! machine would distort a run of the given size, and the fix when it would. No reading
//! of the machine here (that is `gather`), so every threshold is tested with known values.

use super::{Finding, Needs};

/// How long a closed TCP connection holds its local port on Linux (TIME_WAIT, fixed).
pub const TIME_WAIT_S: f64 = 60.0;
/// How long conntrack keeps a closed connection's entry (nf_conntrack_tcp_timeout_time_wait
/// default).
pub const CONNTRACK_TIME_WAIT_S: f64 = 120.0;
/// Descriptors the process needs besides its connections (listeners, files, the runtime).
const SPARE_FDS: u64 = 64;

/// The open-files limit against the connections the run holds at once.
pub fn descriptors(hard_limit: u64, needs: &Needs) -> Finding {
    let want = needs.fds() + SPARE_FDS;
    if hard_limit >= want {
        return Finding::ok(
            "open files",
            format!("limit {hard_limit}, this run needs about {want}"),
        );
    }
    Finding::warn(
        "open files",
        format!(
            "limit {hard_limit} is below the about {want} descriptors {} connections need; connections past it fail as 'too many open files'",
            needs.connections
        ),
        format!(
            "run `ulimit -n {}` (or LimitNOFILE= for a service) first",
            want.max(65_536)
        ),
    )
}

/// The ephemeral port range against new connections per second to one destination:
/// every closed connection keeps its port for [`TIME_WAIT_S`] unless `tcp_tw_reuse`
/// lets new outgoing connections take it (1 everywhere, 2 on loopback only).
pub fn ports(range: (u32, u32), tw_reuse: u8, needs: &Needs) -> Finding {
    let ports = f64::from(range.1.saturating_sub(range.0) + 1);
    let sustainable = ports / TIME_WAIT_S;
    let reuse = tw_reuse == 1 || (tw_reuse == 2 && needs.loopback);
    let Some(rate) = needs.new_conns_per_s else {
        return Finding::ok(
            "ephemeral ports",
            format!(
                "{} ports ({}-{}): about {sustainable:.0} new connections/s to one destination{}",
                ports,
                range.0,
                range.1,
                if reuse {
                    ", and TIME_WAIT reuse is on"
                } else {
                    ""
                }
            ),
        );
    };
    if rate <= sustainable * 0.8 || reuse {
        return Finding::ok(
            "ephemeral ports",
            format!(
                "{ports} ports last for {rate:.0} new connections/s{}",
                if reuse && rate > sustainable * 0.8 {
                    " with TIME_WAIT reuse on"
                } else {
                    ""
                }
            ),
        );
    }
    Finding::warn(
        "ephemeral ports",
        format!(
            "{rate:.0} new connections/s hold about {:.0} ports in TIME_WAIT, but the range {}-{} has {ports}: connects will fail with 'address not available'",
            rate * TIME_WAIT_S,
            range.0,
            range.1
        ),
        "sysctl -w net.ipv4.ip_local_port_range='1024 65535' net.ipv4.tcp_tw_reuse=1, or reuse connections (--per-conn), or add --source-ip addresses".into(),
    )
}

/// The conntrack table (when the module is loaded) against the run's entries: open
/// connections plus closed ones still tracked.
pub fn conntrack(max: Option<u64>, count: u64, needs: &Needs) -> Finding {
    let Some(max) = max else {
        return Finding::ok("conntrack", "not loaded: no table to fill".into());
    };
    let want = count
        + needs.connections * 2
        + needs
            .new_conns_per_s
            .map_or(0, |r| (r * CONNTRACK_TIME_WAIT_S) as u64);
    if want <= max {
        return Finding::ok(
            "conntrack",
            format!(
                "{count} of {max} entries used, this run adds about {}",
                want - count
            ),
        );
    }
    Finding::warn(
        "conntrack",
        format!(
            "the table holds {max} entries, {count} used, and this run needs about {}: new connections will be dropped ('nf_conntrack: table full')",
            want - count
        ),
        format!(
            "sysctl -w net.netfilter.nf_conntrack_max={}",
            (want * 2).next_power_of_two()
        ),
    )
}

/// Whether a lab can put its queue on a RAM disk: mounting one needs root with
/// CAP_SYS_ADMIN; otherwise the lab falls back to /dev/shm, which must have room.
pub fn tmpfs(root: bool, cap_sys_admin: bool, shm_free_mib: Option<u64>) -> Finding {
    if root && cap_sys_admin {
        return Finding::ok("tmpfs", "the lab can mount its queue on tmpfs".into());
    }
    match shm_free_mib {
        Some(free) if free >= 1024 => Finding::ok(
            "tmpfs",
            format!("no mounting here; the lab's queue goes to /dev/shm ({free} MiB free)"),
        ),
        Some(free) => Finding::warn(
            "tmpfs",
            format!(
                "no mounting here and /dev/shm has {free} MiB free: a lab's tmpfs queue may fill"
            ),
            "run as root with CAP_SYS_ADMIN, or use --queue disk".into(),
        ),
        None => Finding::warn(
            "tmpfs",
            "no mounting here and no /dev/shm: a lab cannot keep its queue in RAM".into(),
            "run as root with CAP_SYS_ADMIN, or use --queue disk".into(),
        ),
    }
}

/// CPU frequency scaling: a governor other than `performance` changes the clock under
/// load, so the same run measures differently.
pub fn governors(found: &[String]) -> Finding {
    if found.is_empty() {
        return Finding::ok(
            "cpu frequency",
            "no scaling governor exposed (a VM, or fixed clocks)".into(),
        );
    }
    let slow: Vec<&String> = found
        .iter()
        .filter(|g| g.as_str() != "performance")
        .collect();
    if slow.is_empty() {
        return Finding::ok(
            "cpu frequency",
            "every core on the performance governor".into(),
        );
    }
    Finding::warn(
        "cpu frequency",
        format!(
            "{} of {} cores scale their clock ({}): results move with the clock",
            slow.len(),
            found.len(),
            slow[0]
        ),
        "cpupower frequency-set -g performance (or echo performance > /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)".into(),
    )
}

/// CPU steal: another guest on the same host takes this machine's CPU time.
pub fn steal(steal_pct: f64, over: &str) -> Finding {
    if steal_pct < 2.0 {
        return Finding::ok("cpu steal", format!("{steal_pct:.1} % {over}"));
    }
    Finding::warn(
        "cpu steal",
        format!(
            "{steal_pct:.1} % of the CPU time {over} went to other guests: results vary with their load"
        ),
        "run on a dedicated host or pinned vCPUs, and repeat runs (--rounds) to see the spread"
            .into(),
    )
}

/// Swap: a server whose memory is paged out answers at disk speed.
pub fn swap(total_kib: u64, free_kib: u64) -> Finding {
    if total_kib == 0 {
        return Finding::ok("swap", "none configured".into());
    }
    let used_mib = total_kib.saturating_sub(free_kib) / 1024;
    if used_mib < 64 {
        return Finding::ok(
            "swap",
            format!("{used_mib} MiB of {} MiB in use", total_kib / 1024),
        );
    }
    Finding::warn(
        "swap",
        format!("{used_mib} MiB are swapped out: a server paged out answers at disk speed"),
        "free memory, or swapoff -a for the benchmark".into(),
    )
}

/// The share of CPU time stolen between two `/proc/stat` "cpu" lines (fields: user nice
/// system idle iowait irq softirq steal ...).
pub fn steal_share(before: &[u64], after: &[u64]) -> f64 {
    let delta: Vec<u64> = after
        .iter()
        .zip(before.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .take(8)
        .collect();
    let total: u64 = delta.iter().sum();
    if total == 0 {
        return 0.0;
    }
    delta.get(7).copied().unwrap_or(0) as f64 * 100.0 / total as f64
}

/// Labs that runs killed outright left behind, which `doctor` has just cleaned (one line
/// per dead run, from `lab::leftovers`): their servers would have taken CPU, ports and
/// memory from every later run.
pub fn leftover_labs(cleaned: &[String]) -> Finding {
    match cleaned {
        [] => Finding::ok("leftover labs", "none left by runs that died".into()),
        lines => Finding::ok("leftover labs", lines.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(connections: u64, rate: Option<f64>) -> Needs {
        Needs {
            connections,
            sides: 1,
            new_conns_per_s: rate,
            loopback: false,
            lab: false,
        }
    }

    #[test]
    fn descriptors_warn_below_what_the_connections_need() {
        assert!(descriptors(1024, &needs(500, None)).ok);
        let f = descriptors(256, &needs(1000, None));
        assert!(!f.ok, "{f:?}");
        assert!(f.text.contains("1064"), "{}", f.text);
        assert!(
            f.fix
                .as_deref()
                .is_some_and(|x| x.contains("ulimit -n 65536"))
        );
        // A relay holds both ends of its connections.
        let relay = Needs {
            sides: 2,
            ..needs(1000, None)
        };
        assert!(!descriptors(1500, &relay).ok);
    }

    #[test]
    fn ports_last_for_the_new_connections_unless_time_wait_holds_them() {
        // 28,232 ports / 60 s = 470 a second.
        let range = (32768, 60999);
        assert!(ports(range, 0, &needs(64, Some(300.0))).ok);
        let f = ports(range, 0, &needs(64, Some(1000.0)));
        assert!(!f.ok && f.text.contains("60000"), "{f:?}");
        assert!(ports(range, 1, &needs(64, Some(1000.0))).ok, "reuse on");
        assert!(
            !ports(range, 2, &needs(64, Some(1000.0))).ok,
            "2: loopback only"
        );
        let lo = Needs {
            loopback: true,
            ..needs(64, Some(1000.0))
        };
        assert!(ports(range, 2, &lo).ok, "2 covers loopback");
        assert!(
            ports(range, 0, &needs(64, None))
                .text
                .contains("about 471 new connections/s")
        );
    }

    #[test]
    fn conntrack_counts_open_and_recently_closed_connections() {
        assert!(conntrack(None, 0, &needs(10_000, Some(1e4))).ok);
        assert!(conntrack(Some(262_144), 100, &needs(1000, Some(100.0))).ok);
        let f = conntrack(Some(65_536), 1000, &needs(1000, Some(1000.0)));
        // 1000 used + 2 × 1000 open + 1000/s × 120 s.
        assert!(!f.ok && f.text.contains("122000"), "{f:?}");
        assert!(
            f.fix.as_deref().is_some_and(|x| x.contains("262144")),
            "{f:?}"
        );
    }

    #[test]
    fn tmpfs_governors_steal_and_swap() {
        assert!(tmpfs(true, true, None).ok);
        assert!(tmpfs(false, false, Some(4096)).ok);
        assert!(!tmpfs(false, false, Some(100)).ok);
        assert!(!tmpfs(true, false, None).ok);
        assert!(governors(&[]).ok);
        assert!(governors(&["performance".into(), "performance".into()]).ok);
        let g = governors(&["performance".into(), "powersave".into()]);
        assert!(
            !g.ok && g.text.starts_with("1 of 2") && g.text.contains("powersave"),
            "{g:?}"
        );
        assert!(steal(0.5, "now").ok);
        assert!(!steal(7.0, "now").ok);
        assert!(swap(0, 0).ok);
        assert!(swap(1 << 20, (1 << 20) - 1024).ok);
        assert!(!swap(1 << 20, 1 << 10).ok);
    }

    #[test]
    fn steal_is_its_share_of_the_time_between_two_readings() {
        let before = [100, 0, 100, 700, 0, 0, 0, 100, 0, 0];
        let after = [200, 0, 200, 1400, 0, 0, 0, 200, 0, 0];
        assert_eq!(steal_share(&before, &after), 10.0);
        assert_eq!(steal_share(&after, &after), 0.0);
    }
}
