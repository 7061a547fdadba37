//! Issue 29: `relay --trace-io`. A known program's fsyncs, files created, renamed and
//! unlinked and bytes written counted exactly, and strace agreeing; a lab Postfix's figures
//! per message what Postfix does for each; refusals in one line; tracefs left as found.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use mailbench::run::iotrace::{IoCounts, IoTrace};

use crate::util::{TempDir, describe, lab_relay, require, run};

/// Says it is ready and waits for a byte on stdin (the trace starts meanwhile), then: 4 files created with
/// O_EXCL, 1000 bytes written to each and fsynced; an O_EXCL open of an existing file and
/// an open without O_CREAT (neither creates); an fdatasync; 3 renames and a failed one; 2
/// unlinks and a failed one; a forked child creating, writing 500 bytes to, fsyncing and
/// unlinking one more file.
const PROGRAM: &str = r#"
import os, sys
d = sys.argv[1]
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.read(1)
for i in range(4):
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"x" * 1000)
    os.fsync(fd)
    os.close(fd)
try:
    os.open(f"{d}/f0", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except FileExistsError:
    pass
os.close(os.open(f"{d}/f0", os.O_RDONLY))
fd = os.open(f"{d}/f1", os.O_WRONLY)
os.fdatasync(fd)
os.close(fd)
for i in range(3):
    os.rename(f"{d}/f{i}", f"{d}/g{i}")
try:
    os.rename(f"{d}/none", f"{d}/x")
except FileNotFoundError:
    pass
os.unlink(f"{d}/g0")
os.unlink(f"{d}/g1")
try:
    os.unlink(f"{d}/none")
except FileNotFoundError:
    pass
pid = os.fork()
if pid == 0:
    fd = os.open(f"{d}/child", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"y" * 500)
    os.fsync(fd)
    os.close(fd)
    os.unlink(f"{d}/child")
    os._exit(0)
os.waitpid(pid, 0)
"#;

/// Whether tracefs is mounted, and the trace instances in it.
fn tracefs_state() -> (bool, Vec<String>) {
    let instances = Path::new("/sys/kernel/tracing/instances");
    let names = std::fs::read_dir(instances)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("mailbench-"))
                .collect()
        })
        .unwrap_or_default();
    (instances.is_dir(), names)
}

/// strace's successful calls per syscall of the program run under `strace -f -c`.
fn strace_successes(dir: &Path) -> std::collections::HashMap<String, u64> {
    let out_file = dir.join("strace.txt");
    let mut child = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&out_file)
        .args([
            "-e",
            "trace=fsync,fdatasync,sync_file_range,rename,renameat,renameat2,unlink,unlinkat",
            "python3",
            "-I",
            "-S",
            "-B",
            "-c",
            PROGRAM,
        ])
        .arg(dir.join("s"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run strace");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"g")
        .expect("start the program");
    assert!(child.wait().expect("strace ends").success());
    let table = std::fs::read_to_string(&out_file).expect("strace's table");
    table
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let (calls, errors) = match t.len() {
                5 => (t[3].parse::<u64>().ok()?, 0),
                6 => (t[3].parse::<u64>().ok()?, t[4].parse::<u64>().ok()?),
                _ => return None,
            };
            Some((t[t.len() - 1].to_string(), calls - errors))
        })
        .collect()
}

#[test]
fn a_known_program_is_counted_exactly_and_strace_agrees() {
    if require("strace").is_none() || require("python3").is_none() {
        return;
    }
    let dir = TempDir::new("iotrace");
    for sub in ["t", "s"] {
        std::fs::create_dir(dir.0.join(sub)).expect("mkdir");
    }
    let before = tracefs_state();
    let mut child = Command::new("python3")
        .args(["-I", "-S", "-B", "-c", PROGRAM])
        .arg(dir.0.join("t"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("the program starts");
    assert_eq!(ready, "ready\n");
    let trace = IoTrace::start(&[child.id()]).expect("tracing starts (as root)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"g")
        .expect("start the program");
    assert!(child.wait().expect("the program ends").success());
    let counts = trace.finish().expect("the trace ends");
    assert_eq!(
        IoCounts {
            context_switches: 0,
            ..counts.clone()
        },
        IoCounts {
            fsyncs: 6,
            files_created: 5,
            renames: 3,
            unlinks: 3,
            bytes_written: 4500,
            context_switches: 0,
            forks: 1,
            lost: 0,
        },
        "{counts:?}"
    );
    assert!(counts.context_switches >= 1, "{counts:?}");
    assert_eq!(tracefs_state(), before, "tracefs left as it was found");

    let s = strace_successes(&dir.0);
    let sum =
        |names: &[&str]| -> u64 { names.iter().map(|n| s.get(*n).copied().unwrap_or(0)).sum() };
    assert_eq!(
        counts.fsyncs,
        sum(&["fsync", "fdatasync", "sync_file_range"]),
        "strace: {s:?}"
    );
    assert_eq!(
        counts.renames,
        sum(&["rename", "renameat", "renameat2"]),
        "strace: {s:?}"
    );
    assert_eq!(
        counts.unlinks,
        sum(&["unlink", "unlinkat"]),
        "strace: {s:?}"
    );
}

#[test]
fn a_lab_postfix_creates_renames_twice_and_removes_one_queue_file_per_message() {
    let dir = TempDir::new("iotrace-postfix");
    let before = tracefs_state();
    let Some(r) = lab_relay(&["-n", "300", "--trace-io"], &dir.0.join("r.json")) else {
        return;
    };
    crate::relay::assert_exactly_once(&r, 300);
    let s = &r["summary"];
    let io = &r["extra"]["iotrace"];
    let per = |k: &str| {
        s[k].as_f64()
            .unwrap_or_else(|| panic!("summary lacks {k}: {s:#}"))
    };
    assert_eq!(io["lost"], 0, "{io:#}");
    // cleanup: one queue file in incoming/, fsynced once before the 250, renamed to its
    // queue id; qmgr: renamed into active/, unlinked once delivered. A few files beside
    // (Postfix's own, at start-up of a process) are allowed, not a second one per message.
    assert_eq!(per("fsyncs_per_msg"), 1.0, "{io:#}");
    assert_eq!(per("renames_per_msg"), 2.0, "{io:#}");
    assert_eq!(per("unlinks_per_msg"), 1.0, "{io:#}");
    let created = per("files_created_per_msg");
    assert!((1.0..1.05).contains(&created), "{io:#}");
    let size = s["bytes"].as_f64().unwrap_or(0.0) / 300.0;
    let written = per("bytes_written_per_msg");
    assert!(
        written > size,
        "{written} bytes written per message of {size}: {io:#}"
    );
    assert!(per("ctx_switches_per_msg") > 0.0, "{io:#}");
    assert_eq!(tracefs_state(), before, "tracefs left as it was found");
    crate::util::assert_threshold_keys(
        &r,
        &mailbench::relay::THRESHOLDS,
        &crate::util::relay_keys_but(&[
            "fsyncs_per_msg",
            "files_created_per_msg",
            "renames_per_msg",
            "unlinks_per_msg",
            "bytes_written_per_msg",
            "ctx_switches_per_msg",
        ]),
    );
}

#[test]
fn trace_io_refuses_in_one_line_without_root_or_without_processes_to_trace() {
    let args = ["relay", "--target", "127.0.0.1:9", "-n", "1", "--trace-io"];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", describe(&args, &out));
    assert!(err.contains("--trace-io needs --lab or --sut-pid"), "{err}");

    let bin = env!("CARGO_BIN_EXE_mailbench");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
        .args(&args[..5])
        .args(["--sut-pid", "1", "--trace-io"])
        .output()
        .expect("run setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--trace-io needs root"), "{err}");
}
