//! Issue 40: the quickstart installed every lab's packages (Dovecot, OpenDKIM, slapd,
//! postal, swaks, Cyrus unpacked by install-cyrus.sh) before its first run, which needs
//! Postfix alone: 6 min 2 s on a bare machine. Now it installs Postfix first and nothing
//! else; a lab command whose server is missing names the script that installs it. The
//! quickstart runs here with `cargo` and the built binary stood in for (a build and a
//! 10,000-message run are not what is checked), every shell it starts traced.

use std::path::Path;
use std::process::Command;

use crate::util::{TempDir, describe};

/// Issue 40: on a machine with Postfix the quickstart's install step runs no installer
/// (no install-cyrus.sh, install-mtas.sh, apt-get or dpkg) and then runs `relay --lab
/// postfix` with the user's arguments.
#[test]
fn the_quickstart_installs_postfix_alone_before_its_first_run() {
    if !Path::new("/usr/sbin/postfix").exists() {
        panic!("Postfix is installed with the test deps (scripts/install-deps.sh --for-tests)");
    }
    let dir = TempDir::new("quickstart");
    let bin = dir.0.join("bin");
    let target = dir.0.join("target");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::create_dir_all(target.join("release")).expect("mkdir");
    let stub = |path: &Path, body: &str| {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write stub");
        let _ = Command::new("chmod").arg("+x").arg(path).status();
    };
    stub(&bin.join("cargo"), "exit 0");
    let said = dir.0.join("ran");
    stub(
        &target.join("release/mailbench"),
        &format!("echo \"$@\" > '{}'", said.display()),
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(root.join("scripts/quickstart.sh"))
        .args(["-n", "5"])
        .current_dir(&dir.0)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", &target)
        // Every bash the quickstart starts traces its commands on standard error.
        .env("SHELLOPTS", "xtrace")
        .output()
        .expect("run the quickstart");
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{trace}");
    assert!(
        trace.contains("install-deps.sh --postfix"),
        "Postfix's install step: {trace}"
    );
    for never in ["install-cyrus", "install-mtas", "apt-get", "dpkg"] {
        assert!(!trace.contains(never), "{never} ran:\n{trace}");
    }
    let ran = std::fs::read_to_string(&said).expect("the run started");
    assert!(
        ran.starts_with("relay --lab postfix --json results/relay-") && ran.ends_with(" -n 5\n"),
        "{ran}"
    );
}

/// A lab whose MTA is not unpacked says in one line which script installs it, exit 1.
#[test]
fn a_lab_whose_mta_is_missing_names_the_script_that_installs_it() {
    let dir = TempDir::new("no-mtas");
    let args = ["relay", "--lab", "exim", "-n", "1"];
    let out = crate::util::mailbench()
        .args(args)
        .env("MAILBENCH_MTAS", &dir.0)
        .output()
        .expect("run mailbench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("run scripts/install-mtas.sh"), "{err}");
}
