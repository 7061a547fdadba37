//! Issue 13, the relay benchmark's second round, against a real Postfix and `mailbench
//! sink`: a flush whose drain starts only at the release, a warm-up kept out of the
//! counts, DKIM signatures that verify with their key and fail with another (checked at
//! the sink, through Postfix too), several reply texts of one code, and the queue device's
//! IOPS while Postfix writes its queue to disk.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sink::Sink;
use crate::util::{TempDir, describe, require, results, run};

use crate::util::lab_relay as relay;

/// An Ed25519 and an RSA-2048 key pair made with openssl: (private, public) paths.
fn keys(dir: &Path) -> [(PathBuf, PathBuf); 2] {
    let openssl = require("openssl").expect("openssl is installed with the test deps");
    ["ed25519", "rsa"].map(|alg| {
        let key = dir.join(format!("{alg}.pem"));
        let public = dir.join(format!("{alg}.pub"));
        let mut genpkey = Command::new(&openssl);
        genpkey
            .args(["genpkey", "-algorithm", alg, "-out"])
            .arg(&key);
        if alg == "rsa" {
            genpkey.args(["-pkeyopt", "rsa_keygen_bits:2048"]);
        }
        genpkey.stderr(std::process::Stdio::null());
        assert!(genpkey.status().expect("openssl genpkey").success());
        let pubout = Command::new(&openssl)
            .args(["pkey", "-pubout", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .status()
            .expect("openssl pkey");
        assert!(pubout.success());
        (key, public)
    })
}

fn s(p: &Path) -> String {
    p.to_string_lossy().to_string()
}

#[test]
fn a_flush_delivers_nothing_before_the_release_and_times_the_drain_from_it() {
    let dir = TempDir::new("flush");
    let json = dir.0.join("r.json");
    let Some(r) = relay(
        &[
            "--flush",
            "-n",
            "500",
            "-c",
            "8",
            "--size",
            "2k",
            "--interval",
            "200ms",
        ],
        &json,
    ) else {
        return;
    };
    let (sum, flush) = (&r["summary"], &r["extra"]["flush"]);
    assert_eq!(sum["accepted"], 500, "{sum:#}");
    assert_eq!(sum["delivered"], 500, "{sum:#}");
    assert_eq!(sum["maillog_sent"], 500, "{sum:#}");
    assert_eq!(
        flush["held"], 500,
        "every accepted message was held: {flush:#}"
    );
    assert_eq!(flush["released"], 500, "{flush:#}");
    assert_eq!(flush["arrived_before_release"], 0, "{flush:#}");
    let release = flush["release_at_s"].as_f64().expect("release_at_s");
    let first = flush["first_arrival_s"].as_f64().expect("first_arrival_s");
    assert!(
        first >= release,
        "first arrival {first} s before the release at {release} s"
    );
    assert_eq!(sum["release_at_s"].as_f64(), Some(release));
    // A flush's summary names every key --threshold may, its own two included.
    crate::util::assert_threshold_keys(
        &r,
        &mailbench::relay::THRESHOLDS,
        &crate::util::relay_keys_but(&["flush_held", "release_at_s"]),
    );
    // The drain counts from the release: it ends at the last arrival.
    let drain_s = sum["drain_s"].as_f64().expect("drain_s");
    let last = release + drain_s;
    let series = r["series"].as_array().expect("series");
    // Deliveries are bucketed on the 200 ms grid from the first injection (the last
    // injection point's own t_s ends early, at the end of injection): every bucket that
    // ends by the release is empty.
    let delivered_before: u64 = series
        .iter()
        .enumerate()
        .filter(|(i, _)| (*i + 1) as f64 * 0.2 <= release)
        .map(|(_, p)| p["delivered"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        delivered_before, 0,
        "no interval ending by the release delivered"
    );
    assert!(
        last <= series.len() as f64 * 0.2 + 0.2,
        "last arrival {last} s is within the series"
    );
    let mpm = sum["drain_mpm"].as_f64().expect("drain_mpm");
    assert!(
        (mpm - 500.0 / drain_s * 60.0).abs() < 1e-6 * mpm.max(1.0),
        "drain MPM {mpm} is 500 over the drain from the release ({drain_s} s)"
    );
    // The queue was on tmpfs: no device to watch, and the results say why.
    let note = r["extra"]["sut"]["queue_device_note"]
        .as_str()
        .unwrap_or("");
    assert!(note.contains("RAM disk"), "queue_device_note: {note:?}");
}

#[test]
fn a_warm_up_is_kept_out_and_one_code_keeps_its_distinct_replies_and_disk_iops_show() {
    let dir = TempDir::new("warm");
    let json = dir.0.join("r.json");
    // r0 and r1 are refused with one code and two texts; r2 is relayed.
    let access = "smtpd_recipient_restrictions=check_recipient_access inline:{ {r0@example.com=550 5.2.2 mailbox full}, {r1@example.com=550 5.1.1 no such user} }";
    let Some(r) = relay(
        &[
            "--queue",
            "disk",
            "--warmup",
            "1s",
            "--rate",
            "300/s",
            "-n",
            "300",
            "-c",
            "8",
            "--size",
            "2k",
            "--to",
            "r{mod:3}@example.com",
            "--postconf",
            access,
        ],
        &json,
    ) else {
        return;
    };
    let sum = &r["summary"];
    // Only the measured 300 count; a third of them is relayed.
    assert_eq!(sum["sent"], 300, "{sum:#}");
    assert_eq!(sum["accepted"], 100, "{sum:#}");
    assert_eq!(sum["delivered"], 100, "{sum:#}");
    assert_eq!(
        sum["maillog_sent"], 100,
        "Postfix's log of the measured run: {sum:#}"
    );
    let w = &r["extra"]["warmup"];
    let warm_sent = w["counters"]["sent"].as_u64().expect("warm-up sent");
    assert!(
        (240..=360).contains(&warm_sent),
        "1 s at 300/s is about 300 messages, got {warm_sent}"
    );
    assert_eq!(
        w["summary"]["delivered"], w["counters"]["accepted"],
        "the warm-up drained before the measured run: {w:#}"
    );
    // One error row, two distinct reasons.
    let errors = r["errors"].as_array().expect("errors");
    let row = errors
        .iter()
        .find(|e| e["code"] == 550 && e["phase"] == "rcpt")
        .unwrap_or_else(|| panic!("no 550 rcpt row in {errors:#?}"));
    assert_eq!(row["count"], 200, "{row:#}");
    let texts: Vec<&str> = row["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("mailbox full"))
            && texts.iter().any(|t| t.contains("no such user")),
        "both reasons of 550 kept: {texts:?}"
    );
    // The queue on disk: Postfix's writes show on its device.
    let sut = &r["extra"]["sut"];
    assert!(
        sut["queue_device"].as_str().is_some_and(|d| !d.is_empty()),
        "a disk queue has a device: {sut:#}"
    );
    assert!(
        sut["device_write_iops"].as_f64().unwrap_or(0.0) > 0.0,
        "Postfix wrote its queue files: {sut:#}"
    );
    let moved = r["series"]
        .as_array()
        .expect("series")
        .iter()
        .filter_map(|p| p["sut"]["device_write_iops"].as_f64())
        .any(|v| v > 0.0);
    assert!(moved, "some interval shows device writes");
}

#[test]
fn dkim_signatures_verify_at_the_sink_with_their_key_and_fail_with_another() {
    let dir = TempDir::new("dkim");
    let [(ed, ed_pub), (rsa, _)] = keys(&dir.0);
    let json = dir.0.join("sink.json");
    let sink = Sink::start(&["--dkim-verify", &s(&ed_pub), "--json", &s(&json)]);
    let send_json = dir.0.join("send.json");
    let target = sink.target();
    let signed = [
        "send",
        &target,
        "-n",
        "100",
        "-c",
        "4",
        "--size",
        "5k",
        "--warmup",
        "300ms",
        "--rate",
        "200/s",
        "--dkim-key",
        &s(&ed),
        "--dkim-domain",
        "example.org",
        "-q",
        "--json",
        &s(&send_json),
    ];
    let out = run(&signed);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&signed, &out));
    let wrong = [
        "send",
        &target,
        "-n",
        "30",
        "-c",
        "2",
        "--dkim-key",
        &s(&rsa),
        "--dkim-domain",
        "example.org",
        "-q",
    ];
    let out = run(&wrong);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&wrong, &out));
    let (code, _) = sink.stop();
    assert_eq!(code, Some(0));
    let sent = results(&send_json);
    assert_eq!(sent["counters"]["sent"], 100);
    let warm = sent["extra"]["warmup"]["counters"]["sent"]
        .as_u64()
        .expect("warm-up");
    assert!(warm > 0, "the warm-up sent something");
    let d = &sent["extra"]["dkim"];
    assert_eq!(d["algorithm"], "ed25519-sha256");
    assert_eq!(
        d["signed"], 100,
        "only the measured run's signatures count: {d:#}"
    );
    assert!(d["sign_cpu_us_mean"].as_f64().unwrap_or(0.0) > 0.0, "{d:#}");
    let sunk = results(&json);
    let v = &sunk["extra"]["dkim_verify"];
    assert_eq!(
        v["pass"].as_u64(),
        Some(100 + warm),
        "every Ed25519 message (warm-up included) verifies: {v:#}"
    );
    assert_eq!(
        v["fail"], 30,
        "every RSA message fails against the Ed25519 key: {v:#}"
    );
    assert_eq!(v["unsigned"], 0, "{v:#}");
}

#[test]
fn rsa_signatures_survive_the_lab_postfix_and_verify_at_the_embedded_sink() {
    let dir = TempDir::new("dkim-relay");
    let [_, (rsa, rsa_pub)] = keys(&dir.0);
    let json = dir.0.join("r.json");
    let Some(r) = relay(
        &[
            "-n",
            "100",
            "-c",
            "4",
            "--size",
            "10k",
            "--dkim-key",
            &s(&rsa),
            "--dkim-domain",
            "example.org",
            "--dkim-verify",
            &s(&rsa_pub),
        ],
        &json,
    ) else {
        return;
    };
    assert_eq!(r["summary"]["delivered"], 100);
    assert_eq!(r["extra"]["dkim"]["algorithm"], "rsa-sha256");
    assert_eq!(r["extra"]["dkim"]["signed"], 100);
    let v = &r["extra"]["dkim_verify"];
    assert_eq!(
        (v["pass"].as_u64(), v["fail"].as_u64()),
        (Some(100), Some(0)),
        "{v:#}"
    );
}

#[test]
fn the_lab_postfix_signs_through_opendkim_and_the_sink_verifies_every_message() {
    let dir = TempDir::new("mta-dkim");
    let [_, (rsa, rsa_pub)] = keys(&dir.0);
    let json = dir.0.join("r.json");
    let Some(r) = relay(
        &[
            "-n",
            "200",
            "-c",
            "8",
            "--size",
            "5k",
            "--mta-dkim-key",
            &s(&rsa),
            "--dkim-verify",
            &s(&rsa_pub),
        ],
        &json,
    ) else {
        return;
    };
    assert_eq!(r["summary"]["delivered"], 200, "{:#}", r["summary"]);
    assert!(
        r["extra"].get("dkim").is_none(),
        "the generator did not sign"
    );
    let v = &r["extra"]["dkim_verify"];
    assert_eq!(
        (
            v["pass"].as_u64(),
            v["fail"].as_u64(),
            v["unsigned"].as_u64()
        ),
        (Some(200), Some(0), Some(0)),
        "every message signed by the MTA's OpenDKIM: {v:#}"
    );
    // OpenDKIM's process ran from the lab's directory: none may be left.
    let left = crate::util::leftovers(&r);
    assert!(left.is_empty(), "the lab left {left:?}");
}
