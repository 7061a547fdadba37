//! A private view of the file system for an MTA whose paths are compiled in (OpenSMTPD's
//! spool, Sendmail's log socket) or that looks up its own host name: the MTA runs in its
//! own mount and UTS namespaces (`unshare`, util-linux), where the lab's directories are
//! mounted over those paths, `/etc/hosts` names it, `/etc/resolv.conf` can name the test
//! DNS server and `/dev/log` is the lab's log socket. Nothing outside changes: the
//! mounts vanish with the namespace's last process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the namespace looks like.
#[derive(Debug, Default, Clone)]
pub struct Isolation {
    /// The host name inside (its UTS namespace), which `/etc/hosts` maps to 127.0.0.1.
    pub hostname: String,
    /// Directories hidden under an empty tmpfs (then filled by `dirs` and `binds`).
    pub tmpfs: Vec<PathBuf>,
    /// Directories made inside (after the tmpfs mounts).
    pub dirs: Vec<PathBuf>,
    /// `(source outside, target inside)`: the lab's files and directories over the
    /// MTA's compiled-in paths.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// The lab's log socket, as `/dev/log` (a private `/dev` with the usual devices).
    pub dev_log: Option<PathBuf>,
    /// Where the instance keeps its own files (the hosts file, the scratch mount point).
    pub dir: PathBuf,
}

/// Quotes a path or word for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn q(p: &Path) -> String {
    quote(&p.display().to_string())
}

impl Isolation {
    /// The `sh` script that builds the namespace and then runs its arguments.
    fn script(&self) -> String {
        let mut s = String::from("set -e\n");
        s += &format!("hostname {}\n", quote(&self.hostname));
        s += &format!("mount --bind {} /etc/hosts\n", q(&self.dir.join("hosts")));
        for t in &self.tmpfs {
            s += &format!("mount -t tmpfs -o mode=755,size=16m tmpfs {}\n", q(t));
        }
        for d in &self.dirs {
            s += &format!("mkdir -p {}\n", q(d));
        }
        for (from, to) in &self.binds {
            if from.is_file() {
                s += &format!("[ -e {t} ] || touch {t}\n", t = q(to));
            } else {
                s += &format!("mkdir -p {}\n", q(to));
            }
            s += &format!("mount --bind {} {}\n", q(from), q(to));
        }
        if let Some(sock) = &self.dev_log {
            // A private /dev: the host's is kept at a scratch point to bind the few
            // devices a daemon opens, then let go.
            let host_dev = q(&self.dir.join("hostdev"));
            s += &format!("mkdir -p {host_dev}\nmount --bind /dev {host_dev}\n");
            s += "mount -t tmpfs -o mode=755,size=64k tmpfs /dev\n";
            s += &format!(
                "for n in null zero random urandom; do touch /dev/$n; mount --bind {host_dev}/$n /dev/$n; done\n"
            );
            s += &format!("umount {host_dev}\nln -s {} /dev/log\n", q(sock));
        }
        s += "exec \"$@\"\n";
        s
    }

    /// A command that runs `program args…` inside the namespace. Writes the hosts file.
    pub fn command(&self, program: &Path, args: &[String]) -> std::io::Result<Command> {
        std::fs::write(
            self.dir.join("hosts"),
            format!(
                "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {} {}\n",
                self.hostname,
                self.hostname.split('.').next().unwrap_or_default()
            ),
        )?;
        let mut c = Command::new("unshare");
        c.args(["--mount", "--uts", "--propagation", "private", "sh", "-c"])
            .arg(self.script())
            .arg("sh")
            .arg(program)
            .args(args);
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_mounts_in_order_and_runs_the_program_last() {
        let iso = Isolation {
            hostname: "lab0-x.mailbench.test".into(),
            tmpfs: vec!["/var/spool".into()],
            dirs: vec!["/var/spool/smtpd".into()],
            binds: vec![("/tmp/it's".into(), "/var/spool/smtpd".into())],
            dev_log: Some("/tmp/lab/log.sock".into()),
            dir: "/tmp/lab".into(),
        };
        let s = iso.script();
        let at = |needle: &str| {
            s.find(needle)
                .unwrap_or_else(|| panic!("expected {needle:?} in:\n{s}"))
        };
        assert!(at("hostname 'lab0-x.mailbench.test'") < at("tmpfs '/var/spool'"));
        assert!(at("tmpfs '/var/spool'") < at("mkdir -p '/var/spool/smtpd'"));
        assert!(at("mount --bind '/tmp/it'\\''s' '/var/spool/smtpd'") < at("exec \"$@\""));
        assert!(at("ln -s '/tmp/lab/log.sock' /dev/log") < at("exec \"$@\""));
    }
}
