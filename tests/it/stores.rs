//! Seed 001's comparison of two stores (issue 30): one seed gives Dovecot and Cyrus the
//! same sequence of actions (imaplib reads the same mailboxes from both afterwards, and
//! as many messages in the Sent folders as the profile says it sent), and
//! `--compare-store-conf` gives a store held to fewer processes the lower capacity, in
//! one results file that `report` draws as store CPU against users.

use mailbench::lab::{MailFormat, QueueKind, Store, StoreLab, StoreOptions};

use crate::mailbox::{count, python, run_json};
use crate::util::{TempDir, mailbench};

/// A lab store started through the registry (as `--lab` starts it), kept for the test so
/// that imaplib can read it after the run.
fn start(name: &str, users: u32) -> Box<dyn StoreLab> {
    let store = Store::named(name).expect("registered");
    if let Err(e) = store.check() {
        panic!("the {name} lab cannot run here ({e}): run scripts/install-deps.sh --for-tests");
    }
    store
        .start(&StoreOptions {
            users,
            user_template: "user{num}@store.test".into(),
            password_template: "secret{num}".into(),
            mail_format: MailFormat::Maildir,
            placement: QueueKind::Tmpfs,
            starttls: false,
            settings: Vec::new(),
            server_stats: false,
        })
        .unwrap_or_else(|e| panic!("start the {name} lab: {e}"))
}

/// Per user, the messages in INBOX and in Sent (0 when there is no Sent), as imaplib
/// counts them.
fn mailboxes(lab: &dyn StoreLab) -> serde_json::Value {
    let users: Vec<(String, String)> = lab
        .users()
        .iter()
        .map(|u| (u.address.clone(), u.password.clone()))
        .collect();
    python(
        &lab.endpoints().imap.to_string(),
        &users,
        "out = []
for u, p in USERS:
    m = imap(u, p)
    row = []
    for f in ['INBOX', 'Sent']:
        typ, data = m.select(f, readonly=True)
        row.append(int(data[0]) if typ == 'OK' else 0)
    out.append(row)
    m.logout()
print(json.dumps(out))",
    )
}

/// The R6Mail users of one seed against Dovecot and against Cyrus: every action of each
/// kind is done as often on both, and each user's INBOX and Sent hold the same number of
/// messages on both afterwards, as imaplib reads them from the stores.
#[test]
fn one_seed_asks_both_stores_for_the_same_actions() {
    let dir = TempDir::new("stores-seed");
    let mut seen = Vec::new();
    for name in ["dovecot", "cyrus"] {
        let lab = start(name, 4);
        lab.prepare_folders(1).expect("folders");
        let json = dir.0.join(format!("{name}.json"));
        let file = lab.users_file().to_string_lossy().to_string();
        let (imap, pop3, lmtp) = (
            lab.endpoints().imap.to_string(),
            lab.endpoints().pop3.to_string(),
            lab.endpoints().lmtp.to_string(),
        );
        let fill = run_json(
            "populate",
            &["--lmtp", &lmtp, "--users-file", &file, "--per-user", "5"],
            &json,
            0,
        );
        assert_eq!(
            fill["summary"]["accepted"], 20,
            "{name}: {:#}",
            fill["summary"]
        );
        let r = run_json(
            "profile",
            &[
                "--imap",
                &imap,
                "--pop3",
                &pop3,
                "--lmtp",
                &lmtp,
                "--users-file",
                &file,
                "--scenario",
                "r6mail",
                "--seed",
                "7",
                "--time-scale",
                "150",
                "-z",
                "6s",
            ],
            &json,
            0,
        );
        let s = &r["summary"];
        assert_eq!(
            (s["errors"].as_u64(), s["refused"].as_u64()),
            (Some(0), Some(0)),
            "{name}: {s:#}"
        );
        let counts: Vec<(String, u64)> = [
            "open_inbox",
            "close_inbox",
            "read",
            "delete",
            "receive",
            "send",
            "action",
        ]
        .iter()
        .map(|a| (a.to_string(), count(&r, a)))
        .collect();
        let boxes = mailboxes(lab.as_ref());
        let sent: u64 = serde_json::from_value::<Vec<Vec<u64>>>(boxes.clone())
            .expect("counts")
            .iter()
            .map(|row| row[1])
            .sum();
        assert_eq!(
            sent,
            count(&r, "send"),
            "{name}: imaplib's Sent folders vs sends"
        );
        seen.push((name, counts, boxes));
    }
    let (d, c) = (&seen[0], &seen[1]);
    assert!(
        d.1.iter().any(|(a, n)| a == "action" && *n >= 20),
        "a run long enough to mean something: {:?}",
        d.1
    );
    assert_eq!(
        d.1, c.1,
        "mailbench's counts per action, dovecot then cyrus"
    );
    assert_eq!(
        d.2, c.2,
        "imaplib's INBOX and Sent per user, dovecot then cyrus"
    );
}

/// Dovecot with its imap service held to 4 processes against itself with 1,000, in one
/// comparison: the held one carries fewer users; the table prints both capacities and
/// the results file holds both sides, which `report` draws on one CPU-against-users chart.
#[test]
fn a_store_held_to_fewer_processes_has_the_lower_capacity() {
    let dir = TempDir::new("stores-limit");
    let json = dir.0.join("cmp.json");
    let out = mailbench()
        .args([
            "mailbox", "profile", "--lab", "dovecot", "--users", "24", "--fill", "5",
        ])
        .args(["--compare-store-conf", "service/imap/process_limit=1000,4"])
        .args([
            "--ramp-users",
            "4:4/3s",
            "--time-scale",
            "120",
            "--rounds",
            "1",
        ])
        .args(["--connect-timeout", "2s", "--seed", "11", "--json"])
        .arg(&json)
        .output()
        .expect("run mailbench");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("results")).expect("json");
    let sides = r["extra"]["sides"].as_array().expect("sides");
    let capacity = |i: usize| sides[i]["results"]["summary"]["capacity_users"].as_u64();
    assert_eq!(sides[0]["label"], "service/imap/process_limit=1000");
    assert_eq!(sides[1]["label"], "service/imap/process_limit=4");
    let (free, held) = (
        capacity(0).expect("a capacity with 1,000"),
        capacity(1).unwrap_or(0),
    );
    assert!(
        held < free,
        "4 processes carry fewer users than 1,000: {held} vs {free}"
    );
    for side in sides {
        assert_eq!(side["results"]["config"]["seed"], 11, "one seed for both");
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("capacity_users"))
        .unwrap_or_else(|| panic!("no capacity row in:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], [free.to_string(), held.to_string()], "{row}");
    for resource in [
        "server read calls/s",
        "server peak shared KiB",
        "server major faults/s",
    ] {
        assert!(text.contains(resource), "{resource} in:\n{text}");
    }
    let html = dir.0.join("r.html");
    let out = mailbench()
        .arg("report")
        .arg(&json)
        .arg("-o")
        .arg(&html)
        .output()
        .expect("report");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).expect("page");
    for want in [
        "\"id\":\"users_store_cpu\"",
        &format!("service/imap/process_limit=1000: capacity {free} users"),
        "service/imap/process_limit=4: store",
    ] {
        assert!(page.contains(want), "{want} in the report");
    }
}
