//! A private OpenLDAP directory for a lab MTA's recipient lookups (`--mta-lookup ldap`,
//! seed 004's LDAP-backed Postfix): Debian's `slapd` on a loopback port, its own
//! configuration, database and access log in a lab directory, one entry per recipient of
//! the run loaded with `slapadd` before it starts. The MTA talks to it through `proxy`,
//! which counts and times the lookups and injects the faults (`--ldap-fault`). Stopped and
//! removed on drop, whatever happens; the system's slapd, if any, is never touched.

pub use mailbench_wire::ldap::frame;
pub mod proxy;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::LabError;
use super::host::{self, io};

const SLAPD: &str = "/usr/sbin/slapd";
const SLAPADD: &str = "/usr/sbin/slapadd";
/// The directory's suffix, under which every user is.
pub const BASE: &str = "dc=mailbench,dc=test";

/// Checks that slapd can run here; the error says how to fix it.
pub fn check() -> Result<(), String> {
    for tool in [SLAPD, SLAPADD] {
        if !Path::new(tool).exists() {
            return Err(format!(
                "--mta-lookup ldap: {tool} is missing; run scripts/install-deps.sh (Debian's slapd and ldap-utils)"
            ));
        }
    }
    Ok(())
}

/// A running directory with its fault-injecting proxy.
#[derive(Debug)]
pub struct Directory {
    dir: PathBuf,
    slapd: Option<Child>,
    /// Where the MTA connects: the proxy in front of slapd.
    pub proxy: proxy::Proxy,
}

impl Directory {
    /// Loads `recipients` and starts slapd and the proxy with `faults`.
    pub fn start(recipients: &[String], faults: proxy::Faults) -> Result<Directory, LabError> {
        check().map_err(LabError::Failed)?;
        let dir = host::instance_dir(0)?;
        let db = dir.join("db");
        std::fs::create_dir_all(&db).map_err(|e| io("create the directory's database", e))?;
        let conf = dir.join("slapd.conf");
        std::fs::write(&conf, slapd_conf(&dir)).map_err(|e| io("write slapd.conf", e))?;
        std::fs::write(dir.join("users.ldif"), ldif(recipients))
            .map_err(|e| io("write users.ldif", e))?;
        let cleanup = |e: LabError| {
            let _ = std::fs::remove_dir_all(&dir);
            e
        };
        // -q: no consistency checks while loading (the LDIF is ours), minutes → seconds.
        let out = Command::new(SLAPADD)
            .arg("-q")
            .arg("-f")
            .arg(&conf)
            .arg("-l")
            .arg(dir.join("users.ldif"))
            .output()
            .map_err(|e| cleanup(io("run slapadd", e)))?;
        if !out.status.success() {
            return Err(cleanup(LabError::Failed(format!(
                "lab: slapadd could not load the recipients: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        let port = host::free_port().map_err(cleanup)?;
        let slapd_addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log = std::fs::File::create(dir.join("access.log"))
            .map_err(|e| cleanup(io("create the access log", e)))?;
        // In the foreground (-d): its stats lines (the access log the tests compare the
        // proxy's counts with) go to standard error, and it is this process's child.
        let child = super::leftovers::own_group(&mut Command::new(SLAPD))
            .arg("-f")
            .arg(&conf)
            .args(["-h", &format!("ldap://{slapd_addr}/"), "-d", "stats"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| cleanup(io("run slapd", e)))?;
        let mut child = child;
        let proxy = match proxy::Proxy::start(slapd_addr, faults) {
            Ok(p) => p,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(cleanup(io("start the ldap proxy", e)));
            }
        };
        let mut d = Directory {
            dir,
            slapd: Some(child),
            proxy,
        };
        d.wait_ready(slapd_addr)?;
        Ok(d)
    }

    /// Its lab directory (configuration, database, access log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// slapd's access log: one `SRCH` line per search it answered (`loglevel stats`).
    pub fn access_log(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    /// The Postfix `ldap:` table that looks recipients up through the proxy.
    pub fn postfix_table(&self, into: &Path) -> Result<PathBuf, LabError> {
        let path = into.join("recipients-ldap.cf");
        let text = format!(
            "server_host = ldap://{}/
version = 3
search_base = {BASE}
query_filter = (mail=%s)
result_attribute = mail
bind = no
timeout = 10
",
            self.proxy.addr()
        );
        std::fs::write(&path, text).map_err(|e| io("write the ldap table", e))?;
        Ok(path)
    }

    fn wait_ready(&mut self, addr: SocketAddr) -> Result<(), LabError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            let exited = self
                .slapd
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(self.access_log()).unwrap_or_default();
                let last: Vec<&str> = log.lines().rev().take(3).collect();
                return Err(LabError::Failed(format!(
                    "lab: slapd did not start: {}",
                    last.into_iter().rev().collect::<Vec<_>>().join("; ")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        if let Some(mut c) = self.slapd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        super::leftovers::stop_processes(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// slapd's configuration: the schemas an `inetOrgPerson` with `mail` needs, an MDB
/// database in the lab directory indexed on `mail` (a lookup is one indexed search, as a
/// site would run it), anonymous reads (slapd's default access), `stats` logging.
fn slapd_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {d}/slapd.pid
argsfile {d}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
loglevel stats
database mdb
maxsize 1073741824
suffix \"{BASE}\"
rootdn \"cn=admin,{BASE}\"
directory {d}/db
index mail eq
"
    )
}

/// The base entry and one `inetOrgPerson` per recipient, numbered.
fn ldif(recipients: &[String]) -> String {
    let mut out = format!(
        "dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\ndc: mailbench\no: mailbench\n\n"
    );
    for (i, r) in recipients.iter().enumerate() {
        out.push_str(&format!(
            "dn: uid=u{i},{BASE}\nobjectClass: inetOrgPerson\nuid: u{i}\ncn: u{i}\nsn: u{i}\nmail: {r}\n\n"
        ));
    }
    out
}

/// `SRCH` lines of slapd's access log that start a search (`SRCH base=`), the count the
/// proxy's must equal.
pub fn searches_logged(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" SRCH base="))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipient_is_one_entry_under_the_base() {
        let text = ldif(&["a@x.test".into(), "b@x.test".into()]);
        assert_eq!(text.matches("objectClass: inetOrgPerson").count(), 2);
        assert!(text.contains("dn: uid=u1,dc=mailbench,dc=test\n"));
        assert!(text.contains("mail: b@x.test\n"));
    }
}
