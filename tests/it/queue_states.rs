//! Issue 29 — queue states as the MTAs' own tools count them: a known backlog (mail the
//! MTA cannot deliver, some of it put on hold with `postsuper -h`) and mailbench's counts
//! against Postfix's `postqueue -j` and `qshape`, and qmail's `qmail-qstat`, at a quiescent
//! point; then a relay run whose series, summary, text and HTML report carry them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mailbench::lab::{LabOptions, Mta, MtaLab, QueueKind};
use mailbench::stats::queues::QueueState;

use crate::util::{TempDir, describe, free_port, results, run, wait_until};

/// A program a test needs, or a failure naming what installs it.
fn need(path: &str, from: &str) {
    assert!(Path::new(path).exists(), "{path} is missing: {from}");
}

/// A lab of `mta` relaying to a port where nothing listens, retrying only after an hour:
/// whatever it accepts stays in its queue, still.
fn stuck_lab(mta: Mta, settings: &[(&str, &str)]) -> Box<dyn MtaLab> {
    mta.start(&LabOptions {
        hops: 1,
        queue: QueueKind::Tmpfs,
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        limits: Default::default(),
        relay: ([127, 0, 0, 1], free_port()).into(),
        relay_lmtp: false,
        starttls: false,
        hold: false,
        dkim: None,
        dns: None,
        lookup: None,
        logging: mailbench::lab::MtaLogging::On,
        between: None,
    })
    .unwrap_or_else(|e| panic!("the {} lab starts (tests run as root): {e}", mta.name()))
}

/// Injects `n` messages into `lab` with `mailbench send`.
fn inject(lab: &dyn MtaLab, n: u32) {
    let (entry, n) = (lab.entry().to_string(), n.to_string());
    let args = ["send", "-q", "-n", &n, "-c", "1", "--size", "1k", &entry];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
}

/// The messages in `queue` according to `states`.
fn count(states: &[QueueState], queue: &str) -> u64 {
    states
        .iter()
        .find(|q| q.queue == queue)
        .unwrap_or_else(|| panic!("no {queue} queue in {states:?}"))
        .messages
}

/// The Postfix lab's configuration directory (the one holding main.cf).
fn config_dir(lab: &dyn MtaLab) -> PathBuf {
    lab.dirs()
        .into_iter()
        .find(|d| d.join("main.cf").exists())
        .expect("the lab Postfix has a main.cf")
}

/// `postqueue -j`: each message's queue name.
fn postqueue(dir: &Path) -> Vec<(String, String)> {
    let out = Command::new("/usr/sbin/postqueue")
        .arg("-c")
        .arg(dir)
        .arg("-j")
        .output()
        .expect("run postqueue");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("postqueue -j line");
            (
                v["queue_name"].as_str().unwrap_or_default().to_string(),
                v["queue_id"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `qshape QUEUE`'s TOTAL.
fn qshape(dir: &Path, queue: &str) -> u64 {
    let out = Command::new("/usr/sbin/qshape")
        .arg("-c")
        .arg(dir)
        .arg(queue)
        .output()
        .expect("run qshape");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("TOTAL")).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no TOTAL line from qshape {queue}: {text}"))
}

#[test]
fn postfix_queue_states_equal_postqueue_and_qshape_with_mail_deferred_and_on_hold() {
    need(
        "/usr/sbin/postsuper",
        "install Postfix (scripts/install-deps.sh)",
    );
    need(
        "/usr/sbin/qshape",
        "install postfix's qshape (scripts/install-deps.sh)",
    );
    let lab = stuck_lab(
        mailbench::lab::postfix::KIND,
        &[
            ("queue_run_delay", "3600s"),
            ("minimal_backoff_time", "3600s"),
            ("maximal_backoff_time", "3600s"),
        ],
    );
    let dir = config_dir(lab.as_ref());
    inject(lab.as_ref(), 12);
    // Quiescent: each message tried once, refused, and deferred for an hour.
    assert!(
        wait_until(Duration::from_secs(30), || {
            let q = postqueue(&dir);
            q.len() == 12 && q.iter().all(|(name, _)| name == "deferred")
        }),
        "12 deferred messages: {:?}",
        postqueue(&dir)
    );
    for (_, id) in postqueue(&dir).iter().take(5) {
        let out = Command::new("/usr/sbin/postsuper")
            .arg("-c")
            .arg(&dir)
            .args(["-h", id])
            .output()
            .expect("run postsuper");
        assert!(out.status.success(), "postsuper -h {id}: {out:?}");
    }
    let theirs = postqueue(&dir);
    let states = lab.queue_states();
    for queue in ["incoming", "active", "deferred", "hold"] {
        let by_postqueue = theirs.iter().filter(|(n, _)| n == queue).count() as u64;
        assert_eq!(count(&states, queue), by_postqueue, "{queue}: {states:?}");
        assert_eq!(count(&states, queue), qshape(&dir, queue), "{queue}");
    }
    assert_eq!((count(&states, "deferred"), count(&states, "hold")), (7, 5));
}

#[test]
fn qmail_queue_states_equal_qmail_qstat() {
    need(
        "/opt/mailbench/mtas/qmail/var/qmail/bin/qmail-qstat",
        "build qmail for the lab (scripts/install-mtas.sh)",
    );
    need("/usr/bin/nsenter", "install util-linux");
    let lab = stuck_lab(mailbench::lab::qmail::KIND, &[]);
    inject(lab.as_ref(), 9);
    // qmail-qstat runs where the lab's /var/qmail is: in qmail-send's mount namespace.
    let send = lab
        .pids()
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "qmail-send")
        })
        .expect("qmail-send runs");
    let qstat = || {
        let out = Command::new("/usr/bin/nsenter")
            .args(["-t", &send.to_string(), "-m", "/var/qmail/bin/qmail-qstat"])
            .output()
            .expect("run qmail-qstat");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let number = |prefix: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {prefix:?} in qmail-qstat's {text:?}"))
        };
        (
            number("messages in queue:"),
            number("messages in queue but not yet preprocessed:"),
        )
    };
    // Quiescent: every message preprocessed, each waiting for its next try.
    assert!(
        wait_until(Duration::from_secs(30), || qstat() == (9, 0)),
        "qmail-qstat {:?}",
        qstat()
    );
    let states = lab.queue_states();
    assert_eq!((count(&states, "queue"), count(&states, "todo")), qstat());
}

#[test]
fn a_relay_run_samples_the_queues_into_series_summary_text_and_report() {
    need(
        "/usr/sbin/postfix",
        "install Postfix (scripts/install-deps.sh)",
    );
    let dir = TempDir::new("queue-states");
    let json = dir.0.join("r.json");
    let html = dir.0.join("r.html");
    let j = json.to_string_lossy().to_string();
    // defer_transports: Postfix accepts all and defers every delivery — a deferred queue
    // that grows to the 20 injected and stays there (no retry within the hour).
    let args = [
        "relay",
        "--lab",
        "postfix",
        "-n",
        "20",
        "-c",
        "2",
        "--size",
        "1k",
        "--mta-conf",
        "defer_transports=smtp",
        "--mta-conf",
        "queue_run_delay=3600s",
        "--mta-conf",
        "minimal_backoff_time=3600s",
        "--mta-conf",
        "maximal_backoff_time=3600s",
        "--drain-timeout",
        "4s",
        "--interval",
        "1s",
        "--json",
        &j,
    ];
    let out = run(&args);
    let r = results(&json);
    let most = &r["summary"]["max_queue_states"];
    let queue = |name: &str| {
        most.as_array()
            .and_then(|a| a.iter().find(|q| q["queue"] == name))
            .map(|q| q["messages"].clone())
    };
    assert_eq!(
        queue("deferred"),
        Some(20.into()),
        "{}",
        describe(&args, &out)
    );
    assert_eq!(queue("hold"), Some(0.into()));
    // Issue 40: every point has the reading that ended it, none missing mid-run (a
    // reading at the injection's end let the next tick's go), and the run's end is a
    // point of its own only when it is no sliver.
    let series = r["series"].as_array().expect("a series");
    let missing: Vec<f64> = series
        .iter()
        .filter(|p| p["queue_states"].is_null())
        .filter_map(|p| p["t_s"].as_f64())
        .collect();
    assert!(
        missing.is_empty(),
        "points without queue states at {missing:?} s: {series:?}"
    );
    let last = series.last().expect("a series point");
    assert_eq!(
        last["queue_states"],
        serde_json::json!([
            {"queue": "incoming", "messages": 0},
            {"queue": "active", "messages": 0},
            {"queue": "deferred", "messages": 20},
            {"queue": "hold", "messages": 0},
        ]),
        "the last interval read, all deferred"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let each: Vec<String> = most
        .as_array()
        .expect("queue states")
        .iter()
        .map(|q| {
            format!(
                "{} {}",
                q["queue"].as_str().unwrap_or_default(),
                q["messages"]
            )
        })
        .collect();
    let line = format!(
        "MTA queues most messages at an interval's end: {}",
        each.join("  ")
    );
    assert!(text.contains(&line), "expected {line:?} in:\n{text}");
    let h = html.to_string_lossy().to_string();
    let rep = ["report", &j, "-o", &h];
    let out = run(&rep);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&rep, &out));
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(
        page.contains("\"id\":\"queue_states\""),
        "the queue chart is in the page"
    );
}
