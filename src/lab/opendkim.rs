//! A DKIM-signing milter for a lab MTA, so that "what does signing cost this MTA" is one
//! flag: OpenDKIM from Debian's package with its own configuration, key and tables in the
//! lab instance's directory, on a free loopback port, running as nobody. The MTA hands it
//! every message before queueing (Postfix: `smtpd_milters`); it is started before the MTA
//! and stopped with it, and its process is observed with the MTA's.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::host::{self, io};
use super::{DkimSigning, LabError};

const OPENDKIM: &str = "/usr/sbin/opendkim";

/// Checks that OpenDKIM is installed; the error says how to fix it.
pub fn check() -> Result<(), String> {
    if Path::new(OPENDKIM).exists() {
        Ok(())
    } else {
        Err("--mta-dkim-key: OpenDKIM is not installed; run scripts/install-deps.sh (or apt-get install opendkim)".into())
    }
}

/// A running OpenDKIM; stopped on drop.
#[derive(Debug)]
pub struct Milter {
    /// Where the MTA reaches it.
    pub addr: SocketAddr,
    /// Its pid file (the process observed as part of the system under test).
    pub pid_file: PathBuf,
}

impl Milter {
    /// Starts OpenDKIM signing every message with `s`, its files in `dir`.
    pub fn start(dir: &Path, s: &DkimSigning) -> Result<Milter, LabError> {
        check().map_err(LabError::Failed)?;
        let (uid, gid) = host::nobody()?;
        let key = dir.join("dkim.key");
        std::fs::copy(&s.key, &key).map_err(|e| {
            LabError::Setting(format!(
                "--mta-dkim-key {}: cannot read it: {e}",
                s.key.display()
            ))
        })?;
        host::set_mode(&key, 0o600);
        host::chown(&key, uid, gid)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], host::free_port()?));
        let milter = Milter {
            addr,
            pid_file: dir.join("opendkim.pid"),
        };
        let d = dir.display();
        let write = |name: &str, text: String| {
            std::fs::write(dir.join(name), text).map_err(|e| io("write OpenDKIM's files", e))
        };
        // Every sender signed with the one key; messages from loopback are the lab's own
        // (InternalHosts' default), so OpenDKIM signs them.
        write(
            "keytable",
            format!("lab {}:{}:{}\n", s.domain, s.selector, key.display()),
        )?;
        write("signingtable", "* lab\n".into())?;
        write(
            "opendkim.conf",
            format!(
                "Syslog no
Mode s
Socket inet:{port}@127.0.0.1
PidFile {d}/opendkim.pid
UserID nobody:nogroup
KeyTable file:{d}/keytable
SigningTable refile:{d}/signingtable
Canonicalization relaxed/relaxed
RequireSafeKeys false
Background yes
",
                port = addr.port()
            ),
        )?;
        let out = Command::new(OPENDKIM)
            .arg("-x")
            .arg(dir.join("opendkim.conf"))
            .output()
            .map_err(|e| io("run opendkim", e))?;
        if !out.status.success() {
            return Err(LabError::Setting(format!(
                "--mta-dkim-key: OpenDKIM refused to start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                drop(milter);
                return Err(LabError::Failed(
                    "lab: OpenDKIM started but does not listen".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(milter)
    }

    /// The MTA settings that hand every message to it (Postfix's names); a milter that
    /// fails makes the MTA answer 4xx instead of relaying unsigned mail.
    pub fn postfix_settings(&self) -> String {
        format!(
            "smtpd_milters = inet:{}\nmilter_default_action = tempfail\n",
            self.addr
        )
    }
}

impl Drop for Milter {
    fn drop(&mut self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            return;
        };
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
