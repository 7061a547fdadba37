//! Issue 40, the labs that deadlocked: a lab Postfix whose every process logs many lines
//! at start (postlogd, the only reader of Postfix's log socket, blocked writing its own
//! lines to it and so did every smtpd: no banner, `postfix stop` hung), a lab whose start
//! logs no warning of its own, a lab MTA that stops answering reported in one line naming
//! the stuck process (checked against /proc: the pid it names is one the test stopped),
//! and a lab command past its deadline ended with what it started. The kernel's own
//! limit is the known value put in: `net.unix.max_dgram_qlen` datagrams (10 here) queue
//! on a socket nobody reads.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mailbench::lab::{LabOptions, MtaLab, MtaLogging, QueueKind};

use crate::util::{describe, free_port, mailbench, require, run, wait_until};

/// A lab Postfix relaying to `relay` with `settings`, started on a thread given `limit`:
/// a start that hangs (the old deadlock) fails the test instead of hanging it.
fn start_within(
    settings: &[(&str, &str)],
    relay: u16,
    limit: Duration,
) -> Result<Box<dyn MtaLab>, String> {
    let settings: Vec<(String, String)> = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lab = mailbench::lab::postfix::KIND.start(&LabOptions {
            hops: 1,
            queue: QueueKind::Tmpfs,
            settings,
            limits: Default::default(),
            relay: ([127, 0, 0, 1], relay).into(),
            relay_lmtp: false,
            starttls: false,
            hold: false,
            dkim: None,
            dns: None,
            lookup: None,
            logging: MtaLogging::On,
            between: None,
        });
        let _ = tx.send(lab.map_err(|e| e.to_string()));
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        Err(format!(
            "the lab did not start in {} s (its log socket deadlocked?)",
            limit.as_secs()
        ))
    })
}

/// The lab's log.
fn maillog(lab: &dyn MtaLab) -> String {
    std::fs::read_to_string(&lab.logs()[0]).unwrap_or_default()
}

/// Lines of `log` from program `prog` (`postfix/smtpd`) containing `needle`.
fn lines_of(log: &str, prog: &str, needle: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(&format!(" {prog}[")) && l.contains(needle))
        .count()
}

/// The lab processes' names.
fn names(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// Issue 40: every Postfix process logs 12 warnings as it starts (a `known_tcp_ports`
/// value with 12 entries it cannot read), postlogd among them before it reads anything.
/// Before: 11 queued lines filled the socket, postlogd blocked on its own 12th, then
/// every smtpd on its first line: the lab never greeted and its stop never ended. Now
/// the lab greets, relays, and its log holds every process's 12 warnings and the
/// deliveries (as Postfix's own `status=sent`, checked against the sink), no postlogd
/// runs, and it stops within its deadline leaving nothing.
#[test]
fn a_postfix_lab_whose_every_process_warns_at_start_greets_relays_and_logs_it_all() {
    let Some((_sink, port)) = crate::util::smtp_sink(&[]) else {
        return;
    };
    let junk: Vec<String> = (1..=12).map(|i| format!("junk{i}")).collect();
    let junk = junk.join(",");
    let lab = start_within(&[("known_tcp_ports", &junk)], port, Duration::from_secs(90))
        .unwrap_or_else(|e| panic!("expected the lab to start; got: {e}"));
    let entry = lab.entry().to_string();
    let args = ["send", "-q", "-n", "5", "-c", "1", "--size", "1k", &entry];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    assert!(
        wait_until(Duration::from_secs(30), || lines_of(
            &maillog(lab.as_ref()),
            "postfix/smtp",
            "status=sent"
        ) == 5),
        "5 deliveries in Postfix's log:\n{}",
        maillog(lab.as_ref())
    );
    let log = maillog(lab.as_ref());
    for prog in ["postfix/master", "postfix/qmgr", "postfix/smtpd"] {
        assert!(
            lines_of(&log, prog, "is not in \"name = value\" form") >= 12,
            "{prog}'s 12 start-up warnings logged:\n{log}"
        );
    }
    let running = names(&lab.pids());
    assert!(
        !running.iter().any(|n| n == "postlogd"),
        "no postlogd reads the lab's log: {running:?}"
    );
    let dirs = lab.dirs();
    let t0 = Instant::now();
    drop(lab);
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "the lab stopped in {:?}",
        t0.elapsed()
    );
    for d in dirs {
        assert!(!d.exists(), "{} removed", d.display());
    }
}

/// Issue 40: a lab Postfix's start logs no warning of its own — before, 16 "not owned by
/// root" and one "group or other writable" (its queue lay inside its config directory,
/// which `postfix-script check-warn` wants root's throughout) and, per process, an
/// "overriding earlier entry" for every `--mta-conf` key the lab also sets.
#[test]
fn a_postfix_lab_starts_without_a_warning_of_its_own() {
    if require("postfix").is_none() {
        return;
    }
    let lab = start_within(
        &[("queue_run_delay", "2s"), ("in_flow_delay", "1s")],
        free_port(),
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("expected the lab to start; got: {e}"));
    let log = maillog(lab.as_ref());
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings, Vec::<&str>::new(), "the whole log:\n{log}");
    assert!(
        log.contains("starting the Postfix mail system"),
        "the log is written: {log}"
    );
}

/// A `mailbench lab postfix` started in its own process group, once it has said where it
/// listens: the child, its entry and its config directory.
fn lab_command() -> (std::process::Child, String, PathBuf) {
    use std::os::unix::process::CommandExt;
    let relay = format!("127.0.0.1:{}", free_port());
    let mut child = mailbench()
        .args(["lab", "postfix", "--relay", &relay])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailbench lab");
    let out = child.stdout.take().expect("stdout");
    let (mut entry, mut conf) = (None, None);
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        if let Some(rest) = line.split("config ").nth(1) {
            conf = Some(PathBuf::from(rest.trim()));
        }
        if let Some(rest) = line.split("inject into ").nth(1) {
            entry = rest.split(';').next().map(str::to_string);
            break;
        }
    }
    (
        child,
        entry.expect("the lab names its entry"),
        conf.expect("the lab names its config"),
    )
}

/// Whether `pid` still runs (a zombie, not reaped where no init reaps, has ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(false)
}

/// Issue 40: a lab whose MTA stops answering (its master and smtpd stopped with SIGSTOP)
/// is reported in one line naming a stopped smtpd by its pid (the test checks /proc: that
/// process is stopped), within the watchdog's quiet time and banner wait — not a run of
/// timeouts — and `mailbench lab` exits 2 with the lab stopped and removed.
#[test]
fn a_lab_mta_that_stops_answering_is_reported_in_one_line_naming_the_stuck_process() {
    if require("postfix").is_none() {
        return;
    }
    let (mut child, entry, conf) = lab_command();
    let dir = conf
        .ancestors()
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("mailbench-lab-"))
        })
        .expect("the lab directory")
        .to_path_buf();
    let master: u32 = std::fs::read_to_string(dir.join("queue/pid/master.pid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the master's pid");
    let tree = mailbench::stats::sut::descendants(&[master]);
    let mut held = Vec::new();
    for pid in tree.iter().rev() {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.trim() == "smtpd" || *pid == master {
            let _ = Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status();
            held.push(*pid);
        }
    }
    assert!(held.len() >= 2, "an smtpd and the master stopped: {held:?}");
    let t0 = Instant::now();
    let ended = wait_until(Duration::from_secs(60), || {
        child.try_wait().ok().flatten().is_some()
    });
    let took = t0.elapsed();
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().ok().and_then(|s| s.code());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(status, Some(2), "exit 2; said:\n{err}");
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    let want = format!("mailbench: lab postfix: no banner on {entry} in 10 s: smtpd (pid ");
    assert!(
        lines[0].starts_with(&want),
        "expected {want}…; got {}",
        lines[0]
    );
    let named: u32 = lines[0][want.len()..]
        .split(')')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a pid");
    assert!(
        held.contains(&named),
        "{named} is one of those stopped: {held:?}"
    );
    assert!(
        lines[0].contains(&format!(
            "smtpd (pid {named}) stopped (SIGSTOP or a debugger)"
        )) && lines[0].ends_with("; the lab is stopped and removed"),
        "{}",
        lines[0]
    );
    // Quiet 5 s, then a 10 s banner wait, then the stop: well under one 60 s timeout.
    assert!(took < Duration::from_secs(45), "reported after {took:?}");
    assert!(!dir.exists(), "{} removed", dir.display());
    assert!(
        wait_until(Duration::from_secs(5), || held.iter().all(|p| !alive(*p))),
        "every stopped process ended: {:?}",
        held.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

/// A lab command that does not finish is ended at its deadline with what it started, and
/// the line names the process that is stuck and where: here a sender blocked exactly as
/// Postfix's processes were, on a datagram socket nobody reads (the kernel queues
/// `max_dgram_qlen` datagrams, then blocks the next send). The path named is the socket's.
#[test]
fn a_lab_command_past_its_deadline_is_ended_naming_the_send_it_is_blocked_in() {
    if require("python3").is_none() || require("ss").is_none() {
        return;
    }
    let dir = crate::util::TempDir::new("stuck-send");
    let path = dir.0.join("log.sock");
    let _reader = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
    let qlen: usize = std::fs::read_to_string("/proc/sys/net/unix/max_dgram_qlen")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("max_dgram_qlen");
    let script = format!(
        "import socket\ns=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.connect({:?})\nfor i in range({}): s.send(b'line')\n",
        path.display().to_string(),
        qlen + 5
    );
    let t0 = Instant::now();
    let err = mailbench::lab::command::run(
        Command::new("python3").args(["-c", &script]),
        Duration::from_secs(3),
        "`python3 logger`",
    )
    .expect_err("the sender blocks");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    let want_start = "`python3 logger` did not finish in 3 s: python3 (pid ";
    let want_end = format!(") blocked in sendto on {}; killed it", path.display());
    assert!(
        err.starts_with(want_start) && err.ends_with(&want_end),
        "expected {want_start}N{want_end}; got {err}"
    );
}

/// Issue 40: a `relay --lab postfix` run whose MTA stops answering mid-run (its master
/// and smtpd stopped with SIGSTOP) ends within the watchdog's quiet time and banner wait
/// with one line naming a stopped process — not one timeout per connection — exit 2.
#[test]
fn a_relay_run_whose_lab_stops_answering_ends_with_the_one_line() {
    if require("postfix").is_none() {
        return;
    }
    let mut child = mailbench()
        .args([
            "relay", "--lab", "postfix", "--rate", "20/s", "-z", "60s", "-c", "4", "--size", "1k",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start relay");
    let prefix = format!("mailbench-lab-{}-0-", child.id());
    let mut master = None;
    let found = wait_until(Duration::from_secs(30), || {
        master = std::fs::read_dir(std::env::temp_dir())
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .find_map(|e| {
                std::fs::read_to_string(e.path().join("queue/pid/master.pid"))
                    .ok()?
                    .trim()
                    .parse::<u32>()
                    .ok()
            });
        master.is_some()
    });
    assert!(found, "the run's lab started");
    let master = master.unwrap_or_default();
    std::thread::sleep(Duration::from_secs(3));
    let mut held = Vec::new();
    for pid in mailbench::stats::sut::descendants(&[master]).iter().rev() {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.trim() == "smtpd" || *pid == master {
            let _ = Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status();
            held.push(*pid);
        }
    }
    let t0 = Instant::now();
    let ended = wait_until(Duration::from_secs(60), || {
        child.try_wait().ok().flatten().is_some()
    });
    let took = t0.elapsed();
    if !ended {
        let _ = child.kill();
    }
    let code = child.wait().ok().and_then(|s| s.code());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert_eq!(code, Some(2), "exit 2 after {took:?}; said:\n{err}");
    let line = err
        .lines()
        .find(|l| l.contains("no banner"))
        .unwrap_or_else(|| panic!("the stall's line: {err}"));
    assert!(
        line.starts_with("mailbench: lab postfix: no banner on 127.0.0.1:")
            && held
                .iter()
                .any(|p| line.contains(&format!("(pid {p}) stopped (SIGSTOP or a debugger)"))),
        "names one of {held:?}: {line}"
    );
    assert!(took < Duration::from_secs(45), "ended after {took:?}");
    assert!(
        wait_until(Duration::from_secs(5), || held.iter().all(|p| !alive(*p))),
        "every stopped process ended"
    );
}
