//! Issue 42, phase 1: does the sink keep what it acknowledged? A known value in, the exact
//! figure out, against the disk:
//!
//! - a power cut (LazyFS's `clear-cache`) under `mailbench sink --store dir:` loses exactly
//!   the messages LazyFS reported unsynced at the cut — those written since its last
//!   checkpoint — without `--fsync`, and none with it;
//! - on a small real ext4 (a loop-mounted image) that is full, the sink answers 452 and
//!   stores nothing; once space is freed it stores again; filling up during a run, what is
//!   on disk is exactly what it answered 250;
//! - nothing is left behind after each case (as `mount`, `losetup -a` and `ps` list them):
//!   no mount, no loop device, no LazyFS or sink process, also when a test fails midway
//!   (the guards' drops) or the run that made them died (the leftovers sweep).
//!
//! What the sink acknowledged comes from its results (the sequence numbers it answered 250,
//! per run); what survived is read from the disk by Python (the trace header and the length
//! of each file), not by mailbench. LazyFS and FUSE are required: without them these tests
//! fail and say how to get them (scripts/install-lazyfs.sh), they do not skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use mailbench::lab::fs::lazyfs::{self, LazyFs};
use mailbench::lab::fs::loopfs::LoopFs;

use crate::sink::Sink;
use crate::util::{TempDir, results, run_expect};

/// The size of every message sent here (headers included: `send --size` is exact).
const SIZE: usize = 1024;

/// A message as (run id in hex, sequence number).
type Seq = (String, u64);

/// Fails (never skips) where LazyFS cannot run, saying why and how to fix it.
fn need_lazyfs() {
    if let Err(e) = lazyfs::check() {
        panic!("{e}; the durability tests need LazyFS on FUSE (scripts/install-lazyfs.sh)");
    }
}

/// A lab directory for one test, removed at the end (after what is mounted in it is gone).
struct LabDir(PathBuf);

impl LabDir {
    fn new(tag: &str) -> LabDir {
        LabDir(mailbench::lab::fs::lab_dir(tag).expect("make a lab directory"))
    }
}

impl Drop for LabDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What reads the files the sink stored, as a stranger to mailbench would: each file is
/// the sink's `X-Mailbench-{Helo,From,To}` lines, then the message; a message is whole when
/// it has its trace header and is exactly the size sent.
const READER: &str = r#"
import json, os, re, sys
d, size = sys.argv[1], int(sys.argv[2])
out = {"complete": [], "incomplete": []}
for name in sorted(os.listdir(d)):
    p = os.path.join(d, name)
    with open(p, "rb") as f:
        data = f.read()
    msg = data
    for field in (b"X-Mailbench-Helo:", b"X-Mailbench-From:", b"X-Mailbench-To:"):
        if msg.startswith(field):
            msg = msg[msg.index(b"\r\n") + 2:]
    m = re.search(rb"^X-Mailbench-Trace: run=([0-9a-f]{16}); seq=(\d+);", msg, re.M)
    if m and len(msg) == size:
        out["complete"].append([m.group(1).decode(), int(m.group(2)), p, len(data)])
    else:
        out["incomplete"].append([p, len(data)])
print(json.dumps(out))
"#;

/// What is on disk in `dir`: the whole messages (with their file's path and size) and the
/// other files (path and size).
struct OnDisk {
    complete: BTreeMap<Seq, (PathBuf, u64)>,
    incomplete: BTreeMap<PathBuf, u64>,
}

fn on_disk(dir: &Path) -> OnDisk {
    let out = Command::new("python3")
        .args(["-c", READER])
        .arg(dir)
        .arg(SIZE.to_string())
        .output()
        .expect("run python3");
    assert!(out.status.success(), "the reader failed: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the reader's JSON");
    let mut d = OnDisk {
        complete: BTreeMap::new(),
        incomplete: BTreeMap::new(),
    };
    for c in v["complete"].as_array().expect("complete") {
        let key = (
            c[0].as_str().expect("run").to_string(),
            c[1].as_u64().expect("seq"),
        );
        let file = (
            PathBuf::from(c[2].as_str().expect("path")),
            c[3].as_u64().expect("len"),
        );
        assert!(
            d.complete.insert(key.clone(), file).is_none(),
            "{key:?} stored twice"
        );
    }
    for i in v["incomplete"].as_array().expect("incomplete") {
        d.incomplete.insert(
            PathBuf::from(i[0].as_str().expect("path")),
            i[1].as_u64().expect("len"),
        );
    }
    d
}

/// Every message the sink answered 250, from its results (`extra.runs.*.seen`).
fn acknowledged(sink: &serde_json::Value) -> BTreeSet<Seq> {
    let mut out = BTreeSet::new();
    for (run, r) in sink["extra"]["runs"].as_object().expect("extra.runs") {
        for range in r["seen"].as_array().expect("seen") {
            let (a, b) = (
                range[0].as_u64().expect("first"),
                range[1].as_u64().expect("last"),
            );
            out.extend((a..=b).map(|s| (run.clone(), s)));
        }
    }
    out
}

/// `mailbench send` of `n` messages of [`SIZE`] to `target`, which must exit 0; its results.
fn send(target: &str, n: u64, conns: u32, dir: &Path, tag: &str) -> serde_json::Value {
    send_exit(target, n, conns, dir, tag, 0)
}

/// [`send`] with the exit code it must end with (2: no message was accepted).
fn send_exit(
    target: &str,
    n: u64,
    conns: u32,
    dir: &Path,
    tag: &str,
    code: i32,
) -> serde_json::Value {
    let json = dir.join(format!("send-{tag}.json"));
    let (n, c, size) = (n.to_string(), conns.to_string(), SIZE.to_string());
    let j = json.to_string_lossy().to_string();
    run_expect(
        &[
            "send", target, "-n", &n, "-c", &c, "--size", &size, "-q", "--json", &j,
        ],
        code,
    );
    results(&json)
}

/// What is still there of the file systems made in `dir`, as util-linux and procps see
/// it: mounts at or below it (`mount`), loop devices backed by a file below it
/// (`losetup -a`), and live processes naming it (`ps`; zombies are not running).
pub(crate) fn left_behind(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    let below = |p: &str| p == d || p.starts_with(&format!("{d}/"));
    let lines = |cmd: &[&str]| -> Vec<String> {
        let out = Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    // `mount`: "SOURCE on POINT type TYPE (OPTIONS)".
    let mut v: Vec<String> = lines(&["mount"])
        .into_iter()
        .filter(|l| {
            l.split_once(" on ")
                .and_then(|(_, r)| r.split_once(" type "))
                .is_some_and(|(point, _)| below(point))
        })
        .map(|l| format!("mount: {l}"))
        .collect();
    v.extend(
        lines(&["losetup", "-a"])
            .into_iter()
            .filter(|l| l.contains(&d))
            .map(|l| format!("loop device: {l}")),
    );
    v.extend(
        lines(&["ps", "-eo", "pid=,stat=,args="])
            .into_iter()
            .filter(|l| {
                let stat = l.split_whitespace().nth(1).unwrap_or("");
                l.contains(&d) && !stat.starts_with('Z')
            })
            .map(|l| format!("process: {}", l.trim())),
    );
    v
}

/// The power cut as LazyFS makes it, with the sink storing each message in a file of its
/// own on LazyFS: 40 messages, a checkpoint (LazyFS writes its cache down: the last
/// sync), 25 more, LazyFS's report of what is unsynced, the cut. Returns what the sink
/// acknowledged per run, LazyFS's report, and what the disk holds after the cut.
struct Cut {
    first: BTreeSet<Seq>,
    second: BTreeSet<Seq>,
    unsynced: lazyfs::Unsynced,
    disk: OnDisk,
    sink: serde_json::Value,
}

fn power_cut(fsync: bool) -> Cut {
    need_lazyfs();
    let lab = LabDir::new("durability");
    let (mnt, root) = (lab.0.join("mnt"), lab.0.join("root"));
    let mut fs = LazyFs::start(&mnt, &root, &lab.0.join("lazyfs"), 64 << 20)
        .unwrap_or_else(|e| panic!("LazyFS did not start: {e}"));
    let json = lab.0.join("sink.json");
    let store = format!("dir:{}", mnt.join("msgs").display());
    let mut args = vec![
        "--no-starttls",
        "--store",
        &store,
        "--json",
        json.to_str().expect("utf-8 path"),
    ];
    if fsync {
        args.push("--fsync");
    }
    let sink = Sink::start(&args);
    let target = sink.target();
    let first = send(&target, 40, 4, &lab.0, "first");
    fs.checkpoint().expect("LazyFS checkpoint");
    let second = send(&target, 25, 4, &lab.0, "second");
    for (r, n) in [(&first, 40), (&second, 25)] {
        assert_eq!(
            r["summary"]["accepted"].as_u64(),
            Some(n),
            "every message stored through LazyFS (is it running? {}): {:#}",
            fs.running(),
            r["errors"]
        );
    }
    let unsynced = fs.unsynced().expect("LazyFS's unsynced-data report");
    fs.clear_cache().expect("LazyFS clear-cache");
    let (code, _) = sink.stop();
    assert_eq!(code, Some(0), "the sink's exit");
    fs.stop();
    assert_eq!(left_behind(&lab.0), Vec::<String>::new(), "left behind");
    let sink = results(&json);
    let acked = acknowledged(&sink);
    let run_of = |r: &serde_json::Value| r["run_id"].as_str().expect("run_id").to_string();
    let (a, b) = (run_of(&first), run_of(&second));
    let split =
        |run: &str| -> BTreeSet<Seq> { acked.iter().filter(|s| s.0 == run).cloned().collect() };
    let (first, second) = (split(&a), split(&b));
    assert_eq!(
        (first.len(), second.len(), acked.len()),
        (40, 25, 65),
        "the sink acknowledged every message of both runs: {sink:#}"
    );
    Cut {
        first,
        second,
        unsynced,
        disk: on_disk(&root.join("msgs")),
        sink,
    }
}

#[test]
fn a_power_cut_loses_exactly_the_messages_lazyfs_reports_unsynced_without_fsync() {
    let cut = power_cut(false);
    let survived: BTreeSet<Seq> = cut.disk.complete.keys().cloned().collect();
    let acked: BTreeSet<Seq> = cut.first.union(&cut.second).cloned().collect();
    let lost: BTreeSet<Seq> = acked.difference(&survived).cloned().collect();
    // The known value: the 25 written since the last sync are lost, the 40 before it kept.
    assert_eq!(
        lost, cut.second,
        "lost = acknowledged and not whole on disk"
    );
    assert_eq!(survived, cut.first, "what survived the cut");
    // LazyFS named those 25 files at the cut, and they are what the cut emptied.
    let emptied: Vec<PathBuf> = cut.disk.incomplete.keys().cloned().collect();
    assert_eq!(
        cut.unsynced.files, emptied,
        "the files LazyFS reported unsynced are the files the cut left incomplete"
    );
    assert_eq!(emptied.len(), 25);
    assert!(
        cut.disk.incomplete.values().all(|len| *len == 0),
        "LazyFS keeps a file's name and drops its unsynced data: {:?}",
        cut.disk.incomplete
    );
    // Its unsynced bytes are the 25 files' bytes as the sink wrote them (each as long as a
    // surviving one: the same envelope lines and the same size).
    let file_len = cut.disk.complete.values().next().expect("a survivor").1;
    assert!(cut.disk.complete.values().all(|f| f.1 == file_len));
    assert_eq!(
        cut.unsynced.bytes,
        25 * file_len,
        "unsynced bytes at the cut"
    );
    let store = &cut.sink["extra"]["store"];
    assert_eq!(
        (
            store["stored"].as_u64(),
            store["full"].as_u64(),
            store["fsync"].as_bool()
        ),
        (Some(65), Some(0), Some(false)),
        "{store}"
    );
}

#[test]
fn a_power_cut_loses_nothing_the_sink_acknowledged_with_fsync() {
    let cut = power_cut(true);
    let survived: BTreeSet<Seq> = cut.disk.complete.keys().cloned().collect();
    let acked: BTreeSet<Seq> = cut.first.union(&cut.second).cloned().collect();
    assert_eq!(
        survived, acked,
        "every acknowledged message whole on disk after the cut"
    );
    assert_eq!(
        cut.disk.incomplete,
        BTreeMap::new(),
        "no file emptied by the cut"
    );
    assert_eq!(
        cut.unsynced,
        lazyfs::Unsynced::default(),
        "LazyFS had nothing unsynced at the cut"
    );
    let store = &cut.sink["extra"]["store"];
    assert_eq!(
        (store["stored"].as_u64(), store["fsync"].as_bool()),
        (Some(65), Some(true)),
        "{store}"
    );
}

/// The messages of one send run in a set of acknowledged or stored ones.
fn of_run(set: &BTreeSet<Seq>, r: &serde_json::Value) -> BTreeSet<Seq> {
    let run = r["run_id"].as_str().expect("run_id");
    set.iter().filter(|s| s.0 == run).cloned().collect()
}

#[test]
fn a_full_disk_gets_452_and_keeps_exactly_what_was_acknowledged_and_recovers() {
    let lab = LabDir::new("diskfull");
    let mut disk = LoopFs::make(&lab.0.join("disk.img"), &lab.0.join("disk"), 16 << 20)
        .unwrap_or_else(|e| panic!("the loop file system: {e}"));
    let msgs = lab.0.join("disk/msgs");
    let json = lab.0.join("sink.json");
    let store = format!("dir:{}", msgs.display());
    let sink = Sink::start(&[
        "--no-starttls",
        "--store",
        &store,
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    let target = sink.target();
    // Full: every message refused with 452, none stored, no file left half written.
    disk.fill(0).expect("fill the disk");
    assert_eq!(disk.free_bytes(), Ok(0), "the disk is full");
    let full = send_exit(&target, 20, 2, &lab.0, "full", 2);
    assert_eq!(
        (
            full["summary"]["accepted"].as_u64(),
            full["summary"]["failed"].as_u64()
        ),
        (Some(0), Some(20)),
        "{:#}",
        full["summary"]
    );
    let errors = full["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        (
            errors[0]["code"].as_u64(),
            errors[0]["phase"].as_str(),
            errors[0]["count"].as_u64()
        ),
        (Some(452), Some("data_end"), Some(20)),
        "{errors:#?}"
    );
    let sample = errors[0]["sample"].as_str().unwrap_or("");
    assert!(
        sample.starts_with("452 4.3.1 insufficient system storage"),
        "{sample}"
    );
    let d = on_disk(&msgs);
    assert_eq!(
        (d.complete.len(), d.incomplete.len()),
        (0, 0),
        "{:?}",
        d.incomplete
    );
    // Space back: every message stored.
    disk.free().expect("free the disk");
    let freed = send(&target, 30, 2, &lab.0, "freed");
    assert_eq!(freed["summary"]["accepted"].as_u64(), Some(30));
    // Filling up during the run: some stored, the rest refused, none of them half.
    let filling = send(&target, 8_000, 4, &lab.0, "filling");
    let (stored, refused) = (
        filling["summary"]["accepted"].as_u64().expect("accepted"),
        filling["summary"]["failed"].as_u64().expect("failed"),
    );
    assert!(
        stored > 0 && refused > 0 && stored + refused == 8_000,
        "the disk filled during the run: {:#}",
        filling["summary"]
    );
    let (code, text) = sink.stop();
    assert_eq!(code, Some(0), "the sink's exit");
    let sink = results(&json);
    let acked = acknowledged(&sink);
    let d = on_disk(&msgs);
    let on: BTreeSet<Seq> = d.complete.keys().cloned().collect();
    assert_eq!(d.incomplete, BTreeMap::new(), "no file half written");
    assert_eq!(
        on, acked,
        "what is on disk is exactly what the sink acknowledged"
    );
    assert_eq!(of_run(&acked, &full).len(), 0);
    assert_eq!(of_run(&acked, &freed).len(), 30);
    assert_eq!(of_run(&acked, &filling).len() as u64, stored);
    let want = 20 + refused;
    let store = &sink["extra"]["store"];
    assert_eq!(
        (
            store["stored"].as_u64(),
            store["full"].as_u64(),
            store["failed"].as_u64()
        ),
        (Some(30 + stored), Some(want), Some(0)),
        "{store}"
    );
    let line = format!(
        "  store      stored {}  refused: 452 disk full {want}  451 failed 0",
        30 + stored
    );
    assert!(text.contains(&line), "expected {line:?} in:\n{text}");
    drop(disk);
    assert_eq!(left_behind(&lab.0), Vec::<String>::new(), "left behind");
}

#[test]
fn a_dead_runs_lazyfs_and_loop_mount_are_cleaned_by_the_sweep() {
    need_lazyfs();
    let root = TempDir::new("durability-sweep");
    let lab = root
        .0
        .join(format!("{}dead", mailbench::lab::leftovers::PREFIX));
    std::fs::create_dir_all(&lab).expect("mkdir");
    // Its owner: a process that has ended.
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    let _ = child.wait();
    std::fs::write(lab.join("owner"), format!("{pid} 1\n")).expect("owner record");
    let fs = LazyFs::start(
        &lab.join("mnt"),
        &lab.join("root"),
        &lab.join("lazyfs"),
        16 << 20,
    )
    .unwrap_or_else(|e| panic!("LazyFS did not start: {e}"));
    let disk = LoopFs::make(&lab.join("disk.img"), &lab.join("disk"), 8 << 20)
        .unwrap_or_else(|e| panic!("the loop file system: {e}"));
    let there = left_behind(&lab);
    assert_eq!(
        there.len(),
        4,
        "two mounts, a loop device, LazyFS: {there:#?}"
    );
    // The run dies: nothing of it is stopped or unmounted by itself.
    std::mem::forget(fs);
    std::mem::forget(disk);
    let said = mailbench::lab::leftovers::sweep_in(std::slice::from_ref(&root.0));
    // LazyFS unmounts itself when the sweep's SIGTERM ends it (libfuse's signal handling)
    // and has exited by the time the sweep unmounts: the sweep unmounts the loop mount.
    assert_eq!(
        said,
        vec![format!(
            "cleaned up a lab left by mailbench process {pid}, which is gone: stopped 1 process, unmounted 1 file system, removed {}",
            lab.display()
        )]
    );
    assert_eq!(left_behind(&lab), Vec::<String>::new(), "left behind");
    assert!(!lab.exists());
}

#[test]
fn a_test_that_fails_midway_leaves_nothing_behind() {
    need_lazyfs();
    // A run with everything up — LazyFS, a loop mount, a sink storing on LazyFS — that
    // fails before any of its own teardown: what it made is undone as it unwinds.
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = std::thread::spawn(move || {
        let lab = LabDir::new("midway");
        let _fs = LazyFs::start(
            &lab.0.join("mnt"),
            &lab.0.join("root"),
            &lab.0.join("lazyfs"),
            16 << 20,
        )
        .unwrap_or_else(|e| panic!("LazyFS did not start: {e}"));
        let _disk = LoopFs::make(&lab.0.join("disk.img"), &lab.0.join("disk"), 8 << 20)
            .unwrap_or_else(|e| panic!("the loop file system: {e}"));
        let store = format!("dir:{}", lab.0.join("mnt/msgs").display());
        let sink = Sink::start(&["--no-starttls", "--store", &store]);
        let sent = send(&sink.target(), 10, 2, &lab.0, "midway");
        assert_eq!(sent["summary"]["accepted"].as_u64(), Some(10));
        let there = left_behind(&lab.0);
        tx.send((lab.0.clone(), there))
            .expect("send the lab's path");
        panic!("a failure midway (on purpose)");
    })
    .join();
    assert!(failed.is_err(), "the run was to fail midway");
    let (lab, there) = rx.recv().expect("the run got as far as its failure");
    // Two mounts, one loop device, LazyFS and the sink, while it ran.
    assert_eq!(
        there
            .iter()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["mount", "mount", "loop device", "process", "process"],
        "{there:#?}"
    );
    assert_eq!(left_behind(&lab), Vec::<String>::new(), "left behind");
    assert!(!lab.exists(), "{} removed", lab.display());
}

#[test]
fn lazyfs_reports_the_space_of_its_root() {
    need_lazyfs();
    // A file system that says it has no room makes a mail server on it refuse all mail
    // (Postfix: 452): LazyFS must report its root's size and free space (statfs.patch).
    let lab = LabDir::new("statfs");
    let (mnt, root) = (lab.0.join("mnt"), lab.0.join("root"));
    let _fs = LazyFs::start(&mnt, &root, &lab.0.join("lazyfs"), 16 << 20)
        .unwrap_or_else(|e| panic!("LazyFS did not start: {e}"));
    // coreutils' stat -f: block size and total blocks (what does not move while it runs).
    let statfs = |p: &Path| {
        let out = Command::new("stat")
            .args(["-f", "-c", "%S %b"])
            .arg(p)
            .output()
            .expect("run stat -f");
        assert!(out.status.success(), "stat -f {}: {out:?}", p.display());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (on, below) = (statfs(&mnt), statfs(&root));
    assert_eq!(
        on, below,
        "stat -f on LazyFS (left) and on its root (right)"
    );
    assert!(!on.ends_with(" 0"), "a size of 0 blocks: {on}");
}
