//! `mailbench mailbox profile` against a real Dovecot: a preset's action counts are what
//! its rates promise (within Poisson's range), what it sent is in the Sent folders imaplib
//! reads, and a capacity ramp finds a lower capacity on a Dovecot held to fewer processes.

use crate::mailbox::{Store, count, python, run_json};
use crate::sink::Sink;
use crate::util::{TempDir, refused_in_one_line, require, results};

fn profile(args: &[&str], json: &std::path::Path) -> serde_json::Value {
    run_json("profile", args, json, 0)
}

/// Messages in all users' Sent folders, as imaplib counts them.
fn sent_folders(store: &Store) -> Option<u64> {
    let n = python(
        &store.imap,
        &store.users(),
        "n = 0
for u, p in USERS:
    m = imap(u, p)
    typ, data = m.select('Sent')
    if typ == 'OK':
        n += int(data[0])
    m.logout()
print(n)",
    );
    n.as_u64()
}

/// Seed 001's R6Mail user at 600x: 90 simulated minutes in 9 s, so each of 10 users should
/// do its 67 actions (30 reads, 12 deletes, 12 receives, 6 inbox openings and closings, 1
/// send). Counts are Poisson: each must be within four standard deviations of its mean.
#[test]
fn r6mail_counts_are_what_its_rates_promise() {
    let Some(store) = Store::start(&["--users", "10", "--fill", "5", "--fill-size", "2k"]) else {
        return;
    };
    let dir = TempDir::new("profile-r6mail");
    let json = dir.0.join("r.json");
    let args = [
        "--imap",
        &store.imap,
        "--pop3",
        &store.pop3,
        "--lmtp",
        &store.lmtp,
        "--users-file",
        &store.users_file,
        "--scenario",
        "r6mail",
        "--time-scale",
        "600",
        "-z",
        "9s",
    ];
    let r = profile(&args, &json);
    let s = &r["summary"];
    assert_eq!(s["errors"], 0, "{s:#}");
    assert_eq!(s["refused"], 0, "{s:#}");
    assert_eq!(s["completed"], s["actions"], "{s:#}");
    // Per user per 90 minutes, times 10 users; 9 s at 600x is 90 minutes.
    for (step, per_user) in [
        ("action", 67.0),
        ("read", 30.0),
        ("delete", 12.0),
        ("receive", 12.0),
        ("open_inbox", 6.0),
        ("close_inbox", 6.0),
    ] {
        let mean: f64 = per_user * 10.0;
        let got = count(&r, step) as f64;
        let sd = mean.sqrt();
        assert!(
            (got - mean).abs() <= 4.0 * sd,
            "{step}: expected {mean} ± {:.0} (4 sd), got {got}",
            4.0 * sd
        );
    }
    // What was sent was saved in the senders' Sent folders: imaplib counts them.
    let sent = sent_folders(&store);
    assert_eq!(sent, Some(count(&r, "send")), "Sent folders vs sends");
}

/// Users who send and archive: the sink (their MTA) counts every message and recipient
/// the profile says it sent, each sent message is saved in the sender's Sent folder, and
/// each move took one message from INBOX to Archive. Through a lab Postfix (`--mta
/// postfix`) the same sends are accepted.
#[test]
fn sends_go_through_the_mta_given_and_moves_land_in_archive() {
    let Some(store) = Store::start(&["--users", "5", "--fill", "20", "--fill-size", "1k"]) else {
        return;
    };
    let dir = TempDir::new("profile-send");
    let scenario = dir.0.join("send.toml");
    std::fs::write(
        &scenario,
        "period = \"1s\"
[[user]]
name = \"sender\"
client = \"caching\"
send_size = \"3k\"
send_recipients = 2
actions = { send = 2, move = 1 }
",
    )
    .expect("write the scenario");
    let sink_json = dir.0.join("sink.json");
    let sink = Sink::start(&["--json", &sink_json.to_string_lossy()]);
    let json = dir.0.join("r.json");
    let scenario = scenario.to_string_lossy().to_string();
    let smtp = sink.target();
    let args = [
        "--imap",
        &store.imap,
        "--pop3",
        &store.pop3,
        "--lmtp",
        &store.lmtp,
        "--smtp",
        &smtp,
        "--users-file",
        &store.users_file,
        "--scenario",
        &scenario,
        "-z",
        "3s",
    ];
    let r = profile(&args, &json);
    let sends = count(&r, "send");
    assert!(sends > 5, "5 users at 2/s for 3 s: {:#}", r["summary"]);
    assert_eq!(r["summary"]["errors"], 0, "{:#}", r["summary"]);
    assert_eq!(r["config"]["send_via"], "smtp");
    let (code, out) = sink.stop();
    assert_eq!(code, Some(0), "{out}");
    let s = results(&sink_json);
    assert_eq!(
        s["summary"]["messages"].as_u64(),
        Some(sends),
        "sink vs sends"
    );
    assert_eq!(
        s["summary"]["recipients"].as_u64(),
        Some(2 * sends),
        "sink recipients vs 2 per send"
    );
    let sent = sent_folders(&store);
    assert_eq!(sent, Some(sends), "Sent folders vs sends");
    let moves = count(&r, "move");
    assert!(moves > 2, "5 users at 1/s for 3 s: {:#}", r["summary"]);
    let folders = python(
        &store.imap,
        &store.users(),
        "n = [0, 0]
for u, p in USERS:
    m = imap(u, p)
    for i, f in enumerate(['INBOX', 'Archive']):
        typ, data = m.select(f)
        if typ == 'OK':
            n[i] += int(data[0])
    m.logout()
print(json.dumps(n))",
    );
    assert_eq!(
        folders,
        serde_json::json!([100 - moves, moves]),
        "[INBOX, Archive] after {moves} moves from 5 x 20"
    );

    if require("postfix").is_none() {
        return;
    }
    let lab = [
        "--lab",
        "dovecot",
        "--users",
        "5",
        "--fill",
        "1",
        "--mta",
        "postfix",
        "--scenario",
        &scenario,
        "-z",
        "2s",
    ];
    let r = profile(&lab, &json);
    assert!(count(&r, "send") > 3, "{:#}", r["summary"]);
    assert_eq!(r["summary"]["errors"], 0, "{:#}", r["summary"]);
    assert_eq!(r["summary"]["refused"], 0, "{:#}", r["summary"]);
    assert_eq!(r["config"]["send_via"], "lab postfix");
}

/// The capacity search: users added 4 at a time on caching clients (each holds an imap
/// process) until the 95th percentile of actions passes one second. A Dovecot allowed 10
/// imap processes makes the users beyond 10 wait for one (their backlog counts in the step
/// where it waits); one allowed 20 carries more.
#[test]
fn a_ramp_finds_less_capacity_on_a_slower_store() {
    if require("dovecot").is_none() {
        return;
    }
    let dir = TempDir::new("profile-ramp");
    let json = dir.0.join("r.json");
    let capacity = |limit: u32| {
        let setting = format!("service/imap/process_limit={limit}");
        let args = [
            "--lab",
            "dovecot",
            "--users",
            "40",
            "--fill",
            "3",
            "--fill-size",
            "2k",
            "--doveconf",
            &setting,
            "--scenario",
            "imaptest",
            "--time-scale",
            "30",
            "--ramp-users",
            "4:4/2s",
            "--max-users",
            "36",
            "--capacity-rule",
            "p95(action)>1s",
        ];
        let r = profile(&args, &json);
        let c = &r["extra"]["capacity"];
        let steps = c["steps"].as_array().map_or(0, |s| s.len());
        assert!(steps >= 2, "{limit}: {c:#}");
        (
            r["summary"]["capacity_users"].as_u64(),
            c["broke_at_users"].as_u64(),
        )
    };
    let (slow, slow_broke) = capacity(10);
    let (fast, _) = capacity(20);
    let slow = slow.expect("a capacity with 10 processes");
    assert!(
        (8..=16).contains(&slow),
        "10 imap processes carry 8 to 16 users here, got {slow}"
    );
    assert_eq!(
        slow_broke,
        Some(slow + 4),
        "the step after the capacity broke"
    );
    assert!(
        fast.is_some_and(|f| f > slow),
        "20 processes carry more than 10 ({slow}): {fast:?}"
    );
}

#[test]
fn bad_profile_input_is_one_line_and_exit_1() {
    let dir = TempDir::new("profile-bad");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@x.test secret\n").expect("write");
    let u = users.to_string_lossy().to_string();
    let bad_toml = dir.0.join("bad.toml");
    std::fs::write(
        &bad_toml,
        "period = \"1m\"\n[[user]]\nname = \"a\"\nclient = \"caching\"\nactions = { reed = 1 }\n",
    )
    .expect("write");
    let b = bad_toml.to_string_lossy().to_string();
    let remote = [
        "mailbox",
        "profile",
        "--imap",
        "127.0.0.1:1",
        "--users-file",
        &u,
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&remote[..], &["--scenario", &b]].concat(),
            "unknown action \"reed\"",
        ),
        ([&remote[..], &["--scenario", "nosuch"]].concat(), "r6mail"),
        (
            [&remote[..], &["--ramp-users", "10:0/5s"]].concat(),
            "--ramp-users",
        ),
        (
            [&remote[..], &["--ramp-users", "ten"]].concat(),
            "START:STEP/PERIOD",
        ),
        (
            [&remote[..], &["--capacity-rule", "bogus>1"]].concat(),
            "--capacity-rule",
        ),
        (
            [&remote[..], &["--time-scale", "0"]].concat(),
            "--time-scale",
        ),
        (
            vec!["mailbox", "profile", "--users-file", &u],
            "--lab dovecot",
        ),
    ];
    for (args, needle) in cases {
        refused_in_one_line(&args, needle);
    }
}
