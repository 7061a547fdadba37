//! Issue 29 — seed 004's other knobs on the lab MTAs: recipient lookups (`--mta-lookup
//! hash|ldap`, a private slapd with `--ldap-fault`) and logging (`--mta-logging off`).
//! References no one here wrote: Postfix's log for deliveries and its 451 rejects, slapd's
//! own access log (`loglevel stats`, one `SRCH base=` line per search) for the lookups.

use std::path::{Path, PathBuf};

use crate::relay::assert_exactly_once;
use crate::util::{TempDir, describe, leftovers, refused_in_one_line, results, run};

/// Fails (never skips) when a program the test needs is missing.
fn need(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: run scripts/install-deps.sh --for-tests (Debian's {package})"
    );
}

fn need_ldap() {
    need("/usr/sbin/postfix", "postfix");
    need("/usr/sbin/slapd", "slapd");
    need("/usr/lib/postfix/postfix-ldap.so", "postfix-ldap");
}

/// A relay run on a lab MTA with `args`; its results and the logs kept beside them
/// (`NAME.maillog.I`, the MTA's first, then the directory's access log).
fn relay(mta: &str, args: &[&str], json: &Path) -> (serde_json::Value, Vec<PathBuf>) {
    let j = json.to_string_lossy().to_string();
    let mut all = vec!["relay", "--lab", mta, "-q", "--json", &j];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    let r = results(json);
    let logs = r["extra"]["mta_logs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(PathBuf::from))
                .collect()
        })
        .unwrap_or_default();
    assert!(leftovers(&r).is_empty(), "left behind: {:?}", leftovers(&r));
    (r, logs)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// slapd's own count of the searches it answered.
fn slapd_searches(log: &Path) -> u64 {
    read(log)
        .lines()
        .filter(|l| l.contains(" SRCH base="))
        .count() as u64
}

#[test]
fn hash_lookups_deliver_exactly_with_the_table_in_place() {
    need("/usr/sbin/postfix", "postfix");
    let dir = TempDir::new("lookup-hash");
    let (r, _) = relay(
        "postfix",
        &[
            "--mta-lookup",
            "hash",
            "-n",
            "300",
            "--to",
            "u{seq}@rcpt.test",
        ],
        &dir.0.join("r.json"),
    );
    assert_exactly_once(&r, 300);
    assert_eq!(r["config"]["relay"]["mta_lookup"], "hash");
    assert!(
        r["summary"].get("lookups").is_none(),
        "a hash table is not counted"
    );
}

#[test]
fn ldap_lookups_deliver_exactly_and_count_what_slapd_logged() {
    need_ldap();
    let dir = TempDir::new("lookup-ldap");
    let (r, logs) = relay(
        "postfix",
        &[
            "--mta-lookup",
            "ldap",
            "-n",
            "400",
            "--to",
            "u{seq}@rcpt.test",
        ],
        &dir.0.join("r.json"),
    );
    assert_exactly_once(&r, 400);
    let s = &r["summary"];
    let access = logs
        .get(1)
        .expect("slapd's access log is kept with the results");
    let searched = slapd_searches(access);
    assert!(
        searched >= 400,
        "one search per recipient at least: {searched}"
    );
    assert_eq!(
        s["lookups"], searched,
        "the proxy counts what slapd answered"
    );
    assert_eq!(s["lookups_failed"], 0);
    assert_eq!(s["lookups_per_msg"], searched as f64 / 400.0);
    assert!(
        s["lookup_p50_ms"].as_f64().is_some_and(|v| v > 0.0),
        "{s:#}"
    );
    assert!(s["lookup_p99_ms"].as_f64() >= s["lookup_p50_ms"].as_f64());
}

#[test]
fn an_ldap_down_window_gives_counted_451s_quoted_as_postfix_logged_them() {
    need_ldap();
    let dir = TempDir::new("lookup-down");
    let (r, logs) = relay(
        "postfix",
        &[
            "--mta-lookup",
            "ldap",
            "--ldap-fault",
            "down=1s@1s",
            "--rate",
            "200/s",
            "-n",
            "600",
            "--to",
            "u{seq}@rcpt.test",
        ],
        &dir.0.join("r.json"),
    );
    let maillog = read(&logs[0]);
    let logged_451 = maillog
        .lines()
        .filter(|l| l.contains("NOQUEUE: reject: RCPT") && l.contains(": 451 4.3.0 "))
        .count() as u64;
    assert!(logged_451 > 0, "the down window gave no 451:\n{maillog}");
    let errors = r["errors"].as_array().expect("errors");
    let e451: Vec<&serde_json::Value> = errors.iter().filter(|e| e["code"] == 451).collect();
    assert_eq!(e451.len(), 1, "{errors:#?}");
    assert_eq!(
        e451[0]["count"], logged_451,
        "as many 451s as Postfix logged"
    );
    let quoted = e451[0]["sample"].as_str().unwrap_or("");
    assert!(
        quoted.starts_with("451 4.3.0 <u") && quoted.ends_with(">: Temporary lookup failure"),
        "the reply text is quoted: {quoted}"
    );
    let s = &r["summary"];
    assert_eq!(
        s["accepted"].as_u64().unwrap_or(0) + logged_451,
        600,
        "{s:#}"
    );
    // Every accepted message delivered once, as Postfix's log says.
    assert_eq!(s["delivered"], s["accepted"]);
    assert_eq!(s["maillog_sent"], s["accepted"]);
    assert!(s["lookups_failed"].as_u64().is_some_and(|n| n > 0), "{s:#}");
    assert_eq!(s["lookups"], slapd_searches(&logs[1]));
}

#[test]
fn logging_off_still_counts_exactly_from_the_sink() {
    need("/usr/sbin/postfix", "postfix");
    for mta in ["postfix", "qmail"] {
        if mta == "qmail" && !Path::new("/opt/mailbench/mtas/qmail/.mailbench-archive").exists() {
            panic!("qmail is not built for the lab: run scripts/install-mtas.sh");
        }
        let dir = TempDir::new("logging-off");
        let (r, _) = relay(
            mta,
            &["--mta-logging", "off", "-n", "300", "-c", "8"],
            &dir.0.join("r.json"),
        );
        let s = &r["summary"];
        assert_eq!(s["accepted"], 300, "{mta}: {s:#}");
        assert_eq!(s["delivered"], 300, "{mta}: {s:#}");
        assert_eq!(s["lost"], 0);
        assert_eq!(s["duplicates"], 0);
        assert!(
            s.get("maillog_sent").is_none_or(|v| v.is_null()),
            "{mta}: no log to count"
        );
        assert_eq!(r["extra"]["delivered_source"], "sink (MTA logging off)");
    }
}

#[test]
fn qmail_through_multilog_delivers_exactly_as_its_log_says() {
    need("/usr/bin/multilog", "daemontools");
    assert!(
        Path::new("/opt/mailbench/mtas/qmail/.mailbench-archive").exists(),
        "qmail is not built for the lab: run scripts/install-mtas.sh"
    );
    let dir = TempDir::new("multilog");
    let (r, logs) = relay(
        "qmail",
        &["--mta-logging", "multilog", "-n", "300", "-c", "8"],
        &dir.0.join("r.json"),
    );
    let log = read(&logs[0]);
    let successes = log
        .lines()
        .filter(|l| l.starts_with("delivery ") && l.contains(": success: "))
        .count();
    assert_eq!(
        successes, 300,
        "multilog's current holds qmail-send's lines"
    );
    assert_exactly_once(&r, 300);
}

#[test]
fn lookups_and_logging_are_refused_in_one_line_where_they_do_not_apply() {
    refused_in_one_line(
        &["relay", "--lab", "qmail", "--mta-lookup", "hash", "-n", "1"],
        "--mta-lookup: the qmail lab has no recipient lookups yet",
    );
    refused_in_one_line(
        &["relay", "--lab", "exim", "--mta-logging", "off", "-n", "1"],
        "--mta-logging off: the exim lab cannot run without its log",
    );
    refused_in_one_line(
        &[
            "relay",
            "--lab",
            "postfix",
            "--ldap-fault",
            "down=5s@10s",
            "-n",
            "1",
        ],
        "add --mta-lookup ldap",
    );
    refused_in_one_line(
        &[
            "relay",
            "--lab",
            "postfix",
            "--mta-lookup",
            "ldap",
            "--ldap-fault",
            "down=5s",
            "-n",
            "1",
        ],
        "write delay=DURATION (delay=200ms) or down=LENGTH@FROM",
    );
    refused_in_one_line(
        &[
            "relay",
            "--lab",
            "postfix",
            "--mta-lookup",
            "ldap",
            "--to",
            "u{rand:9}@x.test",
            "-n",
            "1",
        ],
        "{rand:N} cannot be listed",
    );
    // Against an MTA not started here, the lab's knobs are refused, not ignored.
    for knob in [
        &["--mta-lookup", "ldap"][..],
        &["--ldap-fault", "delay=1s"][..],
        &["--mta-logging", "multilog"][..],
    ] {
        let mut args = vec!["relay", "--target", "127.0.0.1:9", "-n", "1"];
        args.extend_from_slice(knob);
        refused_in_one_line(&args, &format!("{} sets up a lab MTA: add --lab", knob[0]));
    }
}
