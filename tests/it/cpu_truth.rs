//! Issue 40 — what the system under test costs, against a cgroup's count (the kernel's
//! own, exact to the nanosecond, counted as the CPU is used and not when a parent reaps a
//! child). A process tree that burns a known amount of CPU, with children and
//! grandchildren that exit in the middle of intervals, watched by mailbench's sampler,
//! interval by interval; a qmail lab at saturation (its `qmail-smtpd` processes all exit
//! in one interval at the end of the injection) watched by `relay --sut-pid`, its text,
//! results file and every interval; the proportional set size against `smaps_rollup` read
//! by Python.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailbench::run::sampler::{Pids, Sampler};
use mailbench::stats::IntervalPoint;

use crate::util::{TempDir, describe, free_port, results};

/// A cgroup of the test's own: on the unified hierarchy (cgroup v2) where there is one,
/// else on v1's cpuacct. Its processes go back to the root when it is dropped.
struct Cgroup {
    dir: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// A new cgroup named after `tag`; a failure names what this machine lacks.
    fn new(tag: &str) -> Cgroup {
        let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let mount = |want: &dyn Fn(&[&str]) -> bool| {
            info.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let dash = f.iter().position(|x| *x == "-")?;
                want(&f[dash + 1..]).then(|| PathBuf::from(f[4]))
            })
        };
        let (root, v2) = match mount(&|f| f.first() == Some(&"cgroup2")) {
            Some(root) => (root, true),
            None => (
                mount(&|f| {
                    f.first() == Some(&"cgroup") && f.get(3).is_some_and(|o| o.contains("cpuacct"))
                })
                .expect(
                    "this test needs cgroup v2 or v1's cpuacct mounted (see /proc/self/mountinfo)",
                ),
                false,
            ),
        };
        let dir = root.join(format!("mailbench-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| {
            panic!(
                "create the cgroup {} (tests run as root): {e}",
                dir.display()
            )
        });
        Cgroup { dir, v2 }
    }

    /// Moves process `pid` (not its children already born) into the cgroup.
    fn add(&self, pid: u32) {
        // A process that just ended cannot move, and needs not.
        let _ = std::fs::write(self.dir.join("cgroup.procs"), pid.to_string());
    }

    /// CPU seconds its processes used since they joined it.
    fn usage_s(&self) -> f64 {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).expect("a cgroup's count");
        if self.v2 {
            let stat = read("cpu.stat");
            let usec: f64 = stat
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse().ok())
                .expect("usage_usec in cpu.stat");
            usec / 1e6
        } else {
            read("cpuacct.usage")
                .trim()
                .parse::<f64>()
                .expect("cpuacct.usage")
                / 1e9
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let parent = self
            .dir
            .parent()
            .expect("a cgroup's parent")
            .join("cgroup.procs");
        for pid in std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
        {
            let _ = std::fs::write(&parent, pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The cgroup's count read every 10 ms from another thread, each at its wall-clock time
/// (µs since the Unix epoch), until dropped: the whole cgroup's, less what one process in
/// it used itself, or a child cgroup's once it exists.
struct Watch {
    readings: Arc<Mutex<Vec<(u64, f64)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a [`Watch`] reads of its cgroup.
#[derive(Clone, Copy)]
enum Count {
    Whole,
    /// Less what this process used itself (and the children it reaped).
    Less(u32),
    /// The child cgroup whose name ends so.
    Child(&'static str),
}

impl Watch {
    fn start(cg: &Cgroup, count: Count) -> Watch {
        let readings = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (r, s, dir, v2) = (readings.clone(), stop.clone(), cg.dir.clone(), cg.v2);
        let thread = std::thread::spawn(move || {
            let cg = std::mem::ManuallyDrop::new(Cgroup { dir, v2 });
            let mut last_own = 0.0;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let used = match count {
                    Count::Whole => Some(cg.usage_s()),
                    Count::Less(pid) => {
                        let used = cg.usage_s();
                        // Once the process has ended its last count holds.
                        if Path::new(&format!("/proc/{pid}/stat")).exists() {
                            last_own = own_cpu_s(pid).max(last_own);
                        }
                        Some(used - last_own)
                    }
                    Count::Child(suffix) => std::fs::read_dir(&cg.dir)
                        .ok()
                        .and_then(|rd| {
                            rd.flatten()
                                .find(|e| e.file_name().to_string_lossy().ends_with(suffix))
                        })
                        .map(|e| {
                            std::mem::ManuallyDrop::new(Cgroup { dir: e.path(), v2 }).usage_s()
                        }),
                };
                if let Some(used) = used {
                    r.lock().expect("readings").push((now_us(), used));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Watch {
            readings,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops; the readings.
    fn finish(mut self) -> Vec<(u64, f64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.readings.lock().expect("readings"))
    }
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The cgroup's CPU seconds between wall-clock `a` and `b` (µs), on the line between its
/// readings.
fn used_between(r: &[(u64, f64)], a: f64, b: f64) -> f64 {
    let at = |t: f64| {
        let i = r.partition_point(|(u, _)| (*u as f64) < t);
        match (i.checked_sub(1).and_then(|j| r.get(j)), r.get(i)) {
            (Some(x), Some(y)) => {
                let w = (t - x.0 as f64) / ((y.0 - x.0) as f64).max(1.0);
                x.1 + (y.1 - x.1) * w
            }
            (None, Some(y)) => y.1,
            (Some(x), None) => x.1,
            (None, None) => 0.0,
        }
    };
    at(b) - at(a)
}

/// A program that burns exactly `s` seconds of its own CPU (Python's process clock, its
/// start included) and exits.
fn burn(s: f64) -> String {
    format!("python3 -c 'import time\nwhile time.process_time() < {s}: pass'")
}

/// The tree: a shell in `cg` that runs, one after another, burners of 0.45 s and shells
/// that run three burners of 0.15 s each (grandchildren their shell reaps, so that a
/// child's exit carries reaped CPU into its parent), 4.2 s of CPU in all; none of them
/// ends on an interval's edge but by chance.
fn burner(cg: &Cgroup) -> Child {
    let three = format!("sh -c \"{b}; {b}; {b}\"", b = burn(0.15));
    let mut script = format!("echo $$ > {}/cgroup.procs\n", cg.dir.display());
    for _ in 0..3 {
        script.push_str(&format!("{}\n{three}\n", burn(0.45)));
    }
    Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .expect("run sh")
}

/// A series of `interval`-long points from `zero_us` until `end_s`, as a run's would be.
fn grid(end_s: f64, interval: f64) -> Vec<IntervalPoint> {
    let mut out = Vec::new();
    let mut t = 0.0;
    while t < end_s - 1e-9 {
        let next = (t + interval).min(end_s);
        out.push(IntervalPoint {
            t_s: next,
            dt_s: next - t,
            ..IntervalPoint::default()
        });
        t = next;
    }
    out
}

fn cpu_pct(p: &IntervalPoint) -> f64 {
    p.relay
        .sut
        .as_ref()
        .map_or(f64::NAN, |s| s.cpu_user_pct + s.cpu_sys_pct)
}

fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

#[test]
fn a_tree_whose_children_exit_mid_interval_costs_what_its_cgroup_counts_interval_by_interval() {
    let cg = Cgroup::new("burner");
    let watch = Watch::start(&cg, Count::Whole);
    std::thread::sleep(Duration::from_millis(50));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut child = burner(&cg);
    let root = child.id();
    let (observed, zero_us, end_s) = rt.block_on(async {
        let pids: Pids = Arc::new(move || mailbench::stats::sut::descendants(&[root]));
        let start = Instant::now();
        let zero_us = now_us();
        let sampler = Sampler::start(pids, None, None, None, Duration::from_secs(1), start);
        // Until the tree is done (or 20 s on a machine too busy to give it its CPU).
        let limit = Instant::now() + Duration::from_secs(20);
        while Path::new(&format!("/proc/{root}")).exists()
            && std::fs::read_to_string(format!("/proc/{root}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
            && Instant::now() < limit
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let observed = sampler.finish().await;
        (observed, zero_us, start.elapsed().as_secs_f64())
    });
    let _ = child.wait();
    let reference = watch.finish();
    let mut points = grid(end_s, 1.0);
    observed.fill(&mut points, zero_us);
    let report = observed.report(&points);
    let total = reference.last().map_or(0.0, |r| r.1);
    // What the tree burned, by its programs' own clocks: 3 × 0.45 + 9 × 0.15 = 2.7 s, plus
    // the shells and each of the 12 Pythons' start and exit: under 100 ms each when warm,
    // more on a fresh machine's first runs (CI's cgroup counted 3.916 s). This only checks
    // that the burners ran; the figures below are checked against the cgroup's own count.
    assert!(
        (2.7..5.5).contains(&total),
        "the cgroup counted {total:.3} s; the burners alone take 2.7 s"
    );
    let mine =
        report["cpu_user_s"].as_f64().unwrap_or(0.0) + report["cpu_sys_s"].as_f64().unwrap_or(0.0);
    let watched = report["watched_s"].as_f64().unwrap_or(0.0);
    let theirs_watched = used_between(&reference, zero_us as f64, zero_us as f64 + watched * 1e6);
    // The shells' reaped children at the watch's two ends, each a sum /proc rounds to a
    // tick (10 ms; half a tick added back), and the kernel's count of a running task
    // updated at its scheduler tick (4 ms at HZ=250) for both readers: 40 ms.
    assert!(
        (mine - theirs_watched).abs() <= 0.04,
        "over the {watched:.3} s watched the cgroup counted {theirs_watched:.3} s of CPU, mailbench {mine:.3} s"
    );
    let avg = report["cpu_avg_pct"].as_f64().unwrap_or(0.0);
    assert!(
        (avg - mine / watched * 100.0).abs() < 1e-6,
        "the average is over the time watched: {report}"
    );
    let peak = report["cpu_peak_pct"].as_f64().unwrap_or(0.0);
    assert!(peak >= avg, "peak {peak} below average {avg}");
    let mut lines = Vec::new();
    let mut worst: f64 = 0.0;
    for p in &points {
        let (a, b) = (
            zero_us as f64 + (p.t_s - p.dt_s) * 1e6,
            zero_us as f64 + p.t_s * 1e6,
        );
        let theirs = used_between(&reference, a, b) / p.dt_s * 100.0;
        let ours = cpu_pct(p);
        worst = worst.max((ours - theirs).abs() * p.dt_s);
        lines.push(format!(
            "{:>6.3} s: cgroup {theirs:6.1} %  mailbench {ours:6.1} %",
            p.t_s
        ));
        assert!(ours <= 100.0 * cpus(), "{ours} % on {} CPUs", cpus());
    }
    // What /proc cannot give exactly: the shells' reaped children, a sum the kernel
    // rounds down to a tick when it prints it (mailbench adds back the half tick lost on
    // average): half a tick either way for each of cutime and cstime of the two shells
    // at each end of an interval, 4 ticks (40 ms) in all at most.
    eprintln!("{}", lines.join("\n"));
    assert!(
        worst <= 4.0,
        "each interval within 40 ms of CPU of the cgroup's count:\n{}",
        lines.join("\n")
    );
}

/// Whether qmail is built for the lab; in CI (which builds it) its absence fails.
fn qmail_built() -> bool {
    crate::util::require("tcpserver").is_some()
        && (Path::new("/opt/mailbench/mtas/qmail/.mailbench-archive").exists() || {
            if std::env::var_os("CI").is_some() {
                panic!("qmail is not built for the lab; CI must run scripts/install-mtas.sh");
            }
            eprintln!("SKIP: run scripts/install-mtas.sh for the qmail lab");
            false
        })
}

/// The injection that saturates the qmail lab on two cores: 20 connections, each its
/// `qmail-smtpd` forking a `qmail-queue` per message, all 20 ending together.
const SATURATING: [&str; 6] = ["-n", "3000", "-c", "20", "--size", "5k"];

/// A relay run's CPU figures against the cgroup's `reference` (wall-clock µs, seconds):
/// the totals, the average over the time watched and said so in the text, no interval
/// above the machine or the peak, the intervals adding up to the total, and each within
/// `within` seconds of CPU of the cgroup's count over its span (when given).
fn check_cpu(r: &serde_json::Value, text: &str, reference: &[(u64, f64)], within: Option<f64>) {
    let sut = &r["extra"]["sut"];
    let f = |k: &str| {
        sut[k]
            .as_f64()
            .unwrap_or_else(|| panic!("extra.sut.{k}: {sut}"))
    };
    let (total, watched, avg, peak) = (
        f("cpu_user_s") + f("cpu_sys_s"),
        f("watched_s"),
        f("cpu_avg_pct"),
        f("cpu_peak_pct"),
    );
    // The lab used next to nothing outside the watch: the cgroup's whole count.
    let theirs = reference.last().map_or(0.0, |x| x.1) - reference.first().map_or(0.0, |x| x.1);
    assert!(
        (total - theirs).abs() <= 0.02 * theirs + 0.05,
        "the cgroup counted {theirs:.3} s of qmail's CPU, mailbench {total:.3} s"
    );
    assert!((avg - total / watched * 100.0).abs() < 1e-6, "{sut}");
    assert!(peak >= avg, "peak {peak} below the average {avg}: {sut}");
    let said = format!(
        "cpu {:.2} s user + {:.2} s sys ({avg:.0} % of a core on average over the {watched:.1} s watched, peak {peak:.0} %)",
        f("cpu_user_s"),
        f("cpu_sys_s")
    );
    assert!(text.contains(&said), "expected {said:?} in:\n{text}");
    let zero = r["started_at_us"].as_f64().expect("started_at_us");
    let mut lines = Vec::new();
    let (mut worst, mut sum): (f64, f64) = (0.0, 0.0);
    for p in r["series"].as_array().expect("a series") {
        let (t, dt) = (
            p["t_s"].as_f64().unwrap_or(0.0),
            p["dt_s"].as_f64().unwrap_or(0.0),
        );
        let s = p
            .get("sut")
            .unwrap_or_else(|| panic!("every point has the MTA's reading: {p}"));
        let ours =
            s["cpu_user_pct"].as_f64().unwrap_or(0.0) + s["cpu_sys_pct"].as_f64().unwrap_or(0.0);
        let theirs = used_between(reference, zero + (t - dt) * 1e6, zero + t * 1e6) / dt * 100.0;
        sum += ours * dt / 100.0;
        worst = worst.max((ours - theirs).abs() * dt / 100.0);
        lines.push(format!(
            "{t:>6.3} s ({dt:.3} s): cgroup {theirs:6.1} %  mailbench {ours:6.1} %"
        ));
        assert!(ours <= 100.0 * cpus(), "{ours} % on {} CPUs", cpus());
        assert!(ours <= peak + 1e-9, "{ours} % above the peak {peak}");
        assert!(dt >= 0.25, "a point of {dt} s: a rate over a sliver");
    }
    eprintln!("{}", lines.join("\n"));
    assert!(
        (sum - total).abs() <= 0.02 * total + 0.02,
        "the intervals add up to {sum:.3} s, the run to {total:.3} s"
    );
    if let Some(within) = within {
        assert!(
            worst <= within,
            "each interval within {within} s of CPU of the cgroup's count:\n{}",
            lines.join("\n")
        );
    }
}

/// The CPU seconds process `pid` and the children it reaped have used, as `/proc` gives
/// them (its threads' exact run time where it is larger than its ticks).
fn own_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |x| x.1)
        .split_whitespace()
        .collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    let ran: f64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|t| {
                    std::fs::read_to_string(t.path().join("schedstat"))
                        .ok()?
                        .split_whitespace()
                        .next()?
                        .parse::<f64>()
                        .ok()
                })
                .sum::<f64>()
                / 1e9
        })
        .unwrap_or(0.0);
    ran.max(n(11) + n(12)) + n(13) + n(14)
}

#[test]
fn a_saturated_qmail_lab_costs_what_its_cgroup_counts_in_every_interval() {
    if !qmail_built() {
        return;
    }
    // mailbench runs in the test's cgroup, so its lab does too: the cgroup's count less
    // mailbench's own is the lab's. mailbench counts the lab it started in a cgroup of its
    // own below that one (or from /proc where it cannot make one).
    let cg = Cgroup::new("qmail-lab");
    let dir = TempDir::new("cpu-qmail-lab");
    let json = dir.0.join("r.json");
    let mut args = vec!["relay", "--lab", "qmail", "--json"];
    let j = json.to_string_lossy().to_string();
    args.push(&j);
    args.extend(SATURATING);
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
        cg.dir.display()
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_mailbench"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mailbench");
    let relay = child.id();
    let (whole, lab) = (
        Watch::start(&cg, Count::Less(relay)),
        Watch::start(&cg, Count::Child("-watch")),
    );
    let out = child.wait_with_output().expect("mailbench's output");
    let (whole, lab) = (whole.finish(), lab.finish());
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let r = results(&json);
    assert_eq!(
        r["extra"]["sut"]["cpu_from"], "cgroup",
        "{}",
        r["extra"]["sut"]
    );
    // Against the kernel's count of the cgroup mailbench made, interval by interval: what
    // it read is put on the series exactly, but the two read at other instants, and a
    // running task's count moves at its scheduler tick (4 ms at HZ=250, on each of 2
    // CPUs, for each reader at each end of an interval): 40 ms of CPU at most.
    check_cpu(&r, &text, &lab, Some(0.04));
    // Against the test's cgroup less mailbench's own CPU, in total: every process of the
    // lab is counted, none left outside mailbench's cgroup. Not interval by interval:
    // mailbench's own CPU, subtracted, is /proc's, whose threads that ended are known
    // only in ticks and whose reaped children only when reaped.
    check_cpu(&r, &text, &whole, None);
    let left: Vec<String> = std::fs::read_dir(&cg.dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "mailbench's cgroup is removed: {left:?}");
}

#[test]
fn a_saturated_qmail_of_ones_own_read_from_proc_stays_within_the_machine_and_its_cgroup() {
    if !qmail_built() {
        return;
    }
    // A lab mailbench did not start (`--target`, `--sut-pid`), in a cgroup of the test's:
    // mailbench reads it from /proc, where a process's reaped children show as a sum
    // rounded down to a tick, and those forked since the last reading only once found.
    let sink = free_port();
    let lab = mailbench::lab::qmail::KIND
        .start(&mailbench::lab::LabOptions {
            hops: 1,
            queue: mailbench::lab::QueueKind::Tmpfs,
            settings: Vec::new(),
            limits: Default::default(),
            relay: ([127, 0, 0, 1], sink).into(),
            relay_lmtp: false,
            starttls: false,
            hold: false,
            dkim: None,
            dns: None,
            lookup: None,
            logging: mailbench::lab::MtaLogging::On,
            between: None,
        })
        .unwrap_or_else(|e| panic!("the qmail lab starts (tests run as root): {e}"));
    let cg = Cgroup::new("qmail-proc");
    let roots = lab.pids();
    for p in &roots {
        cg.add(*p);
    }
    let dir = TempDir::new("cpu-qmail-proc");
    let json = dir.0.join("r.json");
    let (j, entry, sink_at) = (
        json.to_string_lossy().to_string(),
        lab.entry().to_string(),
        format!("127.0.0.1:{sink}"),
    );
    let mut args = vec![
        "relay", "--target", &entry, "--sink", &sink_at, "--json", &j,
    ];
    args.extend(SATURATING);
    let pids: Vec<String> = roots.iter().map(u32::to_string).collect();
    for p in &pids {
        args.extend(["--sut-pid", p]);
    }
    let watch = Watch::start(&cg, Count::Whole);
    let out = crate::util::run(&args);
    let reference = watch.finish();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout);
    // Each of the 20 qmail-smtpd's cutime and cstime rounded down (under two ticks), and
    // the qmail-queue processes born since the last reading: a tenth of a second at most
    // in practice, where issue 40 saw 2.4 s in one interval of 1 s on two cores.
    let r = results(&json);
    assert_eq!(
        r["extra"]["sut"]["cpu_from"], "proc",
        "{}",
        r["extra"]["sut"]
    );
    // 0.25 s: CI's fresh machine once read 0.204 s short in a 1.234 s interval (the
    // reading 0.23 s late at 180 % of the two cores) and 0.215 s over in the next; quiet
    // here the worst interval is 0.05-0.12 s (0.04-0.10 s before the context-switch
    // reads were added to each reading: under watch).
    check_cpu(&r, &text, &reference, Some(0.25));
    drop(lab);
}

/// A Python that names itself `mb-sleeper`, says `ready` and waits for a line; then
/// sleeps 200 × 5 ms, prints the voluntary and involuntary context switches its own
/// `getrusage(RUSAGE_SELF)` counted over the sleeps, and waits for a line again.
const SLEEPER: &str = "import ctypes, resource, sys, time
ctypes.CDLL(None).prctl(15, b'mb-sleeper', 0, 0, 0)
print('ready', flush=True)
sys.stdin.readline()
a = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(200):
    time.sleep(0.005)
b = resource.getrusage(resource.RUSAGE_SELF)
print(b.ru_nvcsw - a.ru_nvcsw, b.ru_nivcsw - a.ru_nivcsw, flush=True)
sys.stdin.readline()
";

/// Waits up to 5 s for process `pid` to be asleep (`S` in its stat): blocked in a read.
fn asleep(pid: u32) {
    let limit = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, f)| f.split_whitespace().next());
        if state == Some("S") {
            return;
        }
        assert!(
            Instant::now() < limit,
            "mb-sleeper {pid} never blocked in its read in 5 s: {stat}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn issue_43_a_process_that_sleeps_200_times_shows_its_own_context_switches_under_its_name() {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new("python3")
        .args(["-c", SLEEPER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut go = child.stdin.take().expect("stdin");
    let mut line = String::new();
    out.read_line(&mut line).expect("python's ready");
    assert_eq!(line, "ready\n", "python's first line");
    // Blocked in its read before the first reading: that wait is before what is counted.
    asleep(pid);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let (report, theirs) = rt.block_on(async {
        let pids: Pids = Arc::new(move || mailbench::stats::sut::descendants(&[pid]));
        let start = Instant::now();
        // Readings every 250 ms while it sleeps: the counts add up across them.
        let sampler = Sampler::start(pids, None, None, None, Duration::from_millis(250), start);
        go.write_all(b"go\n").expect("tell python to start");
        let theirs = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            out.read_line(&mut line).expect("python's counts");
            asleep(pid);
            line
        })
        .await
        .expect("python's counts");
        let observed = sampler.finish().await;
        let mut points = grid(start.elapsed().as_secs_f64(), 0.25);
        observed.fill(&mut points, now_us());
        (observed.report(&points), theirs)
    });
    drop(go);
    let _ = child.wait();
    let mut n = theirs.split_whitespace().map(|v| v.parse::<u64>());
    let (Some(Ok(vol)), Some(Ok(invol))) = (n.next(), n.next()) else {
        panic!("python printed its switches as two numbers: {theirs:?}");
    };
    assert!(
        vol >= 200,
        "200 sleeps are 200 waits at least: python counted {vol}"
    );
    let rows = report["by_process"]
        .as_array()
        .expect("extra.sut.by_process");
    let row = rows
        .iter()
        .find(|r| r["name"] == "mb-sleeper")
        .unwrap_or_else(|| panic!("a row for mb-sleeper: {rows:#?}"));
    let got = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("{k} in {row}"));
    // Between the first reading and the last mailbench sees one wait Python's two
    // getrusage calls do not: its read of the second line, after it printed. Nothing else
    // it does there waits (a write to a pipe with room, getrusage), so exactly one more.
    assert_eq!(
        got("vol_ctxt_switches"),
        vol + 1,
        "mb-sleeper's voluntary switches: python counted {vol} over its sleeps, and one wait after"
    );
    // The scheduler may take the CPU from it outside the sleeps too (2 cores shared with
    // the test's own threads): never fewer than Python counted, a few more at most.
    let i = got("invol_ctxt_switches");
    assert!(
        (invol..=invol + 3).contains(&i),
        "mb-sleeper's involuntary switches: python counted {invol} over its sleeps, mailbench {i}"
    );
}
