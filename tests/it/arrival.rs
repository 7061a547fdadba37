//! `mailbench mailbox arrival` through a real Postfix into a real Dovecot: every message
//! injected over SMTP is seen over IMAP exactly once, what imaplib counts in the mailboxes
//! agrees, and a known delay on the IMAP side shows in end to end.

use std::time::Duration;

use crate::imap::inbox_counts;
use crate::mailbox::{Store, postfix_into, run_json};
use crate::util::{TempDir, delay_proxy, refused_in_one_line, require};

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

/// Against a store and an MTA of one's own (started as separate labs), watched through a
/// proxy that holds every server line back 300 ms: the watcher sees EXISTS, ends IDLE and
/// fetches, three waits, so no message can be visible in less than 900 ms. imaplib counts
/// what each mailbox holds afterwards.
#[test]
fn a_known_imap_delay_shows_in_end_to_end() {
    if require("postfix").is_none() {
        return;
    }
    let Some(store) = Store::start(&["--users", "4"]) else {
        return;
    };
    let (_mta, entry) = postfix_into(&store);
    let (_proxy, port) = delay_proxy(&store.imap, Duration::from_millis(300));
    let watched = format!("127.0.0.1:{port}");
    let dir = TempDir::new("arrival-delay");
    let json = dir.0.join("r.json");
    let args = [
        "--smtp",
        &entry,
        "--imap",
        &watched,
        "--users-file",
        &store.users_file,
        "-n",
        "40",
        "-c",
        "2",
    ];
    let r = arrival(&args, &json);
    all_arrived(&r, 40, "through the delaying proxy");
    let min = r["latency"]["e2e"]["min_us"].as_u64().unwrap_or(0);
    assert!(min >= 900_000, "three 300 ms waits at least, got {min} µs");
    assert_eq!(
        inbox_counts(&store),
        [10, 10, 10, 10],
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
