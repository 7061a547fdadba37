//! Issue 16: the Kubernetes example checked offline (no cluster is reachable here): the
//! schemas bundled in kubernetes-validate reject unknown fields and wrong types, and
//! `deploy/kubernetes/check.py` rejects what the schemas let through (an Indexed Job that
//! is not, agents that would not all run at once or would be retried).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::TempDir;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// Runs the checker on `files`: its exit code and what it printed.
fn check(files: &[PathBuf]) -> (Option<i32>, String) {
    let out = Command::new("python3")
        .arg(deploy().join("check.py"))
        .args(files)
        .output()
        .expect("python3 runs (scripts/install-deps.sh --for-tests installs kubernetes-validate)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn the_manifests_pass_the_schemas_and_the_meaning_checks() {
    let files: Vec<PathBuf> = ["results-pvc.yaml", "send-job.yaml", "merge-job.yaml"]
        .iter()
        .map(|f| deploy().join(f))
        .collect();
    let (code, text) = check(&files);
    assert_eq!(code, Some(0), "deploy/kubernetes: {text}");

    let job = std::fs::read_to_string(deploy().join("send-job.yaml")).expect("send-job.yaml");
    let dir = TempDir::new("deploy");
    for (from, to, says) in [
        (
            "completionMode: Indexed",
            "completionMode: Indexd",
            "not 'Indexed'",
        ),
        (
            "  parallelism: 4",
            "  parallelism: 2",
            "must both equal the 4 agents",
        ),
        ("backoffLimit: 0", "backoffLimit: 6", "backoffLimit is 6"),
        (
            "restartPolicy: Never",
            "restartPolicy: OnFailure",
            "restartPolicy is 'OnFailure'",
        ),
        (
            "agent-$(JOB_COMPLETION_INDEX).json",
            "agent.json",
            "$(JOB_COMPLETION_INDEX)",
        ),
        (
            "            - --run-id\n            - $(RUN_ID)\n",
            "",
            "--run-id is missing",
        ),
        (
            "  backoffLimit: 0",
            "  backoffLimit: 0\n  completionsMode: Indexed",
            "'completionsMode' was unexpected",
        ),
        (
            "  completions: 4",
            "  completions: four",
            "'four' is not of type 'integer'",
        ),
    ] {
        assert!(job.contains(from), "send-job.yaml has {from:?}");
        let bad = dir.0.join("bad.yaml");
        std::fs::write(&bad, job.replacen(from, to, 1)).expect("write");
        let (code, text) = check(&[bad]);
        assert_eq!(code, Some(1), "{to:?} must fail: {text}");
        assert!(text.contains(says), "{to:?}: expected {says:?} in {text}");
    }
}
