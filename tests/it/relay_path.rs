//! `mailbench send` → a real Postfix (smtpd, queue, smtp client) → `mailbench sink`:
//! Postfix's smtpd as a target for `send`, and Postfix's SMTP client delivering to `sink`.
//! The Postfix is the library's own lab, so the lab is tested here as a library too.

use std::time::Duration;

use mailbench::lab::QueueKind;

use crate::sink::Sink;
use crate::util::{TempDir, Terminated, postfix_to_sink, require, results, run_expect, wait_until};

#[test]
fn postfix_relays_every_message_from_send_to_sink_exactly_once() {
    if require("postfix").is_none() {
        return;
    }
    let dir = TempDir::new("relay-path");
    let json = dir.0.join("sink.json");
    let sink = Sink::start(&["--json", &json.to_string_lossy()]);
    let lab = postfix_to_sink(sink.port, QueueKind::Disk);
    let target = lab.entry().to_string();
    let send_json = dir.0.join("send.json");
    run_expect(
        &[
            "send",
            &target,
            "-n",
            "300",
            "-c",
            "8",
            "--rcpts",
            "2",
            "--to",
            "r{rcpt}.{seq}@example.test",
            "--size",
            "2k",
            "--json",
            &send_json.to_string_lossy(),
            "-q",
        ],
        0,
    );
    let sent = results(&send_json);
    assert_eq!(
        sent["summary"]["accepted"], 300,
        "Postfix smtpd accepted all: {:#}",
        sent["summary"]
    );
    assert!(
        wait_until(Duration::from_secs(60), || lab.delivered_logged() >= 600),
        "Postfix delivered {} of 600 recipients",
        lab.delivered_logged()
    );
    let (code, _) = sink.stop();
    assert_eq!(code, Some(0));
    let r = results(&json);
    assert_eq!(r["summary"]["recipients"], 600, "{:#}", r["summary"]);
    assert_eq!(r["summary"]["duplicates"], 0);
    assert_eq!(r["summary"]["lost"], 0);
    assert_eq!(lab.delivered_logged(), 600, "maillog agrees with the sink");
    let dirs = lab.dirs();
    drop(lab);
    assert!(
        dirs.iter().all(|d| !d.exists()),
        "the lab removes its directories"
    );
}

#[test]
fn the_lab_command_serves_verified_starttls_until_sigterm_then_removes_itself() {
    use std::io::{BufRead, BufReader};
    if require("postfix").is_none() {
        return;
    }
    let sink = Sink::start(&[]);
    let relay = format!("127.0.0.1:{}", sink.port);
    let mut lab = Terminated(
        crate::util::mailbench()
            .args(["lab", "postfix", "--starttls", "--relay", &relay])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn lab"),
    );
    let stdout = lab.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let (mut entry, mut cert, mut config) = (None, None, None);
    for line in lines.by_ref() {
        let line = line.expect("read the lab's output");
        let after = |key: &str| {
            line.split_once(key)
                .map(|(_, rest)| rest.split([',', ';', ' ']).next().unwrap_or("").to_string())
        };
        if line.starts_with("postfix 0:") {
            config = after("config ");
        }
        if line.contains("STARTTLS certificate") {
            cert = after("certificate ");
        }
        if line.starts_with("relaying to") {
            entry = after("inject into ");
            break;
        }
    }
    let (entry, cert, config) = (
        entry.expect("the lab names its entry"),
        cert.expect("the lab names its certificate"),
        config.expect("the lab names its config directory"),
    );
    // The certificate verifies against the entry address (no trust-anything fallback).
    let out = run_expect(
        &[
            "send", &entry, "-n", "20", "-c", "1", "--tls", "starttls", "--tls-ca", &cert, "-q",
        ],
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("accepted 20") && text.contains("(TLS 1)"),
        "20 messages over one verified TLS connection: {text}"
    );
    let status = lab.stop();
    assert_eq!(status, Some(0), "the lab stops cleanly on SIGTERM");
    assert!(
        !std::path::Path::new(&config).exists(),
        "the lab removed {config}"
    );
    drop(sink);
}
