//! The machine around the system under test, as the seeds' authors watched it by eye: the
//! queue's block device (operations per second and how busy it was, from
//! `/proc/diskstats`) and the load average. A process tree's own I/O bytes say what the
//! MTA wrote; the device's figures say whether the disk was the limit.

use std::path::Path;

/// A block device found in `/proc/diskstats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its kernel name (`vda`, `nvme0n1p2`, `dm-0`).
    pub name: String,
    major: u32,
    minor: u32,
}

/// A device's cumulative counters at one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Milliseconds the device had I/O in flight (its busy time).
    pub busy_ms: u64,
}

/// What the device did per second between two readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskRates {
    /// Reads completed per second.
    pub read_iops: f64,
    /// Writes completed per second.
    pub write_iops: f64,
    /// Share of the time with I/O in flight, percent (iostat's %util).
    pub util_pct: f64,
}

impl DiskCounters {
    /// The rates between `prev` and this reading, `dt_s` apart.
    pub fn rates_since(&self, prev: &DiskCounters, dt_s: f64) -> DiskRates {
        let dt = dt_s.max(1e-9);
        let per_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
        DiskRates {
            read_iops: per_s(self.reads, prev.reads),
            write_iops: per_s(self.writes, prev.writes),
            util_pct: (per_s(self.busy_ms, prev.busy_ms) / 10.0).min(100.0),
        }
    }
}

impl Device {
    /// The block device holding `path`, or why there is none (a RAM disk has no device
    /// statistics; an overlay or network file system has no one device).
    pub fn holding(path: &Path) -> Result<Device, String> {
        use std::os::unix::fs::MetadataExt;
        let meta =
            std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let (major, minor) = split_dev(meta.dev());
        let stats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
        if let Some(d) = find(&stats, |ma, mi, _| (ma, mi) == (major, minor)) {
            return Ok(d);
        }
        // Not a block device itself (major 0: tmpfs, overlay, btrfs subvolumes): the
        // mount's source may still name one.
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let (fstype, source) = mount_of(&mounts, major, minor)
            .ok_or_else(|| format!("{} is on no mount this process can see", path.display()))?;
        if fstype == "tmpfs" || fstype == "ramfs" {
            return Err(format!("{} is on {fstype}, a RAM disk", path.display()));
        }
        let name = source.strip_prefix("/dev/").ok_or_else(|| {
            format!(
                "{} is on {fstype} from {source}, not one block device",
                path.display()
            )
        })?;
        Device::named(name)
    }

    /// The device a user named: a kernel name (`vda`, `/dev/vda`) or a path on it.
    pub fn find(spec: &str) -> Result<Device, String> {
        if spec.starts_with('/') && !spec.starts_with("/dev/") {
            Device::holding(Path::new(spec))
        } else {
            Device::named(spec)
        }
    }

    /// The device named `name` (`vda` or `/dev/vda`), when the kernel counts it.
    pub fn named(name: &str) -> Result<Device, String> {
        let name = name.strip_prefix("/dev/").unwrap_or(name);
        let stats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
        find(&stats, |_, _, n| n == name).ok_or_else(|| {
            format!("no block device {name} in /proc/diskstats (see lsblk for the names)")
        })
    }

    /// The device's counters now, when it is still there.
    pub fn read(&self) -> Option<DiskCounters> {
        let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
        stats.lines().find_map(|l| {
            let (ma, mi, name, c) = parse_line(l)?;
            ((ma, mi) == (self.major, self.minor) && name == self.name).then_some(c)
        })
    }
}

/// The one-minute load average.
pub fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A `dev_t`'s major and minor numbers (glibc's encoding).
fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

fn find(stats: &str, want: impl Fn(u32, u32, &str) -> bool) -> Option<Device> {
    stats.lines().find_map(|l| {
        let (major, minor, name, _) = parse_line(l)?;
        want(major, minor, name).then(|| Device {
            name: name.to_string(),
            major,
            minor,
        })
    })
}

/// One `/proc/diskstats` line: major, minor, name, and the counters this module uses
/// (fields 4, 8 and 13 of the kernel's iostats.rst).
fn parse_line(line: &str) -> Option<(u32, u32, &str, DiskCounters)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some((
        f.first()?.parse().ok()?,
        f.get(1)?.parse().ok()?,
        f.get(2)?,
        DiskCounters {
            reads: num(3)?,
            writes: num(7)?,
            busy_ms: num(12)?,
        },
    ))
}

/// The file system type and source of the mount with device number `major:minor`.
fn mount_of(mountinfo: &str, major: u32, minor: u32) -> Option<(&str, &str)> {
    let want = format!("{major}:{minor}");
    mountinfo.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(2) != Some(&want.as_str()) {
            return None;
        }
        // After the optional fields' "-": fstype, source.
        let dash = f.iter().position(|x| *x == "-")?;
        Some((*f.get(dash + 1)?, *f.get(dash + 2)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 1502365 77155 105440122 2482134 241335 197499 121626760 316837 0 158684 2825201 169954 123 91793032 23052 39584 3176
";

    #[test]
    fn a_diskstats_line_gives_reads_writes_and_busy_time() {
        let (ma, mi, name, c) = parse_line(STATS.lines().nth(1).expect("line")).expect("parsed");
        assert_eq!((ma, mi, name), (254, 0, "vda"));
        assert_eq!(
            c,
            DiskCounters {
                reads: 1_502_365,
                writes: 241_335,
                busy_ms: 158_684
            }
        );
        assert!(parse_line("garbage").is_none());
    }

    #[test]
    fn rates_are_operations_per_second_and_busy_share() {
        let a = DiskCounters {
            reads: 100,
            writes: 1000,
            busy_ms: 5000,
        };
        let b = DiskCounters {
            reads: 150,
            writes: 1400,
            busy_ms: 6000,
        };
        let r = b.rates_since(&a, 2.0);
        assert_eq!((r.read_iops, r.write_iops, r.util_pct), (25.0, 200.0, 50.0));
        // A late reading never reads above 100 %.
        let c = DiskCounters { busy_ms: 9000, ..b };
        assert_eq!(c.rates_since(&a, 2.0).util_pct, 100.0);
    }

    #[test]
    fn the_mount_of_a_device_number_names_its_type_and_source() {
        let info = "22 1 0:21 / /dev/shm rw,nosuid - tmpfs tmpfs rw
25 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 25 0:45 / /work rw - overlay overlay rw,lowerdir=/a";
        assert_eq!(mount_of(info, 0, 21), Some(("tmpfs", "tmpfs")));
        assert_eq!(mount_of(info, 254, 0), Some(("ext4", "/dev/vda")));
        assert_eq!(mount_of(info, 0, 45), Some(("overlay", "overlay")));
        assert_eq!(mount_of(info, 9, 9), None);
    }

    #[test]
    fn dev_numbers_split_as_glibc_encodes_them() {
        assert_eq!(split_dev(65024), (254, 0));
        assert_eq!(split_dev((259 << 8) | 3), (259, 3));
    }

    #[test]
    fn a_ram_disk_has_no_device_and_says_so() {
        let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let shm_is_tmpfs = info
            .lines()
            .any(|l| l.contains(" /dev/shm ") && l.contains(" - tmpfs "));
        assert!(shm_is_tmpfs, "this test needs /dev/shm on tmpfs:\n{info}");
        match Device::holding(Path::new("/dev/shm")) {
            Ok(d) => panic!("/dev/shm is tmpfs, yet a device was found: {d:?}"),
            Err(why) => assert!(why.contains("RAM disk"), "{why}"),
        }
        assert!(load1().is_some(), "/proc/loadavg must read");
    }
}
