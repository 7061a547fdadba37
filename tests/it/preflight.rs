//! `mailbench doctor` and the preflight of a run, on a machine state the test makes: a low
//! open-files limit in a child shell.

use std::process::Command;

use crate::util::{TempDir, results, smtp_sink};

/// Runs mailbench under `sh` with `ulimit -n limit` first.
fn with_nofile(limit: u32, args: &str) -> std::process::Output {
    let bin = env!("CARGO_BIN_EXE_mailbench");
    Command::new("sh")
        .args(["-c", &format!("ulimit -n {limit} && exec {bin} {args}")])
        .output()
        .expect("run sh")
}

#[test]
fn doctor_warns_about_a_low_descriptor_limit_with_the_fix() {
    let low = with_nofile(256, "doctor -c 1000 --steal-over 10ms");
    let out = String::from_utf8_lossy(&low.stdout);
    assert_eq!(low.status.code(), Some(0), "warnings only:\n{out}");
    let line = out
        .lines()
        .find(|l| l.contains("open files"))
        .unwrap_or_else(|| panic!("no open-files line:\n{out}"));
    assert!(
        line.contains("WARN open files: limit 256 is below the about 1064 descriptors")
            && line.contains("fix: run `ulimit -n 65536`"),
        "expected a warning naming 256, 1064 and the fix, got: {line}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with("ok ") || l.trim_start().starts_with("WARN "))
            .count(),
        8,
        "one line per check (issue 25 added leftover labs):\n{out}"
    );
    // The same limit is enough for fewer connections.
    let fine = with_nofile(256, "doctor -c 100 --steal-over 10ms");
    let out = String::from_utf8_lossy(&fine.stdout);
    assert!(
        out.contains("ok   open files: limit 256, this run needs about 164"),
        "{out}"
    );
}

#[test]
fn a_run_prints_its_preflight_warnings_and_keeps_them_in_the_results() {
    let Some((_sink, port)) = smtp_sink(&[]) else {
        return;
    };
    let dir = TempDir::new("preflight");
    let json = dir.0.join("r.json");
    let out = with_nofile(
        200,
        &format!(
            "send 127.0.0.1:{port} -c 300 -n 20 -q --json {}",
            json.display()
        ),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("mailbench send: preflight: WARN open files: limit 200"),
        "expected the preflight line on stderr, got:\n{stderr}"
    );
    let r = results(&json);
    let kept = r["extra"]["preflight"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        kept.iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("WARN open files"))),
        "extra.preflight: {kept:?}"
    );
    assert_eq!(r["counters"]["accepted"], 20, "the run itself went on");
}
