//! Issue 44: `mailbox profile` split over three agents against one lab Dovecot
//! (`--shard I/3`, one `--run-id` and `--start-at`), then merged: the merged actions,
//! histograms and connections equal the agents' sums and what Dovecot's own log says
//! connected; the capacity judged again on the summed steps equals what one agent with
//! all the users finds on the same seed; a missing agent leaves the capacity unjudged;
//! bad splits are refused in one line. The same split started by a real Slurm (`srun`)
//! merges the same way.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::mailbox::Store;
use crate::util::split::start_in;
use crate::util::{TempDir, describe, mailbench, refused_in_one_line, results};

/// The run id the agents share.
const RUN_ID: &str = "5eed00000000044b";

/// The workload every agent and the single run share: 9 users of the imaptest mix, 3
/// more every 2 s (steps of 3, 6, 9), seed 7.
const WORKLOAD: [&str; 12] = [
    "--scenario",
    "imaptest",
    "--time-scale",
    "600",
    "--ramp-users",
    "3:3/2s",
    "--max-users",
    "9",
    "--seed",
    "7",
    "--capacity-rule",
    "mean(action)>1s",
];

/// Starts a profile with `own` flags after the store's and the workload's, writing `json`.
fn profile(store: &Store, json: &std::path::Path, own: &[String]) -> std::process::Child {
    let mut args: Vec<String> = ["mailbox", "profile", "-q", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(json.to_string_lossy().into_owned());
    args.extend(store.servers().iter().map(|s| s.to_string()));
    args.extend(WORKLOAD.iter().map(|s| s.to_string()));
    args.extend(own.iter().cloned());
    mailbench()
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start a profile agent")
}

/// Waits for a child and expects exit 0.
fn finished(child: std::process::Child, what: &str) {
    let out = child.wait_with_output().expect("an agent's output");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&[what], &out));
}

/// `summary.key` of a results document.
fn n(r: &Value, key: &str) -> u64 {
    r["summary"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no summary {key} in {:#}", r["summary"]))
}

/// Each step's (users, actions) of a results document.
fn steps(r: &Value) -> Vec<(u64, u64)> {
    r["extra"]["capacity"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["users"].as_u64().unwrap_or(0),
                s["summary"]["actions"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// What every split of the nine users in three must show once merged: users dealt i,
/// i+3, i+6; merged counts, steps and histograms the agents' sums; connections as
/// Dovecot's log counts them (since `before`: its IMAP logins and LMTP connections); the
/// capacity judged again on all actions: every step held.
fn check_split(store: &Store, before: (usize, usize), parts: &[Value], m: &Value) {
    // Users dealt: agent i runs virtual users i, i+3, i+6.
    for (i, a) in parts.iter().enumerate() {
        let users: Vec<&str> = a["extra"]["shard"]["users"]
            .as_array()
            .expect("the agent's users")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let want: Vec<String> = (0..3)
            .map(|k| format!("user{}@store.test", i + 3 * k + 1))
            .collect();
        assert_eq!(users, want, "agent {i}'s users");
        assert_eq!(steps(a).iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3]);
    }
    for key in ["actions", "completed", "late", "users"] {
        let sum: u64 = parts.iter().map(|a| n(a, key)).sum();
        assert_eq!(n(m, key), sum, "merged {key} against the agents' sum");
    }
    // Step by step: users and actions added up on the shared clock.
    let merged_steps = steps(m);
    for (k, s) in merged_steps.iter().enumerate() {
        let sum = parts.iter().fold((0, 0), |acc, a| {
            let p = steps(a)[k];
            (acc.0 + p.0, acc.1 + p.1)
        });
        assert_eq!(*s, sum, "merged step {k} against the agents' sum");
    }
    for row in ["action", "login"] {
        let sum: u64 = parts
            .iter()
            .map(|a| a["latency"][row]["count"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(m["latency"][row]["count"].as_u64(), Some(sum), "{row}");
    }
    assert_eq!((n(m, "errors"), n(m, "refused")), (0, 0));
    // Dovecot's log: one IMAP login per virtual user, one LMTP connection per delivery.
    let connections = m["counters"]["connections"].as_u64().unwrap_or(0) as usize;
    let connected = || {
        store.logged(&["imap-login: Info: Login: "]) - before.0
            + store.logged(&["lmtp(", "Connect from"])
            - before.1
    };
    crate::util::wait_until(Duration::from_secs(3), || connected() >= connections);
    assert_eq!(connections, connected(), "connections vs Dovecot's log");
    assert_eq!(
        store.logged(&["imap-login: Info: Login: "]) - before.0,
        9,
        "nine users logged in once each"
    );
    // The capacity judged on all actions: every step held (far below a mean of 1 s).
    let cap = &m["extra"]["capacity"];
    assert_eq!(cap["capacity_users"], 9, "{cap:#}");
    assert_eq!(n(m, "capacity_users"), 9);
    assert!(cap["partial"].is_null() && cap["ended_by"] == serde_json::json!([]));
}

/// Split in three, merged: exact sums, Dovecot's log, and the capacity judged again as
/// one agent with all nine users judges it on the same seed.
#[test]
fn a_profile_split_in_three_merges_and_is_judged_again() {
    let Some(store) = Store::start(&["--users", "9", "--fill", "5", "--fill-size", "2k"]) else {
        return;
    };
    let dir = TempDir::new("profile-shards");
    let before = (
        store.logged(&["imap-login: Info: Login: "]),
        store.logged(&["lmtp(", "Connect from"]),
    );
    let at = start_in(Duration::from_secs(3));
    let files: Vec<PathBuf> = (0..3).map(|i| dir.0.join(format!("p{i}.json"))).collect();
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let own: Vec<String> = [
                "--shard",
                &format!("{i}/3"),
                "--run-id",
                RUN_ID,
                "--start-at",
                &at,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            profile(&store, f, &own)
        })
        .collect();
    for c in children {
        finished(c, "profile agent");
    }
    let parts: Vec<Value> = files.iter().map(|f| results(f)).collect();
    let m = crate::util::split::merged(&files, &dir.0.join("merged.json"));
    check_split(&store, before, &parts, &m);
    let merged_steps = steps(&m);

    // One agent with all nine users on the same seed: the same steps and capacity; every
    // action the same draw, so the steps' counts agree within what the end of a run cuts.
    let whole = dir.0.join("whole.json");
    finished(profile(&store, &whole, &[]), "the single agent");
    let w = results(&whole);
    assert_eq!(w["extra"]["capacity"]["capacity_users"], 9);
    let ws = steps(&w);
    assert_eq!(ws.len(), merged_steps.len());
    for (k, (a, b)) in ws.iter().zip(&merged_steps).enumerate() {
        assert_eq!(a.0, b.0, "step {k}'s users");
        let diff = a.1.abs_diff(b.1) as f64 / a.1.max(1) as f64;
        assert!(
            diff <= 0.02,
            "step {k}: one agent {} actions, merged {}",
            a.1,
            b.1
        );
    }

    // A missing agent: refused; forced, the capacity is not judged (never a smaller ramp).
    let out = dir.0.join("partial.json");
    let o = mailbench()
        .args(["merge", "--force", "-o"])
        .arg(&out)
        .args(&files[..2])
        .output()
        .expect("merge");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        describe(&["merge --force"], &o)
    );
    let p = results(&out);
    assert!(
        p["extra"]["capacity"]["capacity_users"].is_null(),
        "{:#}",
        p["extra"]["capacity"]
    );
    let why = p["extra"]["capacity"]["partial"].as_str().unwrap_or("");
    assert!(
        why.contains("2/3"),
        "partial names the missing shard: {why}"
    );
    let f: Vec<&str> = files[..2]
        .iter()
        .map(|f| f.to_str().expect("utf-8"))
        .collect();
    let o = mailbench()
        .args(["merge", "-o", "/dev/null"])
        .args(&f)
        .output()
        .expect("merge");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("2/3"));
}

/// The same split started by a real Slurm (`srun -n 3`, each agent its index from
/// `SLURM_PROCID` through `--shard auto/3`) against the lab Dovecot: the merge shows what
/// the local split does, as one agent with all nine users judges it (capacity 9).
#[test]
fn a_profile_split_by_srun_merges_as_the_local_split() {
    let Some(store) = Store::start(&["--users", "9", "--fill", "5", "--fill-size", "2k"]) else {
        return;
    };
    let cluster = crate::util::slurm::Slurm::start("slurm-profile", 4);
    let dir = cluster.dir.clone();
    let before = (
        store.logged(&["imap-login: Info: Login: "]),
        store.logged(&["lmtp(", "Connect from"]),
    );
    let at = start_in(Duration::from_secs(4));
    let mut srun = cluster.command("srun");
    srun.args(["-n", "3", "--time=2", "sh", "-c"])
        .arg(format!(
            r#"exec "$0" "$@" --json {}/p-$SLURM_PROCID.json"#,
            dir.display()
        ))
        .args([env!("CARGO_BIN_EXE_mailbench"), "mailbox", "profile", "-q"])
        .args(store.servers())
        .args(WORKLOAD)
        .args(["--shard", "auto/3", "--run-id", RUN_ID, "--start-at", &at]);
    let out = cluster.run(srun, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "srun: {}\n{}",
        describe(&["srun -n 3 mailbox profile"], &out),
        cluster.logs()
    );
    let files: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("p-{i}.json"))).collect();
    let parts: Vec<Value> = files.iter().map(|f| results(f)).collect();
    let m = crate::util::split::merged(&files, &dir.join("merged.json"));
    check_split(&store, before, &parts, &m);
    let left = cluster.stop();
    assert!(
        left.is_empty(),
        "left running after the cluster stopped: {left:?}"
    );
}

/// Bad splits of a profile are refused in one line before anything runs.
#[test]
fn bad_profile_splits_are_refused_in_one_line() {
    let dir = TempDir::new("profile-bad-shards");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "a@x p\nb@x p\nc@x p\n").expect("a users file");
    let users = users.to_string_lossy().into_owned();
    let at = "2099-01-01T00:00:00Z";
    let with = |more: &[&str]| -> Vec<String> {
        [
            "mailbox",
            "profile",
            "--imap",
            "127.0.0.1:1",
            "--lmtp",
            "127.0.0.1:1",
            "--users-file",
            &users,
            "--scenario",
            "imaptest",
        ]
        .iter()
        .chain(more)
        .map(|s| s.to_string())
        .collect()
    };
    let refused = |args: Vec<String>, needle: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_in_one_line(&a, needle);
    };
    refused_in_one_line(
        &[
            "mailbox",
            "profile",
            "--lab",
            "dovecot",
            "--shard",
            "0/3",
            "--run-id",
            "ab",
            "--start-at",
            at,
        ],
        "every agent would start a lab store of its own",
    );
    refused(with(&["--shard", "0/3", "--start-at", at]), "--run-id");
    refused(with(&["--shard", "0/3", "--run-id", "ab"]), "--start-at");
    refused(
        with(&["--shard", "0/3", "--run-id", "ab", "--start-at", "+30s"]),
        "one UTC time",
    );
    refused(
        with(&[
            "--shard",
            "0/3",
            "--run-id",
            "ab",
            "--start-at",
            at,
            "--virtual-users",
            "2",
        ]),
        "fewer than the 3 agents",
    );
    refused(
        with(&["--shard", "3/3", "--run-id", "ab", "--start-at", at]),
        "0 to 2",
    );
}
