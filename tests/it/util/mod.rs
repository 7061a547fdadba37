//! Helpers for integration tests: running the binary, real peer servers on free loopback
//! ports, and polling instead of sleeping.

pub mod proxy;
pub mod slurm;
pub mod split;

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

/// A self-signed CA of a stranger (one that signed no lab's certificate), made with
/// openssl in `dir`; its PEM path.
pub fn stranger_ca(dir: &Path) -> String {
    let (ca, key) = (dir.join("stranger-ca.pem"), dir.join("stranger-ca.key"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=stranger"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&ca)
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "openssl: {made:?}");
    ca.to_string_lossy().to_string()
}

/// Runs mailbench with `args` and checks that it refused them the way bad input must be:
/// exit 1, one line on stderr, naming `needle`.
pub fn refused_in_one_line(args: &[&str], needle: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(args, &out));
    assert!(
        err.contains(needle),
        "expected {needle:?} in: {}",
        describe(args, &out)
    );
    assert_eq!(err.lines().count(), 1, "{}", describe(args, &out));
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

/// The relay summary's keys that only some modes have: a lab whose log is read message by
/// message (Postfix, OpenSMTPD), `--find-max`, `--flush`, a fan-out
/// (several copies per message), deliveries before the MTA's 250, `--dns-domains`,
/// `--trace-io`, `--mta-lookup`, `--fault`.
const RELAY_MODE_KEYS: &[&str] = &[
    "maillog_bounced",
    "max_sustainable_per_sec",
    "max_sustainable_mpm",
    "flush_held",
    "release_at_s",
    "e2e_recipient_p50_ms",
    "e2e_recipient_p99_ms",
    "before_accept_max_ms",
    "dns_queries",
    "dns_queries_per_message",
    "dns_p50_ms",
    "dns_p99_ms",
    "dns_deferred",
    "fsyncs_per_msg",
    "files_created_per_msg",
    "renames_per_msg",
    "unlinks_per_msg",
    "bytes_written_per_msg",
    "ctx_switches_per_msg",
    "lookups",
    "lookups_failed",
    "lookups_per_msg",
    "lookup_p50_ms",
    "lookup_p99_ms",
    // `--fault`
    "fault_at_s",
    "fault_accepted_before",
    "fault_down_s",
    "fault_duplicated_messages",
    "fault_unsynced_files",
    "fault_made_up",
    "fault_refused_4xx",
    "restart_first_delivery_s",
    "restart_last_delivery_s",
    // none when nothing arrived, or no connection of the MTA's was held by mailbench
    "last_arrival_after_injection_s",
    // only where the last message arrived before injection ended
    "last_arrival_before_injection_end_s",
    "drain_end_after_injection_s",
    "net_to_mta_bytes",
    "net_from_mta_bytes",
];

/// The relay's mode-specific keys a run may lack: all but the `present` ones (its mode's).
pub fn relay_keys_but(present: &[&str]) -> Vec<&'static str> {
    RELAY_MODE_KEYS
        .iter()
        .filter(|k| !present.contains(k))
        .copied()
        .collect()
}

/// `mailbench relay --lab postfix -q --json JSON ARGS`, which must exit 0; the results.
/// `None` (a skip, outside CI) without Postfix.
pub fn lab_relay(args: &[&str], json: &Path) -> Option<serde_json::Value> {
    require("postfix")?;
    let j = json.to_string_lossy().to_string();
    let mut all = vec!["relay", "--lab", "postfix", "-q", "--json", &j];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    Some(results(json))
}

/// What a run's lab left behind: its directories, mounts and processes still using them.
pub fn leftovers(r: &serde_json::Value) -> Vec<String> {
    let dirs: Vec<String> = r["extra"]["lab_dirs"]
        .as_array()
        .expect("the results name the lab's directories")
        .iter()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    let mut v: Vec<String> = dirs
        .iter()
        .filter(|d| std::path::Path::new(d).exists())
        .cloned()
        .collect();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    v.extend(
        mounts
            .lines()
            .filter(|l| dirs.iter().any(|d| l.contains(d.as_str())))
            .map(str::to_string),
    );
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if dirs.iter().any(|d| cmd.contains(d.as_str())) {
                v.push(cmd);
            }
        }
    }
    v
}

/// What the delaying proxy runs: every chunk the server sends reaches the client `DELAY`
/// seconds after it left the server, in order; the client's bytes reach the server `UP`
/// seconds after they left the client (at once by default).
const DELAY_PROXY: &str = r#"
import asyncio, sys
LISTEN, HOST, PORT, DELAY = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
UP = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0

async def pipe(reader, writer, delay):
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delay:
                due = loop.time() + delay
                await asyncio.sleep(max(0, due - loop.time()))
            writer.write(data)
            await writer.drain()
    except Exception:
        pass
    finally:
        writer.close()

async def late(reader, writer, delay):
    # Chunks keep their order: each waits out its own delay from when it arrived.
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    async def read():
        while True:
            data = await reader.read(65536)
            await queue.put((loop.time() + delay, data))
            if not data:
                break
    async def write():
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0, due - loop.time()))
            if not data:
                writer.close()
                break
            writer.write(data)
            await writer.drain()
    try:
        await asyncio.gather(read(), write())
    except Exception:
        writer.close()

async def serve(creader, cwriter):
    sreader, swriter = await asyncio.open_connection(HOST, PORT)
    up = late(creader, swriter, UP) if UP else pipe(creader, swriter, 0)
    await asyncio.gather(up, late(sreader, cwriter, DELAY))

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", LISTEN)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"#;

/// A TCP proxy on a free loopback port in front of `target` (host:port) that delays
/// everything the server says by `delay`: a known latency in every response.
pub fn delay_proxy(target: &str, delay: Duration) -> (Proc, u16) {
    delay_proxy_both(target, delay, Duration::ZERO)
}

/// The delaying proxy with both directions delayed: what the server says by `down`, what
/// the client says by `up`.
pub fn delay_proxy_both(target: &str, down: Duration, up: Duration) -> (Proc, u16) {
    let (host, port) = target.rsplit_once(':').expect("host:port");
    let listen = free_port();
    let mut child = Command::new("python3")
        .args(["-c", DELAY_PROXY])
        .args([
            &listen.to_string(),
            host,
            port,
            &down.as_secs_f64().to_string(),
            &up.as_secs_f64().to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the delaying proxy");
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
    }
    assert_eq!(line.trim(), "ready", "the delaying proxy did not start");
    (Proc(child), listen)
}

/// A one-hop lab Postfix relaying to a sink on 127.0.0.1:`sink_port`, its queue `queue`,
/// nothing else set (CI runs as root, which a lab needs).
pub fn postfix_to_sink(
    sink_port: u16,
    queue: mailbench::lab::QueueKind,
) -> Box<dyn mailbench::lab::MtaLab> {
    mailbench::lab::postfix::KIND
        .start(&mailbench::lab::LabOptions {
            hops: 1,
            queue,
            settings: Vec::new(),
            limits: Default::default(),
            relay: ([127, 0, 0, 1], sink_port).into(),
            relay_lmtp: false,
            starttls: false,
            hold: false,
            dkim: None,
            dns: None,
            lookup: None,
            logging: mailbench::lab::MtaLogging::On,
            between: None,
        })
        .expect("lab Postfix starts (CI runs as root)")
}

/// Asserts that all `n` units of a run failed as timeouts at `phase` (`ctx` names the run).
pub fn assert_timed_out(r: &serde_json::Value, phase: &str, n: u64, ctx: &str) {
    let e = &r["errors"][0];
    assert_eq!(
        (e["class"].as_str(), e["phase"].as_str()),
        (Some("timeout"), Some(phase)),
        "{ctx}: {:#}",
        r["errors"]
    );
    assert_eq!(
        r["summary"]["errors"].as_u64(),
        Some(n),
        "{ctx}: every unit timed out: {:#}",
        r["summary"]
    );
}

/// A scripted server on a free loopback port (one thread per connection): says
/// `greeting`, then answers each line as `reply` says, after `delay` when it says so.
/// For the limits on waiting for a reply, against a server that is slow on purpose.
pub fn scripted_server(
    greeting: &'static str,
    delay: Duration,
    reply: fn(&str) -> (bool, String),
) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = conn.try_clone().expect("a second handle");
                let _ = out.write_all(greeting.as_bytes());
                for line in BufReader::new(conn).lines().map_while(Result::ok) {
                    let (slow, text) = reply(&line);
                    if slow {
                        std::thread::sleep(delay);
                    }
                    if out.write_all(text.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}
