//! Stamps the commit into `mailbench --version` (`MAILBENCH_COMMIT`): a result someone
//! sends in names the exact source that produced it. The short hash of HEAD, `-dirty`
//! when the files the binary is built from ([`BUILT_FROM`]) differ from it (an edited
//! README does not make a different binary, nor rebuild it); `unknown` when the source is not a git checkout of
//! its own (a source tarball, a crate unpacked inside a packager's repository) or git is
//! missing, unless the builder names it in `MAILBENCH_COMMIT` (an image built from a
//! context without `.git`: the Dockerfile's build argument). Never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is built from: what marks it dirty, and what reruns this script.
const BUILT_FROM: [&str; 5] = ["src", "crates", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let given = std::env::var("MAILBENCH_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = given
        .or_else(|| commit(&manifest))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MAILBENCH_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=MAILBENCH_COMMIT");
    // Rerun when the sources change (the dirty flag) or HEAD moves (a commit, a checkout);
    // naming any path turns off Cargo's default of rerunning on every package file, so an
    // edited test or script reruns nothing. A rerun recompiles this crate only (the command
    // line): the engines below are crates of their own.
    for p in BUILT_FROM {
        println!("cargo:rerun-if-changed={p}");
    }
    // HEAD's reflog grows at every commit and checkout, wherever the branch's ref is kept
    // (a loose file or packed-refs).
    let mut watched = vec!["HEAD", "packed-refs", "logs/HEAD"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    watched.extend(git(&manifest, &["symbolic-ref", "-q", "HEAD"]));
    for p in watched {
        if let Some(path) = git(&manifest, &["rev-parse", "--git-path", &p]) {
            // Only what exists: Cargo reruns the script at every build for a missing
            // path (a clone without packed-refs rebuilt the crate for every fuzz target).
            let path = manifest.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}

/// `abc1234` or `abc1234-dirty`, if `dir` is the top of a git work tree.
fn commit(dir: &Path) -> Option<String> {
    // A tarball unpacked inside some other repository must not take that one's commit.
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(BUILT_FROM);
    let changed = git(dir, &status)?;
    Some(if changed.is_empty() {
        hash
    } else {
        format!("{hash}-dirty")
    })
}

/// git's trimmed output in `dir`, if git ran and succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
