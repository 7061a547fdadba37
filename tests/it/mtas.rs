//! Issue 15 — Exim, OpenSMTPD and Sendmail as lab MTAs beside Postfix (unpacked by
//! scripts/install-mtas.sh), and MTAs compared side by side.

use std::path::Path;

use crate::relay::assert_exactly_once;
use crate::util::{TempDir, describe, leftovers, refused_in_one_line, require, results, run};

/// The MTAs unpacked beside the system's.
const UNPACKED: [&str; 3] = ["exim", "opensmtpd", "sendmail"];

/// Whether the unpacked MTAs are there; in CI (which installs them) their absence fails.
fn unpacked() -> bool {
    require("postfix").is_some()
        && (Path::new("/opt/mailbench/mtas/sendmail/.mailbench-packages").exists() || {
            if std::env::var_os("CI").is_some() {
                panic!("the lab MTAs are not unpacked; CI must run scripts/install-mtas.sh");
            }
            eprintln!("SKIP: run scripts/install-mtas.sh for the Exim, OpenSMTPD, Sendmail labs");
            false
        })
}

/// What the system's own MTA and resolver consist of, to show that the labs leave it all
/// as it was.
fn system_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in [
        "/etc/hosts",
        "/etc/resolv.conf",
        "/etc/mailname",
        "/etc/aliases",
        "/etc/postfix/main.cf",
        "/etc/postfix/master.cf",
        "/etc/exim4",
        "/etc/mail",
        "/etc/smtpd.conf",
        "/var/spool/smtpd",
        "/var/spool/exim4",
    ] {
        let what = match std::fs::read(f) {
            Ok(bytes) => format!("{} bytes {:x}", bytes.len(), fnv(&bytes)),
            Err(e) => format!("{:?}", e.kind()),
        };
        out.push((f.to_string(), what));
    }
    let link = std::fs::read_link("/usr/sbin/sendmail").map(|p| p.display().to_string());
    out.push(("/usr/sbin/sendmail".into(), format!("{link:?}")));
    out
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// A relay run on lab `mta`, its results.
fn relay(mta: &str, args: &[&str], json: &Path) -> serde_json::Value {
    let j = json.to_string_lossy().to_string();
    let mut all = vec!["relay", "--lab", mta, "-q", "--json", &j];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    results(json)
}

#[test]
fn exim_opensmtpd_and_sendmail_each_relay_a_thousand_messages_exactly_once() {
    if !unpacked() {
        return;
    }
    let before = system_files();
    let dir = TempDir::new("mtas");
    for mta in UNPACKED {
        let json = dir.0.join(format!("{mta}.json"));
        // Five sessions: OpenSMTPD's listen backlog is 5 (compiled in); more connections
        // opened at once can overflow it, and the kernel's SYN cookies then leave a client
        // connected that the server never sees (waiting past the banner timeout).
        let r = relay(mta, &["-n", "1000", "-c", "5", "--size", "2k"], &json);
        assert_eq!(r["config"]["relay"]["lab"], mta);
        assert_exactly_once(&r, 1000);
        assert_eq!(r["summary"]["queued_left"], 0, "{mta}: nothing left queued");
        let log = std::fs::read_to_string(dir.0.join(format!("{mta}.maillog.0")))
            .unwrap_or_else(|e| panic!("{mta}: its log is kept with the results: {e}"));
        assert!(!log.is_empty(), "{mta}: the log has the deliveries");
        let left = leftovers(&r);
        assert!(left.is_empty(), "{mta} left behind: {left:?}");
    }
    assert_eq!(
        system_files(),
        before,
        "the system's MTA files are unchanged"
    );
}

#[test]
fn deferrals_at_the_sink_resolve_within_the_run_for_each_mta() {
    if !unpacked() {
        return;
    }
    let dir = TempDir::new("mtas-defer");
    for mta in UNPACKED {
        // One recipient per message, each its own (an MTA's retry records are per
        // address: with one address for all, one deferral holds back every message).
        let r = relay(
            mta,
            &[
                "-n",
                "60",
                "-c",
                "4",
                "--size",
                "2k",
                "--to",
                "u{seq}@example.com",
                "--sink-rule",
                "rcpt:451:15%",
                "--drain-timeout",
                "90s",
            ],
            &dir.0.join(format!("{mta}.json")),
        );
        assert_exactly_once(&r, 60);
        let deferred = r["extra"]["sink"]["faults"]["reply_4xx"]
            .as_u64()
            .expect("fault count");
        // 15 % of 60 first attempts is 9 (σ ≈ 2.8); retries add more.
        assert!(
            deferred >= 3,
            "{mta}: the sink deferred about 15 %: {deferred}"
        );
        assert_eq!(
            r["summary"]["drained"], true,
            "{mta}: drained within the run"
        );
    }
}

/// The figures the comparison table must have for every MTA.
const COMPARED: [&str; 10] = [
    "inject_mpm",
    "drain_mpm",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "max_backlog",
    "errors",
    "server cpu ms/unit",
    "server peak RSS KiB",
    "server peak processes",
    "receiver negative replies",
];

#[test]
fn two_mtas_over_two_rounds_give_one_table_and_one_results_file() {
    if !unpacked() {
        return;
    }
    let dir = TempDir::new("mtas-compare");
    let json = dir.0.join("all.json");
    let j = json.to_string_lossy().to_string();
    let args = [
        "relay",
        "--lab",
        "exim,sendmail",
        "-n",
        "200",
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
        header.contains("exim") && header.contains("sendmail"),
        "{header}"
    );
    for figure in COMPARED {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{figure} ")))
            .unwrap_or_else(|| panic!("no {figure} row in:\n{text}"));
        assert_eq!(
            row.matches("(n=2)").count(),
            2,
            "both MTAs have two rounds of {figure}: {row}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let order: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split("mailbench relay: round ").nth(1))
        .collect();
    assert_eq!(
        order,
        [
            "1 of 2, exim",
            "1 of 2, sendmail",
            "2 of 2, sendmail",
            "2 of 2, exim"
        ],
        "rounds rotate"
    );
    let r = results(&json);
    let sides = r["extra"]["sides"]
        .as_array()
        .expect("every MTA in one file");
    assert_eq!(sides.len(), 2);
    for (side, mta) in sides.iter().zip(["exim", "sendmail"]) {
        assert_eq!(side["label"], mta);
        let rounds = side["results"]["extra"]["rounds"]
            .as_array()
            .expect("rounds");
        assert_eq!(rounds.len(), 2, "{mta}");
        for round in rounds {
            assert_eq!(round["summary"]["delivered"], 200, "{mta}: {round:#}");
            assert_eq!(round["summary"]["lost"], 0, "{mta}");
        }
    }
    // `compare` reads the one file as one side per MTA.
    let again = run(&["compare", &j]);
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        describe(&["compare", &j], &again)
    );
    let table = String::from_utf8_lossy(&again.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("figure") && l.contains("sendmail")),
        "{table}"
    );
}

#[test]
fn a_missing_mta_or_a_refused_setting_is_one_line_exit_1() {
    if !unpacked() {
        return;
    }
    for (args, needle) in [
        (
            &[
                "relay",
                "--lab",
                "exim",
                "--mta-conf",
                "no_such_option=1",
                "-n",
                "1",
            ][..],
            "--mta-conf no_such_option: Exim refused it",
        ),
        (
            &[
                "relay",
                "--lab",
                "sendmail",
                "--mta-conf",
                "NoSuchOption=1",
                "-n",
                "1",
            ][..],
            "unknown option name NoSuchOption",
        ),
        (
            &[
                "relay",
                "--lab",
                "opensmtpd",
                "--mta-conf",
                "no such=1",
                "-n",
                "1",
            ][..],
            "OpenSMTPD refused its configuration",
        ),
        (
            &[
                "relay",
                "--lab",
                "opensmtpd",
                "--mta-processes",
                "50",
                "-n",
                "1",
            ][..],
            "--mta-processes: OpenSMTPD",
        ),
        (
            &[
                "relay",
                "--lab",
                "exim",
                "--mta-dest-concurrency",
                "5",
                "-n",
                "1",
            ][..],
            "--mta-dest-concurrency: Exim has no per-destination limit",
        ),
        (
            &[
                "relay",
                "--lab",
                "postfix,exim",
                "--mta-conf",
                "a=1",
                "-n",
                "1",
            ][..],
            "--mta-conf with several MTAs",
        ),
        (
            &["relay", "--lab", "exim,exim", "-n", "1"][..],
            "exim is named twice",
        ),
        (
            &["relay", "--lab", "sendmail", "--flush", "-n", "1"][..],
            "--flush",
        ),
    ] {
        refused_in_one_line(args, needle);
    }
    let args = ["relay", "--lab", "exim", "-n", "1"];
    let out = crate::util::mailbench()
        .env("MAILBENCH_MTAS", "/nonexistent")
        .args(args)
        .output()
        .expect("run mailbench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("scripts/install-mtas.sh"),
        "names the fix: {err}"
    );
}

#[test]
fn exim_and_sendmail_resolve_through_the_test_dns_and_deliver_by_mx() {
    if !unpacked() {
        return;
    }
    let resolv = std::fs::read("/etc/resolv.conf").ok();
    let dir = TempDir::new("mtas-dns");
    for (mta, relay_field) in [("exim", " H=mx"), ("sendmail", "relay=mx")] {
        let json = dir.0.join(format!("{mta}.json"));
        let r = relay(
            mta,
            &[
                "-n",
                "100",
                "-c",
                "5",
                "--size",
                "2k",
                "--dns-domains",
                "10",
            ],
            &json,
        );
        assert_exactly_once(&r, 100);
        let s = &r["summary"];
        let per_message = s["dns_queries_per_message"].as_f64().expect("per message");
        let mx = r["extra"]["dns"]["per_message"]["mx"]
            .as_f64()
            .unwrap_or_else(|| {
                panic!("{mta}: MX questions per message in {:#}", r["extra"]["dns"])
            });
        assert!(
            mx >= 1.0,
            "{mta}: an MX question per message at least: {mx}"
        );
        assert!(
            per_message >= 2.0,
            "{mta}: MX then an address: {per_message}"
        );
        assert_eq!(s["dns_deferred"], 0, "{mta}");
        let log = std::fs::read_to_string(dir.0.join(format!("{mta}.maillog.0"))).expect("log");
        let by_mx = log
            .lines()
            .filter(|l| l.contains(relay_field) && l.contains(".example.test"))
            .count();
        assert!(
            by_mx >= 100,
            "{mta}: delivered to the MX hosts: {by_mx} lines"
        );
    }
    assert_eq!(
        std::fs::read("/etc/resolv.conf").ok(),
        resolv,
        "the machine's resolver is untouched"
    );
}

#[test]
fn each_lab_for_manual_use_relays_what_swaks_sends_and_goes_away_on_sigterm() {
    if !unpacked() || require("swaks").is_none() {
        return;
    }
    use std::io::{BufRead, BufReader};
    for mta in UNPACKED {
        let sink = crate::sink::Sink::start(&[]);
        let target = sink.target();
        let mut lab = crate::util::Terminated(
            crate::util::mailbench()
                .args(["lab", mta, "--relay", &target])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("start mailbench lab"),
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
            .unwrap_or_else(|| panic!("{mta}: the lab names its directory: {lines:?}"))
            .trim()
            .to_string();
        let entry = lines
            .iter()
            .find_map(|l| l.split("listens on ").nth(1)?.split(',').next())
            .unwrap_or_else(|| panic!("{mta}: the lab names its entry: {lines:?}"))
            .to_string();
        let out = std::process::Command::new("swaks")
            .args([
                "--server",
                &entry,
                "--to",
                "x@example.com",
                "--from",
                "y@example.org",
            ])
            .output()
            .expect("run swaks");
        assert!(
            out.status.success(),
            "{mta}: swaks through the lab: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let arrived = crate::util::wait_until(std::time::Duration::from_secs(20), || {
            std::fs::read_dir(&dir).is_ok_and(|_| {
                let log = std::fs::read_to_string(Path::new(&dir).join(if mta == "exim" {
                    "mainlog"
                } else {
                    "maillog"
                }))
                .unwrap_or_default();
                log.contains(" => ") || log.contains("result=\"Ok\"") || log.contains("stat=Sent")
            })
        });
        assert!(arrived, "{mta}: the lab logged the delivery");
        assert_eq!(lab.stop(), Some(0), "{mta}: SIGTERM stops the lab cleanly");
        assert!(!Path::new(&dir).exists(), "{mta}: {dir} removed");
        let (_, summary) = sink.stop();
        assert!(
            summary.contains("1 messages") || summary.contains("messages 1"),
            "{mta}: the sink got swaks's message: {summary}"
        );
    }
}
