//! Issue 31: a split send started by a real Slurm (munged, slurmctld and slurmd of a
//! private one-node cluster): `srun -n 3` and the shipped array job (deploy/slurm/run.sh:
//! `sbatch --array=0-2` of send.sbatch, then merge.sbatch depending on it) start three
//! agents that read their index from Slurm, and their merged results equal one agent's
//! run exactly as the local scale tests check; the sink sees each run whole. The shipped
//! scripts refuse misuse in one line.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::sink::Sink;
use crate::util::slurm::Slurm;
use crate::util::split::{
    OPEN_LOOP, assert_began_together, assert_merged_as_one, assert_sink_saw_whole, merged, start_in,
};
use crate::util::{TempDir, free_port, results, run_expect};

/// How long a launcher may take for a 2 s run started a few seconds ahead.
const LAUNCH_WITHIN: Duration = Duration::from_secs(40);

fn deploy(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/slurm")
        .join(script)
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn srun_and_an_array_job_merge_into_one_agents_run() {
    let cluster = Slurm::start("slurm", 4);
    let dir = cluster.dir.clone();
    let sink_json = dir.join("sink.json");
    let sink = Sink::start(&["--json", &path(&sink_json)]);
    let target = sink.target();
    let bin = env!("CARGO_BIN_EXE_mailbench");

    // One agent, the reference every split run must equal.
    let one_json = dir.join("one.json");
    let mut args = vec!["send", &target];
    args.extend(OPEN_LOOP);
    let one_path = path(&one_json);
    args.extend(["--run-id", "51c1", "--json", &one_path, "-q"]);
    run_expect(&args, 0);
    let one = results(&one_json);

    // srun -n 3: the tasks of one step, each agent its SLURM_PROCID.
    let start_at = start_in(Duration::from_secs(3));
    let srun_json = |i: usize| dir.join(format!("srun-{i}.json"));
    let mut srun = cluster.command("srun");
    srun.args(["-n", "3", "--time=2", "sh", "-c"])
        .arg(format!(
            r#"exec "$0" "$@" --json {}/srun-$SLURM_PROCID.json"#,
            dir.display()
        ))
        .args([bin, "send", &target])
        .args(OPEN_LOOP)
        .args(["--shard", "auto/3", "--start-at", &start_at])
        .args(["--run-id", "51c3", "-q"]);
    let out = cluster.run(srun, LAUNCH_WITHIN);
    assert!(
        out.status.success(),
        "srun: {}\n{}",
        text(&out),
        cluster.logs()
    );
    let files: Vec<PathBuf> = (0..3).map(srun_json).collect();
    assert_began_together(&files, "00000000000051c3", "srun -n 3 (SLURM_PROCID)");
    let m = merged(&files, &dir.join("srun-merged.json"));
    assert_merged_as_one(&m, &one, 3, "srun -n 3");

    // The shipped array job: three tasks, each agent its SLURM_ARRAY_TASK_ID, and the
    // merge job after them.
    let results_dir = dir.join("array");
    let mut run = cluster.command(deploy("run.sh"));
    run.arg("3")
        .arg(&target)
        .arg(&results_dir)
        .args(OPEN_LOOP)
        .env("START_IN", "4")
        .env("SBATCH_TIMELIMIT", "2")
        .env("MAILBENCH", bin);
    let out = cluster.run(run, LAUNCH_WITHIN);
    assert!(
        out.status.success(),
        "deploy/slurm/run.sh: {}\n{}",
        text(&out),
        cluster.logs()
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("mailbench merge: 3 files, 3 agents")
            && printed.contains("sent 100  accepted 100"),
        "run.sh prints the merged summary: {printed}"
    );
    assert_eq!(
        job_states(&cluster, &printed),
        vec!["COMPLETED 0:0"; 3],
        "Slurm's record of the agents"
    );
    let files: Vec<PathBuf> = (0..3)
        .map(|i| results_dir.join(format!("agent-{i}.json")))
        .collect();
    let m = results(&results_dir.join("merged.json"));
    let run_id = m["run_id"].as_str().expect("a run id").to_string();
    assert_began_together(&files, &run_id, "sbatch --array=0-2 (SLURM_ARRAY_TASK_ID)");
    assert_merged_as_one(&m, &one, 3, "the array job's merge step");
    assert!(
        results_dir.join("merged.html").exists(),
        "the merged report"
    );

    // An agent that fails (nothing listens where it sends): the merge job never runs,
    // and run.sh says so in one line instead of waiting for it.
    let failed_dir = dir.join("failed");
    let mut run = cluster.command(deploy("run.sh"));
    run.arg("2")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg(&failed_dir)
        .args(["-n", "4", "-c", "2"])
        .env("START_IN", "1")
        .env("SBATCH_TIMELIMIT", "2")
        .env("MAILBENCH", bin);
    let out = cluster.run(run, LAUNCH_WITHIN);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1)
            && err.lines().count() == 1
            && err.contains("an agent failed, so the merge did not run"),
        "run.sh with failing agents: {}",
        text(&out)
    );
    assert!(!failed_dir.join("merged.json").exists());
    assert_eq!(
        job_states(&cluster, &String::from_utf8_lossy(&out.stdout)),
        vec!["FAILED 1:0"; 2],
        "Slurm's record of the failing agents"
    );
    let logs: Vec<String> = std::fs::read_dir(&failed_dir)
        .expect("the agents' logs")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("mailbench-send-")
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        logs.len() == 2 && logs.iter().all(|l| l.contains("is not reachable")),
        "each agent's log says why it failed: {logs:?}"
    );

    let (code, _) = sink.stop();
    assert_eq!(code, Some(0));
    let sunk = results(&sink_json);
    assert_sink_saw_whole(&sunk, "00000000000051c1", "one agent");
    assert_sink_saw_whole(&sunk, "00000000000051c3", "srun");
    assert_sink_saw_whole(&sunk, &run_id, "array job");
    let left = cluster.stop();
    assert!(
        left.is_empty(),
        "left running after the cluster stopped: {left:?}"
    );
}

/// Slurm's own record (`scontrol show job`) of the array job run.sh names in `printed`:
/// each task's state and exit code, in task order.
fn job_states(cluster: &Slurm, printed: &str) -> Vec<String> {
    let array = printed
        .lines()
        .find_map(|l| l.strip_prefix("agents: job array "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("run.sh names the job array: {printed}"));
    let mut cmd = cluster.command("scontrol");
    cmd.args(["show", "job", "--oneliner", array]);
    let out = cluster.run(cmd, Duration::from_secs(10));
    let field = |line: &str, key: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .unwrap_or("?")
            .to_string()
    };
    let mut tasks: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let state = format!("{} {}", field(l, "JobState="), field(l, "ExitCode="));
            (field(l, "ArrayTaskId="), state)
        })
        .collect();
    tasks.sort();
    tasks.into_iter().map(|(_, state)| state).collect()
}

/// A shipped script's refusal, as bad input must be refused: exit 1, one line on stderr
/// naming `needle`.
fn refused(out: &Output, what: &str, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {}", text(out));
    assert!(
        err.contains(needle) && err.lines().count() == 1,
        "{what}: expected one line naming {needle:?}: {}",
        text(out)
    );
}

#[test]
fn the_slurm_scripts_refuse_misuse_in_one_line() {
    let dir = TempDir::new("slurm-refused");
    let bash = |script: &str, args: &[&str]| {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(deploy(script)).args(args);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SLURM_") {
                cmd.env_remove(&name);
            }
        }
        cmd.output().expect("bash")
    };
    let results_dir = path(&dir.0);
    for (script, args, needle) in [
        ("run.sh", vec!["3", "127.0.0.1:25"], "usage:"),
        ("run.sh", vec!["three", "127.0.0.1:25", "r"], "AGENTS three"),
        ("send.sbatch", vec!["r"], "usage: sbatch --array"),
        (
            "send.sbatch",
            vec!["r", "ab", "+1s", "127.0.0.1:25"],
            "not a task of a job array",
        ),
        ("merge.sbatch", vec![], "usage:"),
        ("merge.sbatch", vec![&results_dir], "no agent-*.json"),
    ] {
        let out = bash(script, &args);
        refused(&out, &format!("{script} {args:?}"), needle);
    }
    std::fs::write(dir.0.join("agent-0.json"), "{}").expect("write");
    let out = bash("run.sh", &["2", "127.0.0.1:25", &results_dir]);
    refused(
        &out,
        "run.sh into a used directory",
        "already holds agent-*.json",
    );

    // An array that does not count from 0: each task says which --array to give.
    let mut wrong = std::process::Command::new("bash");
    wrong
        .arg(deploy("send.sbatch"))
        .args(["r", "ab", "+1s", "127.0.0.1:25"])
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .env("SLURM_ARRAY_TASK_MIN", "1")
        .env("SLURM_ARRAY_TASK_MAX", "3")
        .env("SLURM_ARRAY_TASK_ID", "1");
    let out = wrong.output().expect("bash");
    refused(
        &out,
        "send.sbatch in --array=1-3",
        "--array must be 0-2 for 3 agents",
    );
}
