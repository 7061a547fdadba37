//! `mailbench send` against Postfix's smtp-sink.

use std::path::Path;
use std::time::Duration;

use crate::util::{TempDir, describe, results, run, run_expect, smtp_sink, wait_until};

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// Whether a run's results carry the note that it was too short to show a server's full
/// performance.
fn short_run_noted(r: &serde_json::Value) -> bool {
    r["extra"]["notes"].as_array().is_some_and(|n| {
        n.iter().any(|n| {
            n.as_str()
                .is_some_and(|n| n.contains("the measured load lasted"))
        })
    })
}

#[test]
fn exactly_n_messages_arrive_and_their_bytes_are_intact() {
    let dump = TempDir::new("dump");
    let template = format!("{}/%Y%m%d%H%M%S.", dump.0.display());
    let Some((_sink, port)) = smtp_sink(&["-d", &template]) else {
        return;
    };
    let target = format!("127.0.0.1:{port}");
    let json = dump.0.join("results.json");
    let body = dump.0.join("body.eml");
    std::fs::write(
        &body,
        "Subject: dots\n\n.starts with a dot\n..two dots\nbare LF line\n.\nend\n",
    )
    .expect("write body");
    let json_s = json.to_string_lossy().to_string();
    let body_s = body.to_string_lossy().to_string();
    let args = [
        "send", &target, "-n", "300", "-c", "8", "--body", &body_s, "--json", &json_s, "-q",
    ];
    run_expect(&args, 0);
    let r = results(&json);
    assert_eq!(r["summary"]["sent"], 300, "{r:#}");
    assert_eq!(r["summary"]["accepted"], 300);
    assert_eq!(r["summary"]["errors"], 0);
    assert!(
        short_run_noted(&r),
        "a whole run of a few seconds carries the short-run note: {:#}",
        r["extra"]
    );
    // smtp-sink writes one file per transaction; the results file, body and dumps share the dir.
    assert!(
        wait_until(Duration::from_secs(5), || count_files(&dump.0) == 300 + 2),
        "expected 300 dumped messages, found {}",
        count_files(&dump.0) - 2
    );
    // Every dump holds the message exactly as sent (unstuffed, CRLF), after the trace prefix.
    let mut checked = 0;
    for entry in std::fs::read_dir(&dump.0).expect("dump dir") {
        let p = entry.expect("entry").path();
        if p == json || p == body {
            continue;
        }
        let text = std::fs::read(&p).expect("dump");
        let text = String::from_utf8_lossy(&text);
        // smtp-sink stores lines with LF endings; the lines themselves must be intact, so
        // dot-stuffing was undone exactly.
        let want = "Subject: dots\n\n.starts with a dot\n..two dots\nbare LF line\n.\nend\n";
        assert!(
            text.contains(want),
            "dump {} lacks the exact body:\n{text}",
            p.display()
        );
        assert!(
            text.contains("X-Mailbench-Trace: run="),
            "no trace header in {text}"
        );
        checked += 1;
    }
    assert_eq!(checked, 300);
}

#[test]
fn closed_loop_with_reuse_pipelining_and_several_recipients() {
    let Some((_sink, port)) = smtp_sink(&[]) else {
        return;
    };
    let dir = TempDir::new("reuse");
    let json = dir.0.join("r.json").to_string_lossy().to_string();
    let target = format!("127.0.0.1:{port}");
    for per_conn in ["0", "1", "3-7"] {
        let args = [
            "send",
            &target,
            "-n",
            "2000",
            "-c",
            "16",
            "--per-conn",
            per_conn,
            "--rcpts",
            "3",
            "--to",
            "u{seq}.{rcpt}@d{mod:50}.example.test",
            "--size",
            "0-10k",
            "--json",
            &json,
            "-q",
        ];
        run_expect(&args, 0);
        let r = results(Path::new(&json));
        assert_eq!(r["summary"]["accepted"], 2000, "per-conn {per_conn}: {r:#}");
        assert_eq!(r["counters"]["rcpts_accepted"], 6000);
        let conns = r["counters"]["connections"].as_u64().expect("connections");
        match per_conn {
            "0" => assert_eq!(conns, 16),
            "1" => assert_eq!(conns, 2000),
            _ => assert!(
                (2000 / 7..=2000 / 3 + 16).contains(&conns),
                "connections {conns}"
            ),
        }
        for key in [
            "schema_version",
            "config",
            "environment",
            "series",
            "latency",
            "self",
        ] {
            assert!(r.get(key).is_some(), "results lack {key}");
        }
        assert!(r["latency"]["total"]["count"].as_u64() == Some(2000));
        assert!(
            !r["latency"]["total"]["buckets"]
                .as_array()
                .expect("buckets")
                .is_empty()
        );
    }
}

#[test]
fn open_loop_rate_is_accurate_within_one_percent() {
    let Some((_sink, port)) = smtp_sink(&[]) else {
        return;
    };
    let dir = TempDir::new("rate");
    let json = dir.0.join("r.json").to_string_lossy().to_string();
    let csv = dir.0.join("r.csv").to_string_lossy().to_string();
    let target = format!("127.0.0.1:{port}");
    let args = [
        "send",
        &target,
        "--rate",
        "400/s",
        "-z",
        "5s",
        "-c",
        "32",
        "--json",
        &json,
        "--csv",
        &csv,
        "--interval",
        "1s",
        "-q",
    ];
    run_expect(&args, 0);
    let r = results(Path::new(&json));
    let accepted = r["summary"]["accepted"].as_f64().expect("accepted");
    assert!(
        (accepted - 2000.0).abs() <= 20.0,
        "accepted {accepted}, expected 2000 ± 1 %"
    );
    let rate = r["summary"]["msgs_per_sec"].as_f64().expect("rate");
    assert!(
        (rate - 400.0).abs() <= 4.0,
        "rate {rate}/s, expected 400 ± 1 %"
    );
    let lag_p99 = r["latency"]["lag"]["p99_us"]
        .as_u64()
        .expect("lag recorded");
    assert!(lag_p99 < 50_000, "sends started late: lag p99 {lag_p99} µs");
    let rows = std::fs::read_to_string(&csv).expect("csv").lines().count();
    assert!(
        (5..=8).contains(&rows),
        "expected ~5 interval rows, got {rows}"
    );
}

#[test]
fn a_breached_threshold_exits_3_and_a_held_one_exits_0() {
    let Some((_sink, port)) = smtp_sink(&[]) else {
        return;
    };
    let target = format!("127.0.0.1:{port}");
    let out = run_expect(
        &[
            "send",
            &target,
            "-n",
            "50",
            "--threshold",
            "p50(total)<1us",
            "-q",
        ],
        3,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("BREACHED"));
    run_expect(
        &[
            "send",
            &target,
            "-n",
            "50",
            "--threshold",
            "errors<1%",
            "-q",
        ],
        0,
    );
}

#[test]
fn refusals_are_counted_not_fatal() {
    // smtp-sink rejects every RCPT with a hard error.
    let Some((_sink, port)) = smtp_sink(&["-B", "550 5.1.1 no such user", "-f", "rcpt"]) else {
        return;
    };
    let dir = TempDir::new("refuse");
    let json = dir.0.join("r.json").to_string_lossy().to_string();
    let target = format!("127.0.0.1:{port}");
    let args = [
        "send", &target, "-n", "100", "-c", "4", "--json", &json, "-q",
    ];
    let out = run(&args);
    // Every message refused: the results are written, and the run failed (exit 2).
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    let r = results(Path::new(&json));
    assert_eq!(r["summary"]["accepted"], 0, "{r:#}");
    assert_eq!(r["summary"]["rejected"], 100);
    assert!(
        !short_run_noted(&r),
        "nothing accepted: a longer run would not help, so no short-run note: {:#}",
        r["extra"]
    );
    let rows = r["errors"].as_array().expect("errors");
    assert!(
        rows.iter().any(|e| e["class"] == "rejected_5xx"
            && e["phase"] == "rcpt"
            && e["code"] == 550
            && e["count"] == 100),
        "error table: {rows:?}"
    );
}

#[test]
fn sigterm_stops_the_run_and_still_writes_results() {
    let Some((_sink, port)) = smtp_sink(&[]) else {
        return;
    };
    let dir = TempDir::new("term");
    let json = dir.0.join("r.json");
    let target = format!("127.0.0.1:{port}");
    let mut send = crate::util::Terminated(
        crate::util::mailbench()
            .args([
                "send", &target, "--rate", "100/s", "-z", "60s", "-q", "--json",
            ])
            .arg(&json)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    std::thread::sleep(Duration::from_millis(1500));
    // Issue 25 item 15: a stopped run's results are partial, and the exit code and the
    // summary say so.
    assert_eq!(
        send.stop(),
        Some(2),
        "a stopped run exits 2 (README: exit codes)"
    );
    let mut stdout = String::new();
    if let Some(mut o) = send.0.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
    }
    assert!(
        stdout.contains("interrupted by a signal after"),
        "the summary says the run was cut short:\n{stdout}"
    );
    let r = results(&json);
    let sent = r["summary"]["sent"].as_u64().expect("sent");
    assert!(
        (100..=200).contains(&sent),
        "sent {sent} in ~1.5 s at 100/s"
    );
    assert_eq!(
        r["interrupted"], true,
        "the results say the run was cut short"
    );
    assert!(
        !short_run_noted(&r),
        "the user chose to stop the run: no short-run note: {:#}",
        r["extra"]
    );
    assert_eq!(
        r["summary"]["accepted"].as_u64(),
        Some(sent - r["summary"]["aborted"].as_u64().unwrap_or(0))
    );
}

/// A server that accepts no connection (a listening socket whose process never calls
/// accept, as a server at its process limit leaves the rest) makes every session time out
/// at the banner: the error table counts them and names the likely cause under them.
#[test]
fn banner_timeouts_are_counted_and_their_cause_named() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let target = held.local_addr().expect("address").to_string();
    let dir = TempDir::new("banner-wait");
    let json = dir.0.join("r.json").to_string_lossy().to_string();
    let args = [
        "send",
        &target,
        "-n",
        "3",
        "-c",
        "3",
        "--timeout",
        "1s",
        "--json",
        &json,
        "-q",
    ];
    let out = run(&args);
    let printed = String::from_utf8_lossy(&out.stdout);
    let r = results(Path::new(&json));
    let rows = r["errors"].as_array().expect("errors");
    assert!(
        rows.iter()
            .any(|e| e["class"] == "timeout" && e["phase"] == "banner" && e["count"] == 3),
        "expected 3 timeouts at the banner: {rows:?}"
    );
    assert!(
        printed.contains(
            "the 3 banner timeouts connected and were never greeted: most often a server at its"
        ),
        "expected the cause under the error table:\n{printed}\n{}",
        describe(&args, &out)
    );
}

/// Issue 43: a server whose accept queue is full (listening, never accepting, its
/// backlog taken) lets no connection through; on loopback nothing else drops a SYN, so the
/// one line names the full queue (it said "check the address and firewall").
#[test]
fn a_full_accept_queue_is_named_as_such() {
    // A listener with a backlog of 0 whose queue four connections of its own fill; it
    // never accepts, and lives until it is killed.
    let script = r#"
import socket, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(0)
held = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(l.getsockname())
    except BlockingIOError: pass
    held.append(c)
print(l.getsockname()[1], flush=True)
time.sleep(60)
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut port)
        .expect("the listener's port");
    let target = format!("127.0.0.1:{}", port.trim());
    let args = ["send", &target, "-n", "1", "--connect-timeout", "1s", "-q"];
    let out = run(&args);
    let _ = child.kill();
    let _ = child.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let want = format!(
        "mailbench: target {target} did not accept a connection in time: its accept queue is full"
    );
    assert!(
        err.contains(&want),
        "expected {want:?}: {}",
        describe(&args, &out)
    );
    assert_eq!(err.lines().count(), 1, "{}", describe(&args, &out));
}
