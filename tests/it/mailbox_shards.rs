//! Issue 44: `mailbox pop3` and `mailbox imap` split over three agents against one lab
//! Dovecot (`--shard I/3`, one `--run-id` and `--start-at`), then merged: the merged
//! counts equal the sum of the agents' and what poplib, imaplib and Dovecot's own log say
//! happened in the mailboxes; the merged latency histograms are the agents' added count
//! by count; the store's figures are the one watching agent's; bad splits are refused in
//! one line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::mailbox::{Store, python};
use crate::util::split::{merged, start_in};
use crate::util::{TempDir, describe, mailbench, refused_in_one_line, results};

/// The run id every agent of a test shares.
const RUN_ID: &str = "5eed00000000004a";

/// Runs `mailbox CMD` as agents side by side, agent i with `args[i]` (its `--shard`
/// among them) after `common`, each writing `dir/NAME-i.json`; waits for all and expects
/// each to exit 0. Their results files.
fn agents(
    cmd: &str,
    name: &str,
    common: &[&str],
    args: &[Vec<String>],
    dir: &Path,
) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = (0..args.len())
        .map(|i| dir.join(format!("{name}-{i}.json")))
        .collect();
    let children: Vec<_> = args
        .iter()
        .zip(&files)
        .map(|(own, json)| {
            let mut all: Vec<String> = ["mailbox", cmd, "-q", "--json"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            all.push(json.to_string_lossy().into_owned());
            all.extend(common.iter().map(|s| s.to_string()));
            all.extend(own.iter().cloned());
            let child = mailbench()
                .args(&all)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start an agent");
            (all, child)
        })
        .collect();
    for (all, child) in children {
        // Every agent's run is bounded by its -n; the command's own timeouts bound the rest.
        let out = child.wait_with_output().expect("an agent's output");
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    }
    files
}

/// `--shard i/3` with the shared run id and start, for agents 0..3.
fn shards(start_at: &str) -> Vec<Vec<String>> {
    (0..3)
        .map(|i| {
            vec![
                "--shard".into(),
                format!("{i}/3"),
                "--run-id".into(),
                RUN_ID.into(),
                "--start-at".into(),
                start_at.into(),
            ]
        })
        .collect()
}

/// A summary figure.
fn figure(r: &Value, key: &str) -> u64 {
    r["summary"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no summary {key} in {:#}", r["summary"]))
}

/// The merged figure `key` equals the sum of the agents'; returns it.
fn summed(m: &Value, agents: &[Value], key: &str) -> u64 {
    let sum: u64 = agents.iter().map(|a| figure(a, key)).sum();
    assert_eq!(
        figure(m, key),
        sum,
        "merged {key}: expected the agents' sum {sum} (agents: {:?})",
        agents.iter().map(|a| figure(a, key)).collect::<Vec<_>>()
    );
    sum
}

/// Every merged latency histogram holds exactly the agents' samples, bucket by bucket,
/// and no row of an agent is missing from it.
fn assert_histograms_add_up(m: &Value, agents: &[Value]) {
    let buckets = |h: &Value| -> BTreeMap<u64, u64> {
        let mut out = BTreeMap::new();
        for b in h["buckets"].as_array().into_iter().flatten() {
            *out.entry(b[0].as_u64().expect("value")).or_insert(0) += b[1].as_u64().expect("count");
        }
        out
    };
    let names: std::collections::BTreeSet<&String> = agents
        .iter()
        .flat_map(|a| a["latency"].as_object().expect("latency").keys())
        .collect();
    let merged_names: std::collections::BTreeSet<&String> =
        m["latency"].as_object().expect("latency").keys().collect();
    assert_eq!(
        merged_names, names,
        "merged latency rows against the agents'"
    );
    for name in names {
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        for a in agents {
            for (v, c) in buckets(&a["latency"][name]) {
                *want.entry(v).or_insert(0) += c;
            }
        }
        let got = buckets(&m["latency"][name]);
        assert_eq!(
            got, want,
            "latency {name}: merged buckets against the agents' sum"
        );
        assert_eq!(
            m["latency"][name]["count"].as_u64(),
            Some(want.values().sum()),
            "latency {name}: count"
        );
    }
}

/// The agents' users (`extra.shard.users`) are disjoint and together every user of the
/// store.
fn assert_users_dealt(agents: &[Value], store: &Store) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, a) in agents.iter().enumerate() {
        for u in a["extra"]["shard"]["users"]
            .as_array()
            .expect("the agent's users")
        {
            let u = u.as_str().expect("a name").to_string();
            if let Some(j) = seen.insert(u.clone(), i) {
                panic!("agents {j} and {i} both logged in as {u}");
            }
        }
    }
    let all: Vec<String> = store.users().into_iter().map(|(u, _)| u).collect();
    assert_eq!(
        seen.len(),
        all.len(),
        "users dealt: {seen:?}, store's: {all:?}"
    );
}

/// The merged series counts every unit once: its points' `sent` add up to the total.
fn assert_series_whole(m: &Value, total: u64) {
    let sent: u64 = m["series"]
        .as_array()
        .expect("a series")
        .iter()
        .map(|p| p["sent"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(sent, total, "the merged series' units against the total");
}

/// Sums `key=N/...` over Dovecot's POP3 logout lines (`retr=`, `del=`).
fn dovecot_pop3(store: &Store, key: &str) -> u64 {
    let dir = Path::new(&store.config).parent().expect("lab directory");
    let log = std::fs::read_to_string(dir.join("log/dovecot.log")).expect("Dovecot's log");
    log.lines()
        .filter(|l| l.contains("pop3(") && l.contains("Logged out"))
        .filter_map(|l| {
            let v = l.split(&format!(" {key}=")).nth(1)?;
            v.split('/').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Messages in each user's mailbox, as poplib's STAT sees them.
fn pop3_counts(store: &Store) -> Vec<u64> {
    let v = python(
        &store.pop3,
        &store.users(),
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

/// Messages in each user's `folder`, as imaplib sees them (0 where it does not exist).
fn imap_counts(store: &Store, folder: &str) -> Vec<u64> {
    let v = python(
        &store.imap,
        &store.users(),
        &format!(
            "out = []
for u, p in USERS:
    m = imap(u, p)
    typ, data = m.select({folder:?})
    out.append(int(data[0]) if typ == 'OK' else 0)
    m.logout()
print(json.dumps(out))"
        ),
    );
    serde_json::from_value(v).expect("counts")
}

/// The lab Dovecot's master process, for `--sut-pid`.
fn dovecot_pid(store: &Store) -> String {
    let dir = Path::new(&store.config).parent().expect("lab directory");
    std::fs::read_to_string(dir.join("run/master.pid"))
        .expect("Dovecot's master.pid")
        .trim()
        .to_string()
}

/// POP3 split in three: 30 sessions that download everything and delete half, over 9
/// users of 10 messages. The merged sessions, retrievals and deletions equal the agents'
/// sums and Dovecot's own logout lines (retr=, del=) and poplib's count of what is left;
/// the histograms add up; the store's figures are agent 0's, the one that watched it.
#[test]
fn pop3_split_in_three_merges_exactly() {
    let Some(store) = Store::start(&["--users", "9", "--fill", "10", "--fill-size", "3k"]) else {
        return;
    };
    let dir = TempDir::new("pop3-shards");
    let before: u64 = pop3_counts(&store).iter().sum();
    assert_eq!(before, 90, "the lab's fill");
    let common = [
        "--target",
        &store.pop3,
        "--users-file",
        &store.users_file,
        "-n",
        "30",
        "-c",
        "3",
        "--delete",
        "50",
    ];
    let mut own = shards(&start_in(Duration::from_secs(3)));
    own[0].extend(["--sut-pid".to_string(), dovecot_pid(&store)]);
    let files = agents("pop3", "pop3", &common, &own, &dir.0);
    let parts: Vec<Value> = files.iter().map(|f| results(f)).collect();
    let m = merged(&files, &dir.0.join("merged.json"));
    assert_users_dealt(&parts, &store);
    for (i, a) in parts.iter().enumerate() {
        assert_eq!(figure(a, "sessions"), 10, "agent {i}: a third of -n 30");
        assert_eq!(a["config"]["concurrency"], 1, "agent {i}: a third of -c 3");
        assert_eq!(a["config"]["users"], 9, "agent {i}: the run's users");
    }
    assert_eq!(figure(&m, "sessions"), 30);
    for key in [
        "sessions",
        "completed",
        "logins",
        "retrieved",
        "deleted",
        "bytes",
    ] {
        summed(&m, &parts, key);
    }
    assert_eq!((figure(&m, "errors"), figure(&m, "refused")), (0, 0));
    // Dovecot writes a session's logout line a little after the client's QUIT.
    crate::util::wait_until(Duration::from_secs(3), || {
        store.logged(&["pop3(", "Logged out"]) >= 30
    });
    let (retrieved, deleted) = (figure(&m, "retrieved"), figure(&m, "deleted"));
    assert_eq!(
        retrieved,
        dovecot_pop3(&store, "retr"),
        "Dovecot's retr= lines"
    );
    assert_eq!(deleted, dovecot_pop3(&store, "del"), "Dovecot's del= lines");
    let after: u64 = pop3_counts(&store).iter().sum();
    assert_eq!(
        before - after,
        deleted,
        "poplib counted {before} messages before and {after} after; merged deleted {deleted}"
    );
    assert_histograms_add_up(&m, &parts);
    assert_series_whole(&m, 30);
    // The store's figures: agent 0's, and said so; the others watched nothing.
    assert!(parts[1]["extra"].get("sut").is_none() && parts[2]["extra"].get("sut").is_none());
    let mut watched = parts[0]["extra"]["sut"].clone();
    assert!(
        watched["peak_procs"].as_u64().unwrap_or(0) > 0,
        "{watched:#}"
    );
    for k in [
        "net_in_bytes",
        "net_out_bytes",
        "net_in_bytes_per_s",
        "net_out_bytes_per_s",
    ] {
        watched.as_object_mut().expect("a report").remove(k);
    }
    assert_eq!(m["extra"]["sut"], watched, "the merged store report");
    let by = &m["extra"]["store_watched_by"];
    assert_eq!(by["file"], files[0].to_string_lossy().as_ref(), "{by:#}");
    assert_eq!(by["shard"], "0/3", "{by:#}");
    assert!(
        m["series"]
            .as_array()
            .expect("series")
            .iter()
            .any(|p| p.get("sut").is_some()),
        "the merged series keeps the watcher's readings"
    );
}

/// An open-loop POP3 split on one clock: 9 sessions a second for 3 s (a gap of 111 ms,
/// so that each session ends in the interval it was scheduled in) over three agents with
/// one `--start-at`. Every agent's interval holds its 3, and every merged interval the
/// run's 9: the agents' series line up on the shared grid.
#[test]
fn pop3_split_series_share_the_clock() {
    let Some(store) = Store::start(&["--users", "6", "--fill", "1", "--fill-size", "1k"]) else {
        return;
    };
    let dir = TempDir::new("pop3-shard-clock");
    let common = [
        "--target",
        &store.pop3,
        "--users-file",
        &store.users_file,
        "--rate",
        "9/s",
        "-n",
        "27",
        "-c",
        "3",
        "--delete",
        "0",
    ];
    let files = agents(
        "pop3",
        "clock",
        &common,
        &shards(&start_in(Duration::from_secs(3))),
        &dir.0,
    );
    let parts: Vec<Value> = files.iter().map(|f| results(f)).collect();
    let m = merged(&files, &dir.0.join("merged.json"));
    let per_interval = |r: &Value| -> Vec<(u64, u64)> {
        r["series"]
            .as_array()
            .expect("a series")
            .iter()
            .filter(|p| p["sent"].as_u64().unwrap_or(0) > 0)
            .map(|p| {
                (
                    p["t_s"].as_f64().unwrap_or(0.0).round() as u64,
                    p["sent"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    for (i, a) in parts.iter().enumerate() {
        assert_eq!(
            per_interval(a),
            [(1, 3), (2, 3), (3, 3)],
            "agent {i}'s intervals"
        );
    }
    assert_eq!(
        per_interval(&m),
        [(1, 9), (2, 9), (3, 9)],
        "the merged intervals"
    );
    assert_eq!(figure(&m, "sessions"), 27);
    assert_histograms_add_up(&m, &parts);
}

/// IMAP split in three with a mix that appends, copies, moves, deletes and expunges: the
/// merged figures equal the agents' sums, and imaplib's INBOX and Archive counts after
/// the run are what the merged figures say was added and removed; no violations; the
/// merged histograms are the agents' added count by count; Dovecot logged one login per
/// merged session.
#[test]
fn imap_split_in_three_merges_exactly() {
    let Some(store) = Store::start(&["--users", "6", "--fill", "5", "--fill-size", "3k"]) else {
        return;
    };
    let dir = TempDir::new("imap-shards");
    let before: u64 = imap_counts(&store, "INBOX").iter().sum();
    // imaplib's own logins, before the agents' and after them, are not the agents'.
    let logins_before = store.logged(&["imap-login: Info: Login: "]) as u64;
    let mix = "append=2,copy=1,move=1,delete=2,expunge=1,fetch=2,fetch_body=2,store=2,search=1,select=1,status=1,list=1,noop=1";
    let common = [
        "--target",
        &store.imap,
        "--users-file",
        &store.users_file,
        "--mix",
        mix,
        "--append-size",
        "2k",
        "-n",
        "300",
        "-c",
        "3",
        "--per-conn",
        "25",
    ];
    let files = agents(
        "imap",
        "imap",
        &common,
        &shards(&start_in(Duration::from_secs(3))),
        &dir.0,
    );
    let parts: Vec<Value> = files.iter().map(|f| results(f)).collect();
    let m = merged(&files, &dir.0.join("merged.json"));
    assert_users_dealt(&parts, &store);
    // Each agent draws as its connection slots of the whole run would, not as agent 0
    // (all three ran the same commands before: 12 appended, 7 copied, 10 expunged each).
    let drawn = |r: &Value| -> Vec<u64> {
        [
            "append",
            "copy",
            "move",
            "delete",
            "expunge",
            "fetch",
            "fetch_body",
            "store",
        ]
        .iter()
        .map(|c| r["latency"][c]["count"].as_u64().unwrap_or(0))
        .collect()
    };
    assert!(
        !(drawn(&parts[0]) == drawn(&parts[1]) && drawn(&parts[1]) == drawn(&parts[2])),
        "the three agents drew the same commands: {:?}",
        drawn(&parts[0])
    );
    assert_eq!(figure(&m, "commands"), 300);
    for key in [
        "commands",
        "completed",
        "sessions",
        "fetched",
        "appended",
        "copied",
        "expunged",
        "moved",
        "violations",
        "bytes",
    ] {
        summed(&m, &parts, key);
    }
    assert_eq!(figure(&m, "violations"), 0, "{:#}", m["summary"]);
    assert_eq!((figure(&m, "errors"), figure(&m, "refused")), (0, 0));
    let logins = || store.logged(&["imap-login: Info: Login: "]) as u64 - logins_before;
    // Dovecot writes its log lines a little after the sessions end.
    crate::util::wait_until(Duration::from_secs(3), || {
        logins() >= figure(&m, "sessions")
    });
    assert_eq!(figure(&m, "sessions"), logins(), "Dovecot's logins");
    let after: u64 = imap_counts(&store, "INBOX").iter().sum();
    let archived: u64 = imap_counts(&store, "Archive").iter().sum();
    let (appended, copied) = (figure(&m, "appended"), figure(&m, "copied"));
    let (expunged, moved) = (figure(&m, "expunged"), figure(&m, "moved"));
    assert!(
        appended > 0 && copied > 0 && expunged > 0 && moved > 0,
        "{:#}",
        m["summary"]
    );
    assert_eq!(
        after,
        before + appended + copied - expunged - moved,
        "imaplib counted {before} messages before and {after} after; merged: appended \
         {appended}, copied {copied}, expunged {expunged}, moved {moved}"
    );
    assert_eq!(
        archived, moved,
        "imaplib's Archive against the merged moved"
    );
    assert_histograms_add_up(&m, &parts);
    assert_series_whole(&m, 300);
}

/// Splits that cannot be one run's are refused by `merge` in one line naming the file:
/// users shared between agents (one agent dealt from a list in another order), an agent
/// without `--shard`, a shard given twice, a missing shard, a different workload setting
/// and a different kind of run; and the agents' own refusals of a split that cannot be
/// dealt (`--lab`, fewer users than agents).
#[test]
fn bad_mailbox_splits_are_refused_in_one_line() {
    let Some(store) = Store::start(&["--users", "3", "--fill", "2", "--fill-size", "1k"]) else {
        return;
    };
    let dir = TempDir::new("bad-mailbox-shards");
    let users = store.users();
    // The same users, dealt from another order: agent 1/3 gets user3, agent 2/3's.
    let rotated = dir.0.join("rotated.txt");
    let text: String = users[1..]
        .iter()
        .chain(&users[..1])
        .map(|(u, p)| format!("{u} {p}\n"))
        .collect();
    std::fs::write(&rotated, text).expect("write the rotated users");
    let rotated = rotated.to_string_lossy().into_owned();
    let common = [
        "--target",
        &store.pop3,
        "-n",
        "3",
        "-c",
        "3",
        "--delete",
        "0",
    ];
    let split = |i: usize| -> Vec<String> {
        ["--shard", &format!("{i}/3"), "--run-id", RUN_ID]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let with = |mut v: Vec<String>, more: &[&str]| {
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let own = vec![
        with(split(0), &["--users-file", &store.users_file]),
        with(split(1), &["--users-file", &store.users_file]),
        with(split(2), &["--users-file", &store.users_file]),
        with(split(1), &["--users-file", &rotated]),
        with(
            split(2),
            &["--users-file", &store.users_file, "--download", "50"],
        ),
        vec![
            "--run-id".into(),
            RUN_ID.into(),
            "--users-file".into(),
            store.users_file.clone(),
        ],
    ];
    let f = agents("pop3", "pop3", &common, &own, &dir.0);
    let name = |i: usize| f[i].to_string_lossy().into_owned();
    let imap = agents(
        "imap",
        "imap",
        &[
            "--target",
            &store.imap,
            "--users-file",
            &store.users_file,
            "-n",
            "3",
            "-c",
            "3",
        ],
        &[split(1)],
        &dir.0,
    );
    let out = dir.0.join("m.json").to_string_lossy().into_owned();
    let merge = |files: &[String]| -> Vec<String> {
        let mut a = vec!["merge".to_string()];
        a.extend(files.iter().cloned());
        a.extend(["-o".to_string(), out.clone()]);
        a
    };
    let imap1 = imap[0].to_string_lossy().into_owned();
    for (files, needle) in [
        (
            vec![name(0), name(3), name(2)],
            format!("{} and {} both logged in as", name(3), name(2)),
        ),
        (
            vec![name(0), name(1), name(2), name(5)],
            format!("{} ran without --shard", name(5)),
        ),
        (
            vec![name(0), name(1), name(1), name(2)],
            format!("{} and {} are both shard 1/3", name(1), name(1)),
        ),
        (
            vec![name(0), name(2)],
            "shard 1/3 of the run is in no file".to_string(),
        ),
        (
            vec![name(0), name(1), name(4)],
            format!(
                "{} and {} ran different configurations (config.download",
                name(0),
                name(4)
            ),
        ),
        (
            vec![name(0), imap1.clone(), name(2)],
            format!("{} is a pop3 run and {imap1} a imap run", name(0)),
        ),
    ] {
        let args = merge(&files);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_in_one_line(&args, &needle);
    }
    // The good split merges.
    let m = merged(&f[..3], &dir.0.join("good.json"));
    assert_eq!(figure(&m, "sessions"), 3);
    // auto/N takes the index from the launcher (here Slurm's task id): agent 1's user.
    let json = dir.0.join("auto.json");
    let args = [
        "mailbox",
        "pop3",
        "-q",
        "--target",
        &store.pop3,
        "--users-file",
        &store.users_file,
        "-n",
        "3",
        "-c",
        "3",
        "--delete",
        "0",
        "--shard",
        "auto/3",
        "--run-id",
        RUN_ID,
        "--json",
        &json.to_string_lossy(),
    ];
    let out = mailbench()
        .args(args)
        .env("SLURM_PROCID", "1")
        .output()
        .expect("run an auto/3 agent");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let shard = &results(&json)["extra"]["shard"];
    assert_eq!(shard["label"], "1/3", "{shard:#}");
    assert_eq!(shard["users"], serde_json::json!([users[1].0]), "{shard:#}");
    // An agent refuses a split it cannot deal.
    refused_in_one_line(
        &[
            "mailbox", "pop3", "--lab", "dovecot", "--shard", "0/2", "--run-id", RUN_ID,
        ],
        "--shard 0/2: every agent would start a lab store of its own",
    );
    refused_in_one_line(
        &[
            "mailbox",
            "pop3",
            "--target",
            &store.pop3,
            "--users-file",
            &store.users_file,
            "--shard",
            "0/4",
            "--run-id",
            RUN_ID,
        ],
        "--shard 0/4: 3 user(s) in --users-file cannot be dealt to 4 agents",
    );
}
