//! Issue 29 — qmail (notqmail 1.09, built by scripts/install-mtas.sh) as a lab MTA:
//! exactly once with its own log agreeing, its concurrency knob, beside Postfix in the MTA
//! comparison, refusals in one line, nothing left behind (even by a run killed outright).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::relay::assert_exactly_once;
use crate::util::{
    TempDir, describe, leftovers, mailbench, refused_in_one_line, require, results, run, wait_until,
};

/// Whether qmail is built for the lab; in CI (which builds it) its absence fails.
fn built() -> bool {
    require("tcpserver").is_some()
        && (Path::new("/opt/mailbench/mtas/qmail/.mailbench-archive").exists() || {
            if std::env::var_os("CI").is_some() {
                panic!("qmail is not built for the lab; CI must run scripts/install-mtas.sh");
            }
            eprintln!("SKIP: run scripts/install-mtas.sh for the qmail lab");
            false
        })
}

/// A relay run on the qmail lab, its results and qmail's log.
fn relay(args: &[&str], json: &Path) -> (serde_json::Value, String) {
    let j = json.to_string_lossy().to_string();
    let mut all = vec!["relay", "--lab", "qmail", "-q", "--json", &j];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    let log = json.with_file_name(format!(
        "{}.maillog.0",
        json.file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned())
    ));
    let log = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("qmail's log is kept with the results: {e}"));
    (results(json), log)
}

/// qmail-send's own delivery lines: `delivery N: success: …`.
fn successes(log: &str) -> usize {
    log.lines()
        .filter(|l| l.starts_with("delivery ") && l.contains(": success: "))
        .count()
}

/// What the host's `/var/qmail` (the mount point of qmail's compiled-in home) holds.
fn host_home() -> Vec<String> {
    std::fs::read_dir("/var/qmail").map_or(Vec::new(), |rd| {
        rd.filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    })
}

#[test]
fn qmail_relays_a_thousand_messages_exactly_once_as_its_log_says() {
    if !built() {
        return;
    }
    let before = host_home();
    let dir = TempDir::new("qmail");
    let (r, log) = relay(
        &["-n", "1000", "-c", "8", "--size", "2k"],
        &dir.0.join("qmail.json"),
    );
    assert_eq!(r["config"]["relay"]["lab"], "qmail");
    assert_exactly_once(&r, 1000);
    assert_eq!(r["summary"]["queued_left"], 0, "nothing left queued");
    // qmail-smtpd answers a pipelined MAIL at once when tcpserver sets TCP_NODELAY (-D);
    // without it every MAIL waited out the client's delayed ACK, about 40 ms.
    let mail_p50 = r["latency"]["mail"]["p50_us"].as_f64().unwrap_or(f64::MAX);
    assert!(
        mail_p50 < 20_000.0,
        "MAIL p50 {mail_p50} µs: replies held back by Nagle's algorithm"
    );
    assert_eq!(
        successes(&log),
        1000,
        "qmail-send logged each delivery once"
    );
    assert_eq!(
        log.lines().filter(|l| l.starts_with("new msg ")).count(),
        1000,
        "qmail queued each message once"
    );
    assert!(
        log.lines().any(|l| l.contains("remote 0/100")),
        "concurrencyremote is the lab's default 100: {}",
        log.lines().next().unwrap_or_default()
    );
    let left = leftovers(&r);
    assert!(left.is_empty(), "qmail left behind: {left:?}");
    assert_eq!(host_home(), before, "the host's /var/qmail is untouched");
}

#[test]
fn qmail_delivers_at_most_its_remote_concurrency_at_once() {
    if !built() {
        return;
    }
    let dir = TempDir::new("qmail-concurrency");
    let (r, log) = relay(
        &[
            "-n",
            "100",
            "-c",
            "8",
            "--size",
            "2k",
            "--mta-dest-concurrency",
            "3",
            "--mta-conf",
            "timeoutremote=60",
        ],
        &dir.0.join("qmail.json"),
    );
    assert_exactly_once(&r, 100);
    let busy: Vec<u32> = log
        .lines()
        .filter_map(|l| l.split(" remote ").nth(1)?.strip_suffix("/3")?.parse().ok())
        .collect();
    assert!(!busy.is_empty(), "status lines give remote N/3:\n{log}");
    assert!(busy.iter().all(|n| *n <= 3), "{busy:?}");
}

#[test]
fn postfix_and_qmail_are_compared_over_rotating_rounds() {
    if !built() || require("postfix").is_none() {
        return;
    }
    let dir = TempDir::new("qmail-compare");
    let json = dir.0.join("all.json");
    let j = json.to_string_lossy().to_string();
    let args = [
        "relay",
        "--lab",
        "postfix,qmail",
        "-n",
        "100",
        "-c",
        "8",
        "--size",
        "2k",
        "--rounds",
        "2",
        "-q",
        "--json",
        &j,
    ];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text
        .lines()
        .find(|l| l.starts_with("figure"))
        .unwrap_or_else(|| panic!("no table in:\n{text}"));
    assert!(
        header.contains("postfix") && header.contains("qmail"),
        "{header}"
    );
    let r = results(&json);
    let sides = r["extra"]["sides"]
        .as_array()
        .expect("every MTA in one file");
    assert_eq!(sides.len(), 2);
    for (side, mta) in sides.iter().zip(["postfix", "qmail"]) {
        assert_eq!(side["label"], mta);
        let rounds = side["results"]["extra"]["rounds"]
            .as_array()
            .expect("rounds");
        assert_eq!(rounds.len(), 2, "{mta}");
        for round in rounds {
            assert_eq!(round["summary"]["delivered"], 100, "{mta}: {round:#}");
            assert_eq!(round["summary"]["maillog_sent"], 100, "{mta}: {round:#}");
            assert_eq!(round["summary"]["duplicates"], 0, "{mta}");
        }
    }
}

#[test]
fn qmail_refuses_what_it_cannot_do_in_one_line() {
    if !built() {
        return;
    }
    for (args, needle) in [
        (
            &[
                "relay",
                "--lab",
                "qmail",
                "--mta-conf",
                "nosuchfile=1",
                "-n",
                "1",
            ][..],
            "qmail has no control file nosuchfile",
        ),
        (
            &[
                "relay",
                "--lab",
                "qmail",
                "--mta-dest-concurrency",
                "500",
                "-n",
                "1",
            ][..],
            "--mta-dest-concurrency: qmail runs at most 120",
        ),
        (
            &["relay", "--lab", "qmail", "--dns-domains", "5", "-n", "1"][..],
            "--dns-domains: qmail",
        ),
        (
            &["relay", "--lab", "qmail", "--flush", "-n", "1"][..],
            "--flush",
        ),
    ] {
        refused_in_one_line(args, needle);
    }
}

/// The pids of running (not zombie) processes whose command is `comm`, from /proc.
fn running_named(comm: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (name, rest) = stat.split_once(") ")?;
            let alive = !rest.starts_with('Z');
            (alive && name.ends_with(&format!("({comm}"))).then_some(pid)
        })
        .collect()
}

/// The lab directory of mailbench process `pid`, once qmail-send has logged there.
fn started_lab(pid: u32) -> Option<PathBuf> {
    let prefix = format!("mailbench-lab-{pid}-0-");
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                && std::fs::read_to_string(p.join("maillog")).is_ok_and(|l| l.contains("status: "))
        })
}

#[test]
fn a_killed_runs_qmail_is_stopped_unmounted_and_removed_by_doctor() {
    if !built() {
        return;
    }
    let before = running_named("qmail-send");
    let dir = TempDir::new("qmail-killed");
    let json = dir.0.join("r.json");
    let mut child = mailbench()
        .args([
            "relay", "--lab", "qmail", "-n", "200000", "--rate", "200/s", "-q", "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start mailbench");
    let pid = child.id();
    let mut lab = None;
    let started = wait_until(Duration::from_secs(30), || {
        lab = started_lab(pid);
        lab.is_some()
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(started, "the qmail lab started");
    let lab = lab.expect("its directory");
    let mine: Vec<u32> = running_named("qmail-send")
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!mine.is_empty(), "the killed run's qmail-send runs on");
    let out = run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "cleaned up a lab left by mailbench process {pid},"
        )),
        "{}",
        describe(&["doctor"], &out)
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            running_named("qmail-send")
                .iter()
                .all(|p| !mine.contains(p))
        }),
        "qmail-send of the killed run left: {mine:?}"
    );
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    assert!(
        !mounts.contains(&lab.display().to_string()),
        "its queue's tmpfs left"
    );
    assert!(!lab.exists(), "{} left", lab.display());
}

#[test]
fn lab_qmail_for_manual_use_relays_what_is_injected_and_goes_away_on_sigterm() {
    assert!(
        Path::new("/opt/mailbench/mtas/qmail/var/qmail/bin/qmail-send").exists(),
        "qmail is not built for the lab: run scripts/install-mtas.sh"
    );
    use std::io::{BufRead, BufReader};
    let sink = crate::sink::Sink::start(&[]);
    let target = sink.target();
    let mut lab = crate::util::Terminated(
        mailbench()
            .args(["lab", "qmail", "--relay", &target])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start mailbench lab qmail"),
    );
    let stdout = lab.0.stdout.take().expect("stdout");
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.starts_with("relaying to"))
        .collect();
    let dir = lines
        .iter()
        .find_map(|l| l.split(" log in ").nth(1))
        .unwrap_or_else(|| panic!("the lab names its directory: {lines:?}"))
        .trim()
        .to_string();
    let entry = lines
        .iter()
        .find_map(|l| l.strip_prefix("qmail 0: listens on ")?.split(',').next())
        .unwrap_or_else(|| panic!("the lab names its entry: {lines:?}"))
        .to_string();
    let args = ["send", "-q", "-n", "3", "-c", "1", "--size", "1k", &entry];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let log = PathBuf::from(&dir).join("maillog");
    assert!(
        wait_until(Duration::from_secs(20), || {
            successes(&std::fs::read_to_string(&log).unwrap_or_default()) == 3
        }),
        "qmail-send logged three deliveries: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(lab.stop(), Some(0), "SIGTERM stops the lab cleanly");
    assert!(!Path::new(&dir).exists(), "{dir} removed");
    let (_, summary) = sink.stop();
    assert!(
        summary.contains("3 messages") || summary.contains("messages 3"),
        "the sink got the three messages: {summary}"
    );
}
