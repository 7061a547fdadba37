//! The Cyrus lab store (`--lab cyrus`, added as one file and one registry line): what
//! mailbench fills, reads and deletes in a Cyrus is what Python's imaplib and poplib see
//! there, and `mailbox populate|pop3|imap --lab cyrus` run and leave nothing behind.

use mailbench::lab::{MailFormat, QueueKind, Store, StoreLab, StoreOptions};

use crate::mailbox::{count, python, run_json};
use crate::util::TempDir;

/// The registry's Cyrus when it can run here (CI must be able to).
fn cyrus() -> Option<Store> {
    let store = Store::named("cyrus").expect("cyrus is registered");
    match store.check() {
        Ok(()) => Some(store),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI must run the Cyrus lab: {e}"),
        Err(e) => {
            eprintln!("SKIP: {e}");
            None
        }
    }
}

/// A Cyrus lab started through the registry, as `--lab cyrus` starts it, but kept for
/// the whole test so that imaplib and poplib can look after each run.
fn start(store: Store, users: u32) -> Box<dyn StoreLab> {
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
        .expect("start the Cyrus lab")
}

fn users(lab: &dyn StoreLab) -> Vec<(String, String)> {
    lab.users()
        .iter()
        .map(|u| (u.address.clone(), u.password.clone()))
        .collect()
}

/// Messages per user in each of `folders`, as imaplib sees them.
fn imap_counts(lab: &dyn StoreLab, folders: &[&str]) -> serde_json::Value {
    python(
        &lab.endpoints().imap.to_string(),
        &users(lab),
        &format!(
            "out = []
for u, p in USERS:
    m = imap(u, p)
    out.append([int(m.select(f, readonly=True)[1][0]) for f in {folders:?}])
    m.logout()
print(json.dumps(out))"
        ),
    )
}

/// Messages per user in the maildrop, as poplib's STAT sees them.
fn pop3_counts(lab: &dyn StoreLab) -> Vec<u64> {
    let v = python(
        &lab.endpoints().pop3.to_string(),
        &users(lab),
        "out = []
for u, p in USERS:
    c = poplib.POP3(HOST, PORT)
    c.user(u)
    c.pass_(p)
    out.append(c.stat()[0])
    c.quit()
print(json.dumps(out))",
    );
    serde_json::from_value(v).expect("counts")
}

fn summary(r: &serde_json::Value, key: &str) -> u64 {
    r["summary"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no summary {key} in {:#}", r["summary"]))
}

/// Filled over LMTP into two folders, changed by every IMAP command that changes a
/// mailbox, then downloaded and deleted over POP3: at each step imaplib and poplib count
/// what mailbench says it did.
#[test]
fn cyrus_counts_agree_with_imaplib_and_poplib() {
    let Some(store) = cyrus() else {
        return;
    };
    let lab = start(store, 3);
    let dir = TempDir::new("cyrus");
    let json = dir.0.join("r.json");
    let lmtp = lab.endpoints().lmtp.to_string();
    let imap = lab.endpoints().imap.to_string();
    let pop3 = lab.endpoints().pop3.to_string();
    let file = lab.users_file().to_string_lossy().to_string();

    // A fill into INBOX and f2 (made first, as a lab fill does: Cyrus delivers only into
    // folders that exist).
    lab.prepare_folders(2).expect("the admin makes the folders");
    let r = run_json(
        "populate",
        &[
            "--lmtp",
            &lmtp,
            "--users-file",
            &file,
            "--per-user",
            "4",
            "--folders",
            "2",
            "--fill-size",
            "3k",
        ],
        &json,
        0,
    );
    assert_eq!(summary(&r, "accepted"), 12, "{:#}", r["summary"]);
    assert_eq!(
        imap_counts(lab.as_ref(), &["INBOX", "f2"]),
        serde_json::json!([[2, 2], [2, 2], [2, 2]]),
        "imaplib sees each user's share in each folder"
    );

    // IMAP: appends, copies and expunges, counted by imaplib before and after; one
    // session per connection for the whole run, so each user's mailbox has one session
    // (two sessions of one mailbox see each other's changes between their own commands,
    // which the state checks count against Dovecot too).
    let inbox = |lab: &dyn StoreLab| -> u64 {
        serde_json::from_value::<Vec<Vec<u64>>>(imap_counts(lab, &["INBOX"]))
            .expect("counts")
            .iter()
            .flatten()
            .sum()
    };
    let before = inbox(lab.as_ref());
    let mix = "append=2,copy=1,delete=2,expunge=1,fetch=2,fetch_body=2,store=2,search=1,select=1,status=1,list=1,noop=1";
    let r = run_json(
        "imap",
        &[
            "--target",
            &imap,
            "--users-file",
            &file,
            "--mix",
            mix,
            "--append-size",
            "2k",
            "-n",
            "300",
            "-c",
            "3",
            "--per-conn",
            "0",
        ],
        &json,
        0,
    );
    let after = inbox(lab.as_ref());
    let ctx = format!("{:#} {:#}", r["summary"], r["counters"]);
    assert_eq!(summary(&r, "violations"), 0, "{ctx}");
    assert_eq!(
        (summary(&r, "errors"), summary(&r, "refused")),
        (0, 0),
        "{ctx}"
    );
    assert_eq!(summary(&r, "completed"), 300, "{ctx}");
    let (appended, expunged, copied) = (
        summary(&r, "appended"),
        summary(&r, "expunged"),
        count(&r, "copy"),
    );
    assert!(appended > 0 && expunged > 0 && copied > 0, "{ctx}");
    assert_eq!(
        after,
        before + appended + copied - expunged,
        "{ctx}: imaplib counted {before} in the INBOXes before and {after} after; mailbench \
         appended {appended}, copied {copied} and expunged {expunged}"
    );

    // POP3: one session per user (one connection, in turn) downloads and deletes all.
    let held = pop3_counts(lab.as_ref());
    let r = run_json(
        "pop3",
        &[
            "--target",
            &pop3,
            "--users-file",
            &file,
            "-n",
            "3",
            "-c",
            "1",
            "--download",
            "100",
            "--delete",
            "100",
        ],
        &json,
        0,
    );
    let ctx = format!("{:#}", r["summary"]);
    assert_eq!(
        (summary(&r, "sessions"), summary(&r, "completed")),
        (3, 3),
        "{ctx}"
    );
    let total: u64 = held.iter().sum();
    assert_eq!(
        summary(&r, "retrieved"),
        total,
        "{ctx}: poplib saw {held:?}"
    );
    assert_eq!(summary(&r, "deleted"), total, "{ctx}");
    assert_eq!(
        pop3_counts(lab.as_ref()),
        [0, 0, 0],
        "poplib sees them gone"
    );
    drop(lab);
}

/// `--lab cyrus` fills, runs and removes its lab: the fill's count is what populate and
/// the POP3 sessions see, the IMAP state checks find nothing, and no directory is left.
#[test]
fn mailbox_runs_against_lab_cyrus_and_leave_nothing() {
    if cyrus().is_none() {
        return;
    }
    let dir = TempDir::new("cyrus-lab");
    let json = dir.0.join("r.json");
    let gone = |r: &serde_json::Value| {
        let dirs = r["extra"]["lab_dirs"].as_array().expect("lab_dirs");
        assert!(!dirs.is_empty());
        for d in dirs {
            let d = d.as_str().unwrap_or_default();
            assert!(!std::path::Path::new(d).exists(), "{d} left behind");
        }
    };
    let lab = ["--lab", "cyrus", "--users", "3"];
    let r = run_json(
        "populate",
        &[&lab[..], &["--per-user", "4", "--folders", "2"]].concat(),
        &json,
        0,
    );
    assert_eq!(summary(&r, "accepted"), 12, "{:#}", r["summary"]);
    gone(&r);

    let r = run_json(
        "pop3",
        &[
            &lab[..],
            &["--fill", "4", "-n", "3", "-c", "1", "--download", "100"],
        ]
        .concat(),
        &json,
        0,
    );
    let ctx = format!("{:#}", r["summary"]);
    assert_eq!(r["extra"]["populate"]["accepted"], 12, "{ctx}");
    assert_eq!(
        (summary(&r, "completed"), summary(&r, "retrieved")),
        (3, 12),
        "{ctx}: each user's session downloads the 4 filled"
    );
    assert_eq!(r["config"]["lab"], "cyrus");
    gone(&r);

    let r = run_json(
        "imap",
        &[
            &lab[..],
            &["--fill", "3", "-n", "150", "-c", "2", "--per-conn", "0"],
        ]
        .concat(),
        &json,
        0,
    );
    let ctx = format!("{:#}", r["summary"]);
    assert_eq!(summary(&r, "violations"), 0, "{ctx}");
    assert_eq!(summary(&r, "errors"), 0, "{ctx}");
    assert_eq!(r["config"]["lab"], "cyrus");
    gone(&r);
}
