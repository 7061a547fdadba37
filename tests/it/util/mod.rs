//! Helpers for integration tests: running the binary, real peer servers on free loopback
//! ports, and polling instead of sleeping.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; good enough for a test's lifetime).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Polls `cond` every 20 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Path of a required external program. In CI (CI set) a missing program fails the test,
/// because CI installs every peer; elsewhere the test is skipped with a printed reason.
pub fn require(program: &str) -> Option<PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return Some(p);
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("{program} is not installed; CI must install it (scripts/install-deps.sh)");
    }
    eprintln!("SKIP: {program} not installed (run scripts/install-deps.sh)");
    None
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates a fresh, world-writable directory (peers may drop privileges).
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "mailbench-it-{tag}-{}-{}",
            std::process::id(),
            fastrand_u64()
        ));
        std::fs::create_dir_all(&p).expect("create temp dir");
        set_mode(&p, 0o777);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

/// A running child process, killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends SIGTERM to `child` (how a user stops a run, and what it must survive).
pub fn sigterm(child: &Child) {
    assert!(send_term(child), "kill -TERM {} failed", child.id());
}

/// SIGTERM without asserting (safe in `drop` while a test unwinds).
fn send_term(child: &Child) -> bool {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// A running mailbench stopped with SIGTERM (and waited for) when the test ends, even by a
/// failed assertion: a run must get the chance to write its results and remove its lab.
pub struct Terminated(pub Child);

impl Terminated {
    /// SIGTERM, then the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        sigterm(&self.0);
        self.0.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Terminated {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait()
            && send_term(&self.0)
        {
            let _ = self.0.wait();
        }
    }
}

/// Postfix's smtp-sink on a free port; `extra` are more flags (e.g. dump options).
pub fn smtp_sink(extra: &[&str]) -> Option<(Proc, u16)> {
    let bin = require("smtp-sink")?;
    let port = free_port();
    let child = Command::new(bin)
        .args(["-u", "nobody"])
        .args(extra)
        .arg(format!("127.0.0.1:{port}"))
        .arg("1024")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start smtp-sink");
    let proc = Proc(child);
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "smtp-sink did not listen on port {port}"
    );
    Some((proc, port))
}

/// The mailbench binary under test.
pub fn mailbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mailbench"))
}

/// Runs mailbench with `args`; returns the output.
pub fn run(args: &[&str]) -> Output {
    mailbench().args(args).output().expect("run mailbench")
}

/// Describes an output for assertion messages.
pub fn describe(args: &[&str], out: &Output) -> String {
    format!(
        "mailbench {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs mailbench and expects exit code `code`.
pub fn run_expect(args: &[&str], code: i32) -> Output {
    let out = run(args);
    assert_eq!(out.status.code(), Some(code), "{}", describe(args, &out));
    out
}

/// Reads a results file.
pub fn results(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("results file written");
    serde_json::from_str(&text).expect("results file is JSON")
}

/// Checks that a results summary and what `--threshold` may name agree: every number (or
/// yes/no) in the summary can be named, and every name is in the summary, except those in
/// `optional` (present only in some runs).
pub fn assert_threshold_keys(
    r: &serde_json::Value,
    v: &mailbench::stats::summary::Vocabulary,
    optional: &[&str],
) {
    let keys: Vec<&str> = v.keys().collect();
    let summary = r["summary"].as_object().expect("summary");
    for (k, v) in summary {
        if v.is_number() || v.is_boolean() {
            assert!(
                keys.contains(&k.as_str()),
                "summary key {k} cannot be named in --threshold"
            );
        }
    }
    for k in &keys {
        assert!(
            summary.contains_key(*k) || optional.contains(k),
            "--threshold accepts {k}, which the summary lacks: {summary:#?}"
        );
    }
}
