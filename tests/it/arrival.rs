//! `mailbench mailbox arrival` through a real Postfix into a real Dovecot: every message
//! injected over SMTP is seen over IMAP exactly once, what imaplib counts in the mailboxes
//! agrees, and a known delay on the IMAP side shows in end to end.

use std::time::Duration;

use crate::imap::inbox_counts;
use crate::mailbox::{Store, postfix_into, run_json};
use crate::util::{TempDir, delay_proxy, delay_proxy_both, refused_in_one_line, require};

fn arrival(args: &[&str], json: &std::path::Path) -> serde_json::Value {
    run_json("arrival", args, json, 0)
}

/// Checks a run where every accepted message arrived once, and returns its summary.
fn all_arrived(r: &serde_json::Value, sent: u64, ctx: &str) -> serde_json::Value {
    let s = r["summary"].clone();
    assert_eq!(
        (
            s["accepted"].as_u64(),
            s["delivered"].as_u64(),
            s["lost"].as_u64(),
            s["duplicates"].as_u64()
        ),
        (Some(sent), Some(sent), Some(0), Some(0)),
        "{ctx}: {s:#}"
    );
    assert_eq!(
        r["latency"]["e2e"]["count"].as_u64(),
        Some(sent),
        "{ctx}: one e2e per message"
    );
    s
}

/// Both lab paths, closed and open loop: Postfix → LMTP → Dovecot, and Dovecot's LMTP
/// directly; every message seen once by the IDLE watchers, and Postfix's log agrees.
#[test]
fn every_message_is_seen_once_over_imap() {
    if require("postfix").is_none() || require("dovecot").is_none() {
        return;
    }
    let dir = TempDir::new("arrival");
    let json = dir.0.join("r.json");
    let r = arrival(
        &["--lab", "dovecot", "--users", "10", "-n", "300", "-c", "4"],
        &json,
    );
    let s = all_arrived(&r, 300, "through Postfix");
    assert_eq!(s["maillog_sent"], 300, "Postfix's log: {s:#}");
    // Both labs' logs are kept beside the results: Postfix's says 300 sent over LMTP,
    // Dovecot's 300 deliveries saved.
    let count = |file: &str, what: &str| {
        let log = std::fs::read_to_string(dir.0.join(file))
            .unwrap_or_else(|e| panic!("{file} kept beside the results: {e}"));
        log.lines().filter(|l| l.contains(what)).count()
    };
    assert_eq!(
        count("r.maillog.0", "status=sent"),
        300,
        "{:#}",
        r["extra"]["mta_logs"]
    );
    assert_eq!(
        count("r.storelog.0", ": saved mail to INBOX"),
        300,
        "{:#}",
        r["extra"]["store_logs"]
    );
    let r = arrival(
        &[
            "--lab", "dovecot", "--users", "5", "--mta", "lmtp", "--rate", "100/s", "-z", "2s",
        ],
        &json,
    );
    let sent = r["summary"]["accepted"].as_u64().unwrap_or(0);
    assert!(sent >= 190, "2 s at 100/s: {:#}", r["summary"]);
    all_arrived(&r, sent, "into LMTP, open loop");
}

/// Against a store and an MTA of one's own (started as separate labs), watched directly,
/// then through a proxy that holds every server line back D = 200 ms, then one that holds
/// every client line back D (issue 25). A message is visible when its EXISTS is read, so
/// the server's delay adds one D to end to end, not three (the DONE and the FETCH after it
/// are the watcher's work), and the client's adds nothing and takes nothing away (the
/// first message waits until every watcher's IDLE is confirmed). Open loop, each of the 4
/// users mailed every 2 s, so each arrival is announced on its own. Nothing of one's own
/// MTA or store is observed: no cost figures, rather than zeros. imaplib counts what each
/// mailbox holds afterwards.
#[test]
fn issue_25_end_to_end_grows_by_one_server_delay_and_not_with_client_delay() {
    if require("postfix").is_none() {
        return;
    }
    let Some(store) = Store::start(&["--users", "4"]) else {
        return;
    };
    let (_mta, entry) = postfix_into(&store);
    let dir = TempDir::new("arrival-delay");
    let json = dir.0.join("r.json");
    let run = |imap: &str, ctx: &str| -> (i64, i64) {
        let args = [
            "--smtp",
            &entry,
            "--imap",
            imap,
            "--users-file",
            &store.users_file,
            "-n",
            "12",
            "--rate",
            "2/s",
            "-c",
            "4",
        ];
        let r = arrival(&args, &json);
        all_arrived(&r, 12, ctx);
        assert!(
            r["extra"]["sut"].is_null(),
            "{ctx}: nothing of the MTA or store was observed, so no figures: {:#}",
            r["extra"]["sut"]
        );
        let e2e = &r["latency"]["e2e"];
        let (p50, min) = (e2e["p50_us"].as_i64(), e2e["min_us"].as_i64());
        eprintln!("{ctx}: e2e p50 {p50:?} µs, min {min:?} µs");
        (p50.unwrap_or(0), min.unwrap_or(0))
    };
    let d: i64 = 200_000;
    let (p50, min) = run(&store.imap, "direct");
    let (_down, port) = delay_proxy(&store.imap, Duration::from_micros(d as u64));
    let (p50_down, _) = run(&format!("127.0.0.1:{port}"), "server lines delayed");
    let grew = p50_down - p50;
    assert!(
        (d / 2..=d * 7 / 4).contains(&grew),
        "a {d} µs server delay adds one delay to e2e p50: direct {p50} µs, delayed {p50_down} µs (+{grew})"
    );
    let (_up, port) =
        delay_proxy_both(&store.imap, Duration::ZERO, Duration::from_micros(d as u64));
    let (p50_up, min_up) = run(&format!("127.0.0.1:{port}"), "client lines delayed");
    assert!(
        min_up >= min - d / 4 && p50_up >= p50 - d / 4,
        "a client delay must not make e2e shrink: direct p50 {p50} min {min} µs, delayed p50 {p50_up} min {min_up} µs"
    );
    assert!(
        p50_up <= p50 + d / 2,
        "a client delay adds nothing to e2e: direct p50 {p50} µs, delayed {p50_up} µs"
    );
    assert_eq!(
        inbox_counts(&store),
        [9, 9, 9, 9],
        "round-robin over 4 users"
    );
}

#[test]
fn bad_arrival_input_is_one_line_and_exit_1() {
    let dir = TempDir::new("arrival-bad");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@x.test secret\n").expect("write");
    let u = users.to_string_lossy().to_string();
    let own = [
        "mailbox",
        "arrival",
        "--smtp",
        "127.0.0.1:1",
        "--imap",
        "127.0.0.1:1",
        "--users-file",
        &u,
    ];
    refused_in_one_line(&[&own[..], &["--watchers", "5"]].concat(), "--watchers");
    refused_in_one_line(&["mailbox", "arrival", "--users-file", &u], "--lab dovecot");
    refused_in_one_line(&own, "not reachable");
}
