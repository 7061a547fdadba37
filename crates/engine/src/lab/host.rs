//! What every lab MTA needs from the host: root, a free loopback port, a directory of its
//! own, a queue on a RAM disk (or /dev/shm when mounting is not allowed), a certificate,
//! and a way to tell that the server answering on its port is the one it started; and
//! what the mail store labs share, so each store's file holds only what is its own.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{LabError, StoreEndpoints, StoreUser};

/// Checks that the process runs as root, which `what` needs; the error says how to fix it.
pub fn check_root(what: &str) -> Result<(), String> {
    if crate::limits::is_root() {
        Ok(())
    } else {
        Err(format!(
            "{what} must run as root (it drops privileges itself); run with sudo"
        ))
    }
}

/// A free TCP port on 127.0.0.1 (bound and released), never one this process was given
/// before: a lab asks for several in a row before its server binds any, and the kernel
/// may hand a released port out again at once (Dovecot was once given one port for two
/// listeners and refused its configuration: "duplicate listener").
pub fn free_port() -> Result<u16, LabError> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..64 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| LabError::Failed(format!("cannot find a free loopback port: {e}")))?;
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
    Err(LabError::Failed(
        "cannot find a free loopback port this run has not used yet (64 tries)".into(),
    ))
}

/// A fresh directory for one lab instance, `mailbench-lab-PID-HOP-RANDOM`, mode 755, with
/// the owner record that tells a later run whether its maker still runs (`leftovers`).
pub fn instance_dir(hop: u8) -> Result<PathBuf, LabError> {
    let dir = std::env::temp_dir().join(format!(
        "mailbench-lab-{}-{hop}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| io("create the lab directory", e))?;
    super::leftovers::claim(&dir).map_err(|e| io("write the lab's owner record", e))?;
    set_mode(&dir, 0o755);
    Ok(dir)
}

/// The error of a file operation the lab needed.
pub fn io(what: &str, e: std::io::Error) -> LabError {
    LabError::Failed(format!("lab: cannot {what}: {e}"))
}

/// Where a queue (or a mail store) lives, and what to undo when the lab stops.
#[derive(Debug)]
pub struct QueueDir {
    /// The directory.
    pub path: PathBuf,
    mounted: bool,
    shm: bool,
}

impl QueueDir {
    /// `dir/name` on disk, or on a tmpfs mounted there; when mounting is not permitted,
    /// a directory in /dev/shm, with a notice for the user.
    pub fn make(
        dir: &Path,
        name: &str,
        hop: u8,
        tmpfs: bool,
    ) -> Result<(QueueDir, Option<String>), LabError> {
        let path = dir.join(name);
        std::fs::create_dir_all(&path).map_err(|e| io("create the queue directory", e))?;
        if !tmpfs {
            return Ok((
                QueueDir {
                    path,
                    mounted: false,
                    shm: false,
                },
                None,
            ));
        }
        let q = path.display().to_string();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1g,mode=755", "tmpfs", &q])
            .output()
            .is_ok_and(|o| o.status.success());
        if mounted {
            return Ok((
                QueueDir {
                    path,
                    mounted: true,
                    shm: false,
                },
                None,
            ));
        }
        let shm = PathBuf::from(format!(
            "/dev/shm/mailbench-lab-{}-{hop}",
            std::process::id()
        ));
        std::fs::create_dir_all(&shm).map_err(|e| io("create a queue in /dev/shm", e))?;
        super::leftovers::claim(&shm).map_err(|e| io("write the lab's owner record", e))?;
        set_mode(&shm, 0o755);
        let notice =
            format!("mounting a tmpfs was not permitted; the {name} is in /dev/shm instead");
        Ok((
            QueueDir {
                path: shm,
                mounted: false,
                shm: true,
            },
            Some(notice),
        ))
    }

    /// Unmounts or removes what `make` made. Idempotent.
    pub fn remove(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.path).output();
            self.mounted = false;
        }
        if self.shm {
            let _ = std::fs::remove_dir_all(&self.path);
            self.shm = false;
        }
    }
}

/// Writes a certificate for `hostname` and 127.0.0.1 (so that `--tls-ca` verifies the lab
/// by address too) to `dir/tls.crt`, and its key to `dir/tls.key`, readable by root only:
/// MTAs load it before they drop privileges.
pub fn write_tls_files(dir: &Path, hostname: &str) -> Result<PathBuf, LabError> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: String| LabError::Failed(format!("lab: cannot make its TLS certificate: {e}"));
    let made = crate::transport::tls::self_signed(&[hostname, "127.0.0.1"]).map_err(failed)?;
    let cert = dir.join("tls.crt");
    std::fs::write(&cert, made.cert.pem()).map_err(|e| failed(e.to_string()))?;
    let mut key = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("tls.key"))
        .map_err(|e| failed(e.to_string()))?;
    std::io::Write::write_all(&mut key, made.signing_key.serialize_pem().as_bytes())
        .map_err(|e| failed(e.to_string()))?;
    Ok(cert)
}

/// How long a lab server has to greet once started.
pub const GREETING: Duration = Duration::from_secs(20);

/// Waits up to [`GREETING`] for the server on `addr` to greet with a line containing
/// `name` (each instance has a unique name): another server on the port is `PortTaken`.
/// When the lab's own processes (`pids`) hold the port and none greets, the lab `lab` has
/// stalled: the error names the process that is stuck and where. A signal that cuts the
/// start short (see `interrupt`) ends the wait.
pub fn wait_for_greeting(
    addr: SocketAddr,
    name: &str,
    lab: &str,
    pids: &dyn Fn() -> Vec<u32>,
) -> Result<(), LabError> {
    let deadline = Instant::now() + GREETING;
    loop {
        super::interrupt::check()?;
        match greeting(addr, Duration::from_secs(2)) {
            Some(g) if g.contains(name) => return Ok(()),
            Some(_) => {
                return Err(LabError::PortTaken(format!(
                    "lab: port taken: {addr} answers for another server"
                )));
            }
            None if Instant::now() > deadline => {
                let pids = pids();
                if super::stall::serves(&pids, addr.port()) {
                    return Err(LabError::Failed(format!(
                        "lab {lab}: no greeting on {addr} in {} s: {}",
                        GREETING.as_secs(),
                        super::stall::describe(&pids, Some(addr.port()))
                    )));
                }
                return Err(LabError::PortTaken(format!(
                    "lab: port taken or the server did not listen on {addr} in {} s",
                    GREETING.as_secs()
                )));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The first line a server at `addr` sends, if it connects within a second and answers
/// within `wait`.
pub fn greeting(addr: SocketAddr, wait: Duration) -> Option<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).ok()?;
    let _ = s.write_all(b"QUIT\r\n");
    (!line.is_empty()).then_some(line)
}

/// Says `line` on standard error: what a lab had to do that no caller asked for (a stop
/// that did not finish and was ended by force).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Sets a path's permission bits.
pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

/// Files below `dir`, recursively (a queue's messages).
pub fn count_files(dir: &Path) -> usize {
    count_files_where(dir, &|_| true)
}

/// Files below `dir`, recursively, whose path `keep` accepts (an MTA's queue files of one
/// kind, or those of a message it can still deliver).
pub fn count_files_where(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                count_files_where(&e.path(), keep)
            } else {
                usize::from(keep(&e.path()))
            }
        })
        .sum()
}

/// Files below `dir`, recursively, with the owner-execute bit set: Postfix's mark of a
/// queue file cleanup finished writing (mode 0700). A file without it is a transaction
/// in progress, or one a crash cut: Postfix's queue manager never takes it up (a
/// closed-loop crash on the lab Postfix left 13 such empty 0600 files in `incoming`,
/// and the drain waited its whole timeout for them).
pub fn count_complete_files(dir: &Path) -> usize {
    use std::os::unix::fs::PermissionsExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => count_complete_files(&e.path()),
            Ok(m) => usize::from(m.permissions().mode() & 0o100 != 0),
            Err(_) => 0,
        })
        .sum()
}

/// Lines of a log file that contain `needle` (deliveries an MTA logged).
pub fn count_lines(log: &Path, needle: &str) -> usize {
    count_lines_with(log, needle, &[])
}

/// Lines of `log` containing `needle` and, when `any_of` is not empty, one of its strings
/// (a deferral, and why).
pub fn count_lines_with(log: &Path, needle: &str, any_of: &[&str]) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.contains(needle) && (any_of.is_empty() || any_of.iter().any(|a| l.contains(a)))
        })
        .count()
}

/// What a server complained of in its log while it started (lines holding one of
/// `markers`, e.g. Dovecot's `Error:`), each once, as notices: a start that went on
/// despite them (a limit it could not raise) is the user's to know before trusting a
/// figure taken near that limit.
pub fn start_complaints(log: &Path, markers: &[&str], server: &str) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(at) = markers.iter().filter_map(|m| line.find(m)).min() else {
            continue;
        };
        // From the process name before the marker on: the time stamp differs each line.
        let from = line[..at].trim_end().rfind(' ').map_or(0, |s| s + 1);
        let notice = format!("{server} logged at start: {}", &line[from..]);
        if !out.contains(&notice) {
            out.push(notice);
        }
    }
    out
}

/// Gives a chrooted MTA process its own resolver: `ROOT/etc/resolv.conf` names the test
/// DNS server at `ip`, beside the few files the C library reads on a lookup (what
/// Debian's `configure-instance.sh` copies into Postfix's chroot). The machine's own
/// resolver configuration is never touched.
pub fn chroot_resolver(root: &Path, ip: std::net::IpAddr) -> Result<(), LabError> {
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc).map_err(|e| io("create the chroot's etc", e))?;
    let write = |name: &str, text: &str| {
        std::fs::write(etc.join(name), text).map_err(|e| io("write the chroot's etc", e))
    };
    write("resolv.conf", &format!("nameserver {ip}\n"))?;
    write("nsswitch.conf", "hosts: files dns\n")?;
    write("hosts", "127.0.0.1 localhost\n::1 localhost\n")?;
    for f in ["services", "host.conf", "localtime"] {
        let _ = std::fs::copy(Path::new("/etc").join(f), etc.join(f));
    }
    Ok(())
}

/// The process ids in the trees rooted at the pids written in `pid_files`.
pub fn trees(pid_files: &[PathBuf]) -> Vec<u32> {
    let roots: Vec<u32> = pid_files
        .iter()
        .filter_map(|f| {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
        })
        .collect();
    crate::stats::sut::descendants(&roots)
}

/// The pid a master wrote into `pid_file`, if it is running (or was): its first word
/// (Sendmail writes its command line on the next line).
pub fn read_pid(pid_file: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
}

/// Waits up to `limit` for `pid` to exit, so that a lab's directories are removed only
/// once its master has let go of them.
pub fn wait_exit(pid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A store lab's line in the run's header, the same for every store so that runs against
/// different stores read alike: `name`'s listeners, its users and its configuration.
pub fn store_line(
    name: &str,
    e: &StoreEndpoints,
    users: &[StoreUser],
    config: &dyn std::fmt::Display,
) -> String {
    let tls = match (e.imaps, e.pop3s) {
        (Some(i), Some(p)) => format!(", IMAPS on {i}, POP3S on {p}"),
        _ => String::new(),
    };
    format!(
        "{name}: IMAP on {}, POP3 on {}, LMTP on {}{tls}, {} users ({} ...), config {config}",
        e.imap,
        e.pop3,
        e.lmtp,
        users.len(),
        users.first().map_or("", |u| u.address.as_str()),
    )
}

/// Writes `users` as `address password` lines to `path`: the list a store lab hands to
/// `mailbench mailbox --users-file` and to people logging in by hand.
pub fn write_users_list(path: &Path, users: &[StoreUser]) -> Result<(), LabError> {
    let postal: String = users
        .iter()
        .map(|u| format!("{} {}\n", u.address, u.password))
        .collect();
    std::fs::write(path, postal).map_err(|e| io("write the users list", e))
}

/// The uid and gid of `nobody` and `nogroup`, which lab mailboxes belong to (so no system
/// account is needed per user).
pub fn nobody() -> Result<(u32, u32), LabError> {
    let id = |file: &str, name: &str| -> Option<u32> {
        std::fs::read_to_string(file).ok()?.lines().find_map(|l| {
            let mut f = l.split(':');
            (f.next()? == name).then(|| f.nth(1)?.parse().ok())?
        })
    };
    match (id("/etc/passwd", "nobody"), id("/etc/group", "nogroup")) {
        (Some(u), Some(g)) => Ok((u, g)),
        _ => Err(LabError::Failed(
            "lab: user nobody or group nogroup is missing on this system".into(),
        )),
    }
}

/// Gives `path` to `uid`:`gid`.
pub fn chown(path: &Path, uid: u32, gid: u32) -> Result<(), LabError> {
    chown_to(path, &format!("{uid}:{gid}"))
}

/// Gives `path` to `owner` (`user:group`, by name or number).
pub fn chown_to(path: &Path, owner: &str) -> Result<(), LabError> {
    let ok = std::process::Command::new("chown")
        .arg(owner)
        .arg(path)
        .status()
        .map_err(|e| io("run chown", e))?
        .success();
    if ok {
        Ok(())
    } else {
        Err(LabError::Failed(format!(
            "lab: cannot give {} to {owner} (for an MTA's own user, run scripts/install-mtas.sh)",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            let port = free_port().expect("a free port");
            assert!(seen.insert(port), "port {port} was handed out twice");
        }
    }

    #[test]
    fn a_pid_file_s_first_word_is_the_pid() {
        let dir = std::env::temp_dir().join(format!("mailbench-pidtest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let f = dir.join("daemon.pid");
        for (text, pid) in [
            ("123\n/usr/sbin/sendmail -bd -q2s\n", Some(123)),
            ("    4567\n", Some(4567)),
            ("", None),
        ] {
            std::fs::write(&f, text).expect("write");
            assert_eq!(read_pid(&f), pid, "{text:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Only files with the owner-execute bit count, at any depth: Postfix's complete
    /// queue files (0700), not the 0600 ones a crash cut mid-write.
    #[test]
    fn only_complete_queue_files_count() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mailbench-qtest-{}", std::process::id()));
        let sub = dir.join("incoming/A");
        std::fs::create_dir_all(&sub).expect("temp dir");
        for (name, mode) in [("A1", 0o700), ("A2", 0o600), ("A3", 0o700)] {
            let f = sub.join(name);
            std::fs::write(&f, "").expect("write");
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let f = dir.join("incoming/B1");
        std::fs::write(&f, "").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(count_complete_files(&dir.join("incoming")), 2);
        assert_eq!(count_files(&dir.join("incoming")), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
