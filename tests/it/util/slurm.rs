//! A private single-machine Slurm cluster for a test: munged with its own key and socket,
//! slurmctld and slurmd with their own slurm.conf (loopback, free ports, private state and
//! spool), all in one temp dir; the real launcher (`srun`, `sbatch`) then starts agents as
//! it would on a site's cluster. Every daemon, job and job process is ended when the
//! cluster is dropped, also when the test fails half-way.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{TempDir, free_port, wait_until};

/// The programs a test cluster runs, and the Debian package of each.
const PROGRAMS: &[(&str, &str)] = &[
    ("munged", "munge"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("srun", "slurm-client"),
    ("sbatch", "slurm-client"),
    ("sinfo", "slurm-client"),
    ("squeue", "slurm-client"),
    ("scancel", "slurm-client"),
    ("scontrol", "slurm-client"),
];

/// The launchers' index variables and what a surrounding Slurm job would leak into the
/// test's own commands: removed, so that only the private cluster sets them.
const LEAKS: &[&str] = &["JOB_COMPLETION_INDEX", "NOMAD_ALLOC_INDEX", "PARALLEL_SEQ"];

/// How long the cluster may take to show its node idle.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// One daemon of the cluster: its name, process and log.
struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running private Slurm cluster of one node (this machine).
pub struct Slurm {
    /// Its directory (config, key, socket, state, spool, logs); the tests put their
    /// results here too, so that every job process names it.
    pub dir: PathBuf,
    conf: PathBuf,
    /// In start order: munged, slurmctld, slurmd.
    daemons: Vec<Daemon>,
    /// Removed last, after every daemon ended.
    _tmp: TempDir,
}

/// Fails the test (never skips it) when a program is missing, saying what to install.
fn need_programs() {
    let missing: Vec<String> = PROGRAMS
        .iter()
        .filter(|(p, _)| {
            !["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
                .iter()
                .any(|d| Path::new(d).join(p).exists())
        })
        .map(|(p, pkg)| format!("{p} (Debian package {pkg})"))
        .collect();
    assert!(
        missing.is_empty(),
        "the Slurm test needs {}: run scripts/install-deps.sh --for-tests",
        missing.join(", ")
    );
}

/// The first line a program prints.
fn line_of(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The cluster's configuration: one node (this host, on loopback, with `cpus` CPUs,
/// whatever the hardware has, so that three single-CPU agents run at once even on two
/// cores), a default partition, and only plugins that need no cgroups or systemd.
fn slurm_conf(dir: &Path, host: &str, user: &str, cpus: u32) -> String {
    let d = dir.display();
    format!(
        "ClusterName=mailbench-it
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=it Nodes=ALL Default=YES MaxTime=10 State=UP
",
        ctld = free_port(),
        slurmd = free_port(),
    )
}

impl Slurm {
    /// Starts munged, slurmctld and slurmd in a fresh temp dir and waits until `sinfo`
    /// shows the node idle; `cpus` is what the node offers to jobs.
    pub fn start(tag: &str, cpus: u32) -> Slurm {
        need_programs();
        let tmp = TempDir::new(tag);
        let dir = tmp.0.clone();
        // munged refuses a socket or seed under a directory others may write to.
        set_mode(&dir, 0o755);
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(sub)).expect("cluster dirs");
            set_mode(&dir.join(sub), 0o755);
        }
        let key = dir.join("munge/munge.key");
        let mut bytes = Vec::with_capacity(1024);
        std::fs::File::open("/dev/urandom")
            .and_then(|f| f.take(1024).read_to_end(&mut bytes))
            .expect("a random munge key");
        std::fs::write(&key, &bytes).expect("write the munge key");
        set_mode(&key, 0o600);
        let conf = dir.join("slurm.conf");
        // slurmd finds its NodeName by the short host name.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
        let host = host.trim().split('.').next().unwrap_or("localhost");
        let user = line_of("id", &["-un"]);
        std::fs::write(&conf, slurm_conf(&dir, host, &user, cpus)).expect("write slurm.conf");
        let mut cluster = Slurm {
            dir: dir.clone(),
            conf,
            daemons: Vec::new(),
            _tmp: tmp,
        };
        let socket = dir.join("munge/munge.socket");
        cluster.spawn(
            "munged",
            &[
                "--foreground".into(),
                format!("--key-file={}", key.display()),
                format!("--socket={}", socket.display()),
                format!("--pid-file={}", dir.join("munge/munged.pid").display()),
                format!("--seed-file={}", dir.join("munge/munged.seed").display()),
                format!("--log-file={}", dir.join("log/munged.file.log").display()),
            ],
        );
        cluster.ready("munged's socket", Duration::from_secs(10), || {
            socket.exists()
        });
        cluster.spawn("slurmctld", &["-D".into()]);
        cluster.spawn("slurmd", &["-D".into()]);
        let conf = cluster.conf.clone();
        cluster.ready("the node idle in sinfo", READY_WITHIN, || {
            let out = client(&conf, "sinfo").args(["-h", "-o", "%T"]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        cluster
    }

    /// Starts one daemon in the foreground, its output in `log/NAME.out`.
    fn spawn(&mut self, name: &'static str, args: &[String]) {
        let log = self.dir.join(format!("log/{name}.out"));
        let file = std::fs::File::create(&log).expect("daemon log");
        let child = self
            .command(name)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.daemons.push(Daemon { name, child, log });
    }

    /// Waits for `cond` up to `limit`; fails with every daemon's log when it does not
    /// come, or as soon as a daemon exits.
    fn ready(&mut self, what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
        let mut died = None;
        let came = wait_until(limit, || {
            died = self
                .daemons
                .iter_mut()
                .find_map(|d| match d.child.try_wait() {
                    Ok(Some(status)) => Some(format!("{} exited ({status})", d.name)),
                    _ => None,
                });
            died.is_some() || cond()
        });
        if came && died.is_none() {
            return;
        }
        let why = died.unwrap_or_else(|| format!("no {what} within {limit:?}"));
        panic!("private Slurm cluster: {why}\n{}", self.logs());
    }

    /// Every daemon's log, for a failure message.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for d in &self.daemons {
            let log = std::fs::read_to_string(&d.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            text.push_str(&format!("--- {} ({})\n{tail}\n", d.name, d.log.display()));
        }
        text
    }

    /// A Slurm command (`srun`, `sbatch`, …) or anything else that must reach this
    /// cluster: SLURM_CONF set, no variable of an outer launcher or job.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        client(&self.conf, program)
    }

    /// Runs `cmd` to its end within `limit` (killed and failed past it); its output.
    pub fn run(&self, mut cmd: Command, limit: Duration) -> Output {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let readers = [
            child.stdout.take().map(drain),
            child.stderr.take().map(drain),
        ];
        let end = Instant::now() + limit;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "{what} did not end within {limit:?}\n{}\nqueue: {}",
                        self.logs(),
                        self.queue()
                    );
                }
            }
        };
        let [stdout, stderr] = readers.map(|r| r.and_then(|h| h.join().ok()).unwrap_or_default());
        Output {
            status,
            stdout,
            stderr,
        }
    }

    /// `squeue`'s view of the cluster, for failure messages.
    pub fn queue(&self) -> String {
        self.command("squeue")
            .args(["-h", "-o", "%i %T %R"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Ends every job, then the daemons; what had still to be killed after that (a clean
    /// run leaves nothing: the list is empty).
    pub fn stop(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.daemons.is_empty() {
            return Vec::new();
        }
        // Cancel what still runs while slurmd can end its job steps.
        let user = line_of("id", &["-un"]);
        let _ = self
            .command("scancel")
            .args(["--user", &user])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        wait_until(Duration::from_secs(10), || {
            self.command("squeue")
                .args(["-h", "-o", "%i"])
                .output()
                .map_or(true, |o| !o.status.success() || o.stdout.is_empty())
        });
        for mut d in self.daemons.drain(..).rev() {
            stop(&mut d.child, Duration::from_secs(5));
        }
        // Whatever still carries this cluster's SLURM_CONF was started through it: a job
        // step or its agent the daemons did not end.
        let left = processes_of(&self.conf);
        for (pid, _) in &left {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        left.into_iter().map(|(_, cmd)| cmd).collect()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A command that reaches the cluster of `conf` and no other: see [`Slurm::command`].
fn client(conf: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("SLURM_") || n.starts_with("SBATCH_") || LEAKS.contains(&&*n) {
            cmd.env_remove(&name);
        }
    }
    cmd.env("SLURM_CONF", conf);
    cmd
}

/// Reads a pipe to its end on a thread of its own.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// SIGTERM, up to `grace` to exit, then SIGKILL.
fn stop(child: &mut Child, grace: Duration) {
    if let Ok(None) = child.try_wait() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        if !wait_until(grace, || matches!(child.try_wait(), Ok(Some(_)))) {
            let _ = child.kill();
        }
    }
    let _ = child.wait();
}

/// The live processes (pid, command line) whose environment names `conf` as SLURM_CONF.
fn processes_of(conf: &Path) -> Vec<(u32, String)> {
    let mark = format!("SLURM_CONF={}", conf.display());
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            if !env.split(|b| *b == 0).any(|v| v == mark.as_bytes()) {
                return None;
            }
            let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            if state
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
            {
                return None;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            Some((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .filter(|(pid, _)| *pid != std::process::id())
        .collect()
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
