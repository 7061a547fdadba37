//! `mailbench relay --lab postfix`: real Postfix between the generator and the sink.

use crate::util::{TempDir, Terminated, describe, leftovers, require, results, run};

use crate::util::lab_relay as relay;

/// Every accepted message delivered once, Postfix's log agreeing, every figure present.
pub(crate) fn assert_exactly_once(r: &serde_json::Value, n: u64) {
    let s = &r["summary"];
    assert_eq!(s["accepted"], n, "{s:#}");
    assert_eq!(s["delivered"], n, "{s:#}");
    assert_eq!(s["lost"], 0, "{s:#}");
    assert_eq!(s["duplicates"], 0, "{s:#}");
    assert_eq!(s["maillog_sent"], n, "Postfix's log must agree: {s:#}");
    for key in [
        "inject_mpm",
        "drain_mpm",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "max_backlog",
        "errors",
        "sent",
    ] {
        assert!(s.get(key).is_some(), "summary lacks {key}");
    }
}

#[test]
fn two_thousand_messages_through_a_lab_postfix_arrive_once_and_nothing_is_left() {
    let dir = TempDir::new("relay-lab");
    let csv = dir.0.join("r.csv");
    let csv_arg = csv.to_string_lossy().to_string();
    let Some(r) = relay(
        &["-n", "2000", "--size", "4k", "--csv", &csv_arg],
        &dir.0.join("r.json"),
    ) else {
        return;
    };
    assert_exactly_once(&r, 2000);
    crate::util::assert_threshold_keys(
        &r,
        &mailbench::relay::THRESHOLDS,
        &crate::util::relay_keys_but(&[]),
    );
    let csv = std::fs::read_to_string(&csv).expect("the CSV is written");
    let header = csv.lines().next().unwrap_or_default();
    assert!(
        header.contains(",delivered,backlog,") && header.contains(",sut_cpu_user_pct,"),
        "relay CSV columns: {header}"
    );
    let delivered: u64 = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(13)?.parse::<u64>().ok())
        .sum();
    assert_eq!(
        delivered, 2000,
        "the CSV's delivered column adds up:\n{csv}"
    );
    assert_eq!(
        r["config"]["targets"],
        serde_json::json!([r["config"]["target"].clone()]),
        "the results name the lab's entry as the one target"
    );
    assert!(
        r["extra"]["sut"]["cpu_avg_pct"]
            .as_f64()
            .is_some_and(|c| c > 0.0),
        "MTA CPU observed"
    );
    assert!(
        r["series"][0].get("backlog").is_some(),
        "backlog per interval"
    );
    assert!(
        dir.0.join("r.maillog.0").exists(),
        "the MTA's log is kept with the results"
    );
    let left = leftovers(&r);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn deferred_recipients_arrive_exactly_once_after_postfix_retries() {
    let dir = TempDir::new("relay-defer");
    let args = [
        "-n",
        "400",
        "--size",
        "2k",
        "--sink-rule",
        "rcpt:451:25%",
        "--queue",
        "disk",
        // A recipient deferred again at every retry (0.25^k of 400) can take several retries
        // of up to 10 s each; the exact-once check must not be cut short by the drain.
        "--drain-timeout",
        "300s",
    ];
    let Some(r) = relay(&args, &dir.0.join("r.json")) else {
        return;
    };
    assert_exactly_once(&r, 400);
    let deferred = r["extra"]["sink"]["faults"]["reply_4xx"]
        .as_u64()
        .expect("fault count");
    // 25 % of 400 first attempts is 100 (σ ≈ 9), and the retries add more.
    assert!(deferred > 60, "the sink deferred about 25 %: {deferred}");
}

#[test]
fn two_hops_relay_everything() {
    let dir = TempDir::new("relay-hops");
    let Some(r) = relay(
        &["-n", "500", "--hops", "2", "-c", "16"],
        &dir.0.join("r.json"),
    ) else {
        return;
    };
    assert_exactly_once(&r, 500);
    assert!(
        dir.0.join("r.maillog.1").exists(),
        "both hops' logs are kept"
    );
}

#[test]
fn a_concurrency_sweep_runs_each_level_on_one_lab() {
    let dir = TempDir::new("relay-sweep");
    let Some(r) = relay(
        &["-n", "200", "-c", "2,8", "--size", "2k"],
        &dir.0.join("r.json"),
    ) else {
        return;
    };
    let rows = r["extra"]["sweep"].as_array().expect("sweep rows");
    assert_eq!(rows.len(), 2);
    for (row, c) in rows.iter().zip([2, 8]) {
        assert_eq!(row["concurrency"], c);
        assert_eq!(row["delivered"], 200, "{row:#}");
        assert_eq!(row["lost"], 0);
    }
    assert_eq!(
        r["summary"]["maillog_sent"], 200,
        "the log is counted per level"
    );
}

#[test]
fn find_max_reports_a_sustainable_rate_with_its_evidence() {
    let dir = TempDir::new("relay-findmax");
    let args = [
        "--find-max",
        "--step",
        "2s",
        "--start-rate",
        "100/s",
        "-c",
        "16",
        "--size",
        "2k",
    ];
    let Some(r) = relay(&args, &dir.0.join("r.json")) else {
        return;
    };
    let steps = r["extra"]["find_max"].as_array().expect("steps");
    assert!(steps.len() >= 2, "{steps:#?}");
    let best = r["summary"]["max_sustainable_per_sec"]
        .as_f64()
        .expect("max rate");
    assert!(
        best >= 100.0,
        "a lab Postfix sustains 100/s of 2 KiB messages: {steps:#?}"
    );
    assert!(
        steps.iter().any(|s| s["sustained"] == false) || steps.len() >= 8,
        "the search goes until the MTA falls behind (or its step budget): {steps:#?}"
    );
    let sustained_max = steps
        .iter()
        .filter(|s| s["sustained"] == true)
        .filter_map(|s| s["rate_per_sec"].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(best, sustained_max);
}

#[test]
fn sigterm_mid_run_still_drains_writes_results_and_removes_the_lab() {
    if require("postfix").is_none() {
        return;
    }
    let dir = TempDir::new("relay-term");
    let json = dir.0.join("r.json");
    let mut relay = Terminated(
        crate::util::mailbench()
            .args([
                "relay", "--lab", "postfix", "--rate", "100/s", "-z", "60s", "--size", "2k", "-q",
                "--json",
            ])
            .arg(&json)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    // Long enough for the lab to start and some mail to flow.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_eq!(
        relay.stop(),
        Some(2),
        "a stopped relay exits 2 (issue 25 item 15)"
    );
    let r = results(&json);
    let s = &r["summary"];
    let accepted = s["accepted"].as_u64().expect("accepted");
    assert!(
        accepted > 0,
        "some mail was accepted before the stop: {s:#}"
    );
    assert_eq!(
        s["delivered"], accepted,
        "what was accepted before the stop is still drained: {s:#}"
    );
    assert_eq!(s["lost"], 0, "{s:#}");
    let left = leftovers(&r);
    assert!(left.is_empty(), "left behind after SIGTERM: {left:?}");
}

#[test]
fn the_lab_refuses_a_user_who_is_not_root_with_the_fix() {
    if require("postfix").is_none() {
        return;
    }
    // As root, run a copy of the binary as nobody (the build directory may be closed to it).
    let dir = TempDir::new("relay-nonroot");
    let bin = dir.0.join("mailbench");
    std::fs::copy(env!("CARGO_BIN_EXE_mailbench"), &bin).expect("copy the binary");
    for mta in ["postfix", "exim", "opensmtpd", "sendmail"] {
        let args = ["relay", "--lab", mta, "-n", "1"];
        let out = if is_root() {
            std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin)
                .args(args)
                .output()
                .expect("run setpriv")
        } else {
            run(&args)
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
        assert_eq!(err.lines().count(), 1, "{mta}: one error line, got: {err}");
        assert!(
            err.contains("must run as root") && err.contains("sudo"),
            "{mta}: names the cause and the fix: {err}"
        );
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

#[test]
fn a_postconf_value_postfix_refuses_is_one_line_exit_1_and_leaves_nothing() {
    if require("postfix").is_none() {
        return;
    }
    let child = crate::util::mailbench()
        .args([
            "relay",
            "--lab",
            "postfix",
            "--postconf",
            "default_process_limit=abc",
            "-n",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one error line, got: {err}");
    assert!(
        err.contains("--mta-conf default_process_limit") && err.contains("bad numerical"),
        "names the setting and Postfix's reason: {err}"
    );
    let prefix = format!("mailbench-lab-{pid}-");
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .expect("temp dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "lab directories left behind: {left:?}");
}

#[test]
fn a_lab_relays_to_a_sink_on_ipv6_loopback() {
    let port = match std::net::TcpListener::bind("[::1]:0") {
        Ok(l) => l.local_addr().expect("addr").port(),
        Err(e) => {
            eprintln!("SKIP: no IPv6 loopback here ({e})");
            return;
        }
    };
    let dir = TempDir::new("relay-v6");
    let sink = format!("[::1]:{port}");
    let Some(r) = relay(
        &["-n", "100", "-c", "4", "--size", "2k", "--sink", &sink],
        &dir.0.join("r.json"),
    ) else {
        return;
    };
    assert_exactly_once(&r, 100);
}

#[test]
fn injection_over_starttls_into_the_lab() {
    let dir = TempDir::new("relay-tls");
    let Some(r) = relay(
        &["-n", "200", "-c", "4", "--size", "2k", "--tls", "starttls"],
        &dir.0.join("r.json"),
    ) else {
        return;
    };
    assert_exactly_once(&r, 200);
    let c = &r["counters"];
    assert!(
        c["connections"].as_u64().is_some_and(|n| n > 0)
            && c["tls_connections"] == c["connections"],
        "every injection connection used TLS: {c:#}"
    );
}

/// Runs a lab relay with stderr captured (progress lines); returns results and stderr.
fn relay_verbose(args: &[&str], json: &std::path::Path) -> Option<(serde_json::Value, String)> {
    require("postfix")?;
    let j = json.to_string_lossy().to_string();
    let all = [&["relay", "--lab", "postfix", "--json", &j][..], args].concat();
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&all, &out));
    Some((
        results(json),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn issue_9_6_26_a_reply_the_mta_gave_up_on_is_no_delivery_and_the_drain_waits_for_the_queue() {
    // 10 % of the sink's final replies come after 3 s; Postfix gives up after 1 s, defers
    // the message and sends it again. Those first copies must not count as delivered.
    let dir = TempDir::new("relay-timeout");
    let args = [
        "-n",
        "300",
        "--rate",
        "150/s",
        "-c",
        "16",
        "--size",
        "2k",
        "--sink-rule",
        "data_end:delay=3s:10%",
        "--postconf",
        "smtp_data_done_timeout=1s",
    ];
    let Some((r, stderr)) = relay_verbose(&args, &dir.0.join("r.json")) else {
        return;
    };
    assert_exactly_once(&r, 300);
    let s = &r["summary"];
    assert_eq!(s["queued_left"], 0, "{s:#}");
    assert_eq!(s["drained"], true, "{s:#}");
    let unconfirmed = r["extra"]["sink"]["unconfirmed"].as_u64().expect("count");
    assert!(unconfirmed >= 5, "about 30 replies came too late: {s:#}");
    assert!(
        s["e2e_p99_ms"].as_f64().is_some_and(|p| p >= 3000.0),
        "the retried messages took seconds: {s:#}"
    );
    // While it runs (2 s of injection at 150/s): deliveries and backlog beside injection,
    // then the drain's progress.
    assert!(
        stderr.contains(" delivered ") && stderr.contains(" backlog "),
        "{stderr}"
    );
    assert!(stderr.contains("draining: delivered"), "{stderr}");
    // Issue 9.5: the series carries end to end per interval.
    let series = r["series"].as_array().expect("series");
    assert!(
        series.iter().any(|p| p["e2e_p99_ms"].as_f64() > Some(0.0)),
        "{series:#?}"
    );
}

#[test]
fn issue_9_7_the_mtas_bounces_are_not_deliveries_and_not_losses() {
    // One recipient in ten asks the sink for a permanent refusal: Postfix bounces those
    // messages to the sender, through the same sink.
    let dir = TempDir::new("relay-bounce");
    let list = dir.0.join("rcpts.txt");
    let mut text = String::from("permfail@example.com\n");
    for i in 1..10 {
        text += &format!("user{i}@example.com\n");
    }
    std::fs::write(&list, text).expect("recipient list");
    let l = list.to_string_lossy().to_string();
    let args = ["-n", "1000", "--size", "2k", "--recipients", &l];
    let Some(r) = relay(&args, &dir.0.join("r.json")) else {
        return;
    };
    let s = &r["summary"];
    assert_eq!(s["expected_recipients"], 1000, "{s:#}");
    assert_eq!(s["delivered"], 900, "{s:#}");
    assert_eq!(s["delivered_messages"], 900, "{s:#}");
    assert_eq!(s["bounced"], 100, "{s:#}");
    assert_eq!(s["bounces"], 100, "{s:#}");
    assert_eq!(s["lost"], 0, "{s:#}");
    assert_eq!(s["drained"], true, "{s:#}");
    assert!(
        s["drain_s"].as_f64() < Some(60.0),
        "the drain ends when the queue is empty, not at the timeout: {s:#}"
    );
}

#[test]
fn issue_9_11_find_max_stays_below_a_known_delivery_capacity() {
    // Two delivery connections at 20 ms a message: Postfix cannot deliver 100/s.
    let dir = TempDir::new("relay-cap");
    let args = [
        "--find-max",
        "--step",
        "4s",
        "--interval",
        "500ms",
        "--start-rate",
        "25/s",
        "-c",
        "16",
        "--size",
        "2k",
        "--sink-rule",
        "data_end:delay=20ms",
        "--postconf",
        "smtp_destination_concurrency_limit=2",
        "--postconf",
        "default_destination_concurrency_limit=2",
    ];
    let Some(r) = relay(&args, &dir.0.join("r.json")) else {
        return;
    };
    let steps = r["extra"]["find_max"].as_array().expect("steps");
    crate::util::assert_threshold_keys(
        &r,
        &mailbench::relay::THRESHOLDS,
        &crate::util::relay_keys_but(&["max_sustainable_per_sec", "max_sustainable_mpm"]),
    );
    let best = r["summary"]["max_sustainable_per_sec"]
        .as_f64()
        .expect("max rate");
    assert!(
        (50.0..100.0).contains(&best),
        "the maximum must stay under the 100/s capacity: {best}/s\n{steps:#?}"
    );
}

#[test]
fn issue_9_17_a_misspelt_postconf_key_is_refused() {
    if require("postfix").is_none() {
        return;
    }
    let args = [
        "relay",
        "--lab",
        "postfix",
        "--postconf",
        "default_proces_limit=100",
        "-n",
        "1",
    ];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--mta-conf default_proces_limit") && err.contains("no such parameter"),
        "{err}"
    );
}
