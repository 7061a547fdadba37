//! A disposable Postfix for a benchmark: its own config, queue and log in a temporary
//! directory, smtpd on a free loopback port, relaying everything to the next hop (another
//! lab instance, or the sink). Chroot off, process and concurrency limits raised, quick
//! retries. Started with `postfix -c DIR start`, stopped and removed on drop; never touches
//! `/etc/postfix` or the system queue. Facts behind each setting: shared LAB-NOTES.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the queue lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// A RAM disk (tmpfs mount; /dev/shm when mounting is not permitted).
    Tmpfs,
    /// A directory on disk.
    Disk,
}

/// How to build the lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Instances chained MTA → MTA → ... → relay.
    pub hops: u8,
    /// Queue placement.
    pub queue: QueueKind,
    /// `key=value` overrides of main.cf, applied to every instance.
    pub postconf: Vec<(String, String)>,
    /// Where the last instance relays to.
    pub relay: SocketAddr,
    /// Offer STARTTLS on the entry smtpd. Off unless asked: every smtpd process then loads
    /// the TLS library and key when it starts, which doubled the lab's first greetings
    /// (1.6 s to 3 s for 64 sessions) in runs that never use TLS.
    pub starttls: bool,
}

/// One running instance.
#[derive(Debug)]
pub struct Instance {
    /// Its myhostname, unique, so that its greeting identifies it.
    pub name: String,
    /// Config directory.
    pub dir: PathBuf,
    /// Queue directory.
    pub queue: PathBuf,
    /// smtpd address.
    pub smtpd: SocketAddr,
    mounted: bool,
    shm: bool,
}

/// The running lab; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Lab {
    /// Instances, first (the one to inject into) first.
    pub instances: Vec<Instance>,
    /// Notices for the user (e.g. tmpfs fallback).
    pub notices: Vec<String>,
}

const POSTFIX: &str = "/usr/sbin/postfix";

/// Why a lab did not start. The kinds matter to callers: a rejected setting is the user's
/// input (exit 1), a taken port is retried on another, the rest are failures (exit 2).
#[derive(Debug)]
pub enum LabError {
    /// Postfix refused a `--postconf` setting.
    Setting(String),
    /// The smtpd port was taken by another server before Postfix bound it.
    PortTaken(String),
    /// Anything else (Postfix missing, not root, a file that cannot be written).
    Failed(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Setting(m) | LabError::PortTaken(m) | LabError::Failed(m) => f.write_str(m),
        }
    }
}

/// Checks that a lab can run here; the error says how to fix it.
pub fn check() -> Result<(), String> {
    if !Path::new(POSTFIX).exists() {
        return Err(
            "Postfix is not installed; run scripts/install-deps.sh (or apt-get install postfix)"
                .into(),
        );
    }
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(
            "the Postfix lab must run as root (Postfix drops privileges itself); run with sudo"
                .into(),
        );
    }
    Ok(())
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}

impl Lab {
    /// Starts the instances, last hop first.
    pub fn start(opts: &LabOptions) -> Result<Lab, LabError> {
        check().map_err(LabError::Failed)?;
        let mut lab = Lab {
            instances: Vec::new(),
            notices: Vec::new(),
        };
        let mut next = opts.relay;
        for hop in (0..opts.hops.max(1)).rev() {
            // A free port can be taken by someone else before Postfix binds it; the greeting
            // tells whether the smtpd that answers is this instance's. Then retry elsewhere.
            let mut attempt = 0;
            let inst = loop {
                attempt += 1;
                match lab.start_one(hop, next, opts) {
                    Ok(inst) => break inst,
                    Err(LabError::PortTaken(_)) if attempt < 3 => continue,
                    Err(e) => return Err(e),
                }
            };
            next = inst.smtpd;
            lab.instances.insert(0, inst);
        }
        Ok(lab)
    }

    /// Where to inject.
    pub fn entry(&self) -> SocketAddr {
        self.instances[0].smtpd
    }

    /// `status=sent` deliveries logged by the last hop (the ones that reached the relay).
    pub fn delivered_logged(&self) -> usize {
        self.instances
            .last()
            .map(|i| count_sent(&i.dir.join("maillog")))
            .unwrap_or(0)
    }

    /// Messages still queued in all instances (files under active, incoming, deferred).
    pub fn queued(&self) -> usize {
        self.instances
            .iter()
            .map(|i| {
                ["incoming", "active", "deferred", "hold"]
                    .iter()
                    .map(|q| count_files(&i.queue.join(q)))
                    .sum::<usize>()
            })
            .sum()
    }

    /// Process ids of every lab process (masters and their children).
    pub fn pids(&self) -> Vec<u32> {
        let masters: Vec<u32> = self
            .instances
            .iter()
            .filter_map(|i| {
                std::fs::read_to_string(i.queue.join("pid/master.pid"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
            })
            .collect();
        crate::stats::sut::descendants(&masters)
    }

    fn start_one(
        &mut self,
        hop: u8,
        relay: SocketAddr,
        opts: &LabOptions,
    ) -> Result<Instance, LabError> {
        let dir = std::env::temp_dir().join(format!(
            "mailbench-lab-{}-{hop}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let io =
            |what: &str, e: std::io::Error| LabError::Failed(format!("lab: cannot {what}: {e}"));
        std::fs::create_dir_all(dir.join("data")).map_err(|e| io("create the lab directory", e))?;
        set_mode(&dir, 0o755);
        let mut inst = Instance {
            name: format!("lab{hop}-{:08x}.mailbench.test", fastrand::u32(..)),
            queue: dir.join("queue"),
            dir: dir.clone(),
            smtpd: SocketAddr::from(([127, 0, 0, 1], free_port().map_err(LabError::Failed)?)),
            mounted: false,
            shm: false,
        };
        std::fs::create_dir_all(&inst.queue).map_err(|e| io("create the queue directory", e))?;
        if opts.queue == QueueKind::Tmpfs {
            let q = inst.queue.display().to_string();
            let mounted = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1g,mode=755", "tmpfs", &q])
                .output()
                .is_ok_and(|o| o.status.success());
            if mounted {
                inst.mounted = true;
            } else {
                let shm = PathBuf::from(format!(
                    "/dev/shm/mailbench-lab-{}-{hop}",
                    std::process::id()
                ));
                std::fs::create_dir_all(&shm).map_err(|e| io("create a queue in /dev/shm", e))?;
                set_mode(&shm, 0o755);
                inst.queue = shm;
                inst.shm = true;
                self.notices.push(
                    "mounting a tmpfs was not permitted; the queue is in /dev/shm instead".into(),
                );
            }
        }
        let chown = Command::new("chown")
            .args(["postfix:postfix", &dir.join("data").display().to_string()])
            .status()
            .map_err(|e| io("run chown", e))?;
        if !chown.success() {
            return Err(LabError::Failed(
                "lab: cannot give the data directory to user postfix (is Postfix installed?)"
                    .into(),
            ));
        }
        let d = dir.display();
        let mut main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {q}
data_directory = {d}/data
mail_owner = postfix
myhostname = {name}
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = {protocols}
mynetworks = 127.0.0.0/8
relayhost = [{rip}]:{rport}
smtp_dns_support_level = disabled
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
local_recipient_maps =
default_process_limit = 512
default_destination_concurrency_limit = 100
smtp_destination_concurrency_limit = 100
smtpd_client_connection_count_limit = 0
in_flow_delay = 0
smtputf8_enable = no
# Retries within a run, but not sooner than 5 s: with 1-2 s the deferred-queue scan takes
# some messages back before the delivery agent has let go of them, finds them locked
# ('skipped, still being delivered') and parks them in incoming, where nothing rescans
# them during a run (seen in about 1 run in 6 with 1000 messages and 30 % deferrals).
queue_run_delay = 1s
minimal_backoff_time = 5s
maximal_backoff_time = 10s
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
",
            q = inst.queue.display(),
            name = inst.name,
            rip = relay.ip(),
            rport = relay.port(),
            // The smtpd listens on 127.0.0.1 either way; the smtp client needs IPv6 for a
            // relay (the sink) on ::1.
            protocols = if relay.is_ipv4() { "ipv4" } else { "all" }
        );
        if opts.starttls && hop == 0 {
            write_tls_files(&dir, &inst.name)?;
            main_cf.push_str(&format!(
                "smtpd_tls_cert_file = {d}/tls.crt\nsmtpd_tls_key_file = {d}/tls.key\nsmtpd_tls_security_level = may\n"
            ));
        }
        for (k, v) in &opts.postconf {
            main_cf.push_str(&format!("{k} = {v}\n"));
        }
        std::fs::write(dir.join("main.cf"), main_cf).map_err(|e| io("write main.cf", e))?;
        let master = std::fs::read_to_string("/etc/postfix/master.cf")
            .map_err(|e| io("read /etc/postfix/master.cf", e))?;
        std::fs::write(dir.join("master.cf"), master_cf(&master, inst.smtpd))
            .map_err(|e| io("write master.cf", e))?;
        if let Err(e) = check_overrides(&dir, &opts.postconf) {
            inst.stop();
            return Err(e);
        }
        let out = Command::new(POSTFIX)
            .args(["-c", &d.to_string(), "start"])
            .output()
            .map_err(|e| io("run postfix", e))?;
        if !out.status.success() {
            let reason = start_failure(&dir);
            inst.stop();
            // A fatal error that names an overridden key is that --postconf value's fault.
            let named = opts
                .postconf
                .iter()
                .find(|(k, _)| reason.contains(&format!("{k} =")));
            return Err(match named {
                Some((k, _)) => LabError::Setting(format!(
                    "--postconf {k}: Postfix refused it ({reason}); fix or drop the value"
                )),
                None => LabError::Failed(format!("lab: postfix start failed: {reason}")),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match greeting(inst.smtpd) {
                Some(g) if g.contains(&inst.name) => return Ok(inst),
                Some(_) => {
                    inst.stop();
                    return Err(LabError::PortTaken(format!(
                        "lab: port taken: {} answers for another server",
                        inst.smtpd
                    )));
                }
                None if Instant::now() > deadline => {
                    inst.stop();
                    return Err(LabError::PortTaken(format!(
                        "lab: port taken or Postfix smtpd did not listen on {} in 20 s",
                        inst.smtpd
                    )));
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// A self-signed certificate and key for the lab's smtpd, made with rcgen for its
/// hostname and 127.0.0.1. The key is readable by root only; Postfix loads it before dropping privileges.
fn write_tls_files(dir: &Path, hostname: &str) -> Result<(), LabError> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: String| LabError::Failed(format!("lab: cannot make its TLS certificate: {e}"));
    // Its IP too, so that `send 127.0.0.1:PORT --tls-ca tls.crt` verifies it.
    let names = vec![hostname.to_string(), "127.0.0.1".to_string()];
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| failed(e.to_string()))?;
    std::fs::write(dir.join("tls.crt"), generated.cert.pem()).map_err(|e| failed(e.to_string()))?;
    let mut key = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("tls.key"))
        .map_err(|e| failed(e.to_string()))?;
    std::io::Write::write_all(&mut key, generated.signing_key.serialize_pem().as_bytes())
        .map_err(|e| failed(e.to_string()))
}

/// Why `postfix start` failed. Postfix prints its fatal errors only to a terminal (or a
/// syslog this machine may not run), so `postfix check` runs again on a pseudo-terminal
/// (util-linux `script`, part of every Debian system) to read them.
fn start_failure(dir: &Path) -> String {
    let cmd = format!("{POSTFIX} -c '{}' check", dir.display());
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let fatal: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("fatal:") || l.contains("error:"))
        .collect();
    if fatal.is_empty() {
        "Postfix gave no reason".into()
    } else {
        fatal.join("; ")
    }
}

/// Postfix only warns about a parameter it does not know ("unused parameter") and runs
/// on without it, so a misspelt `--postconf` key would quietly benchmark the default.
/// `postconf -n` reports those warnings; an overridden key among them is refused.
fn check_overrides(dir: &Path, overrides: &[(String, String)]) -> Result<(), LabError> {
    if overrides.is_empty() {
        return Ok(());
    }
    let out = Command::new("/usr/sbin/postconf")
        .args(["-c", &dir.display().to_string(), "-n"])
        .output()
        .map_err(|e| LabError::Failed(format!("lab: cannot run postconf: {e}")))?;
    let warnings = String::from_utf8_lossy(&out.stderr);
    match overrides
        .iter()
        .find(|(k, _)| warnings.contains(&format!("unused parameter: {k}=")))
    {
        Some((k, _)) => Err(LabError::Setting(format!(
            "--postconf {k}: Postfix has no such parameter (postconf: unused parameter); check its spelling in postconf(5)"
        ))),
        None => Ok(()),
    }
}

/// The first line a server at `addr` sends, if it answers within a second.
fn greeting(addr: SocketAddr) -> Option<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).ok()?;
    let _ = s.write_all(b"QUIT\r\n");
    (!line.is_empty()).then_some(line)
}

/// Debian's master.cf with smtpd moved to `smtpd`, chroot off everywhere, postlog on.
fn master_cf(master: &str, smtpd: SocketAddr) -> String {
    let mut out = String::new();
    for line in master.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let service = !line.starts_with([' ', '\t', '#']) && fields.len() >= 8;
        if line.starts_with("#postlog") {
            out.push_str(&line[1..].replace(" - ", " n "));
        } else if service && fields[0] == "smtp" && fields[1] == "inet" {
            out.push_str(&format!("{smtpd} inet n - n - - smtpd"));
        } else if service {
            let mut f: Vec<&str> = fields.clone();
            f[4] = "n";
            out.push_str(&f.join(" "));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

impl Instance {
    /// Stops Postfix, unmounts and removes everything this instance made. Idempotent.
    pub fn stop(&mut self) {
        if !self.dir.exists() {
            return;
        }
        let d = self.dir.display().to_string();
        let pid: Option<u32> = std::fs::read_to_string(self.queue.join("pid/master.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let _ = Command::new(POSTFIX).args(["-c", &d, "stop"]).output();
        if let Some(pid) = pid {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if self.mounted {
            let _ = Command::new("umount").arg(&self.queue).output();
            self.mounted = false;
        }
        if self.shm {
            let _ = std::fs::remove_dir_all(&self.queue);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for i in &mut self.instances {
            i.stop();
        }
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

fn count_sent(maillog: &Path) -> usize {
    std::fs::read_to_string(maillog)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("status=sent"))
        .count()
}

fn count_files(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                count_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_cf_moves_smtpd_and_turns_chroot_off() {
        let debian = "smtp      inet  n       -       y       -       -       smtpd\n#postlog   unix-dgram n  -       n       -       1       postlogd\npickup    unix  n       -       y       60      1       pickup\n  -o x=y\n";
        let out = master_cf(debian, "127.0.0.1:2725".parse().expect("addr"));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "127.0.0.1:2725 inet n - n - - smtpd");
        assert!(lines[1].starts_with("postlog") && lines[1].contains("postlogd"));
        assert_eq!(lines[2], "pickup unix n - n 60 1 pickup");
        assert_eq!(lines[3], "  -o x=y");
    }
}
