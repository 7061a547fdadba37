//! A private, throwaway Postfix instance for tests (see shared LAB-NOTES): its own config,
//! queue and log in a temporary directory, smtpd on a free loopback port, relaying everything
//! to a given host:port. Stopped and removed on drop; never touches /etc/postfix.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::{TempDir, free_port, require, wait_until};

/// A running private Postfix.
pub struct Postfix {
    /// Its directory (config, queue, data, maillog).
    pub dir: TempDir,
    /// smtpd's port on 127.0.0.1.
    pub port: u16,
}

impl Postfix {
    /// Starts an instance relaying to `relay_port` on 127.0.0.1; `None` when Postfix is not
    /// installed outside CI, or the tests do not run as root (Postfix needs it).
    pub fn start(relay_port: u16) -> Option<Postfix> {
        let postfix = require("postfix")?;
        // Postfix refuses to start as a normal user.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        if !root {
            if std::env::var_os("CI").is_some() {
                panic!("CI must run the Postfix tests as root");
            }
            eprintln!("SKIP: Postfix tests need root");
            return None;
        }
        let dir = TempDir::new("postfix");
        let port = free_port();
        let d = dir.0.display().to_string();
        for sub in ["queue", "data"] {
            std::fs::create_dir_all(dir.0.join(sub)).expect("mkdir");
        }
        let chown = Command::new("chown")
            .args(["postfix:postfix", &format!("{d}/data")])
            .status()
            .expect("chown");
        assert!(chown.success());
        let main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {d}/queue
data_directory = {d}/data
mail_owner = postfix
myhostname = lab.mailbench.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:{relay_port}
smtp_dns_support_level = disabled
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
local_recipient_maps =
default_process_limit = 256
default_destination_concurrency_limit = 100
smtp_destination_concurrency_limit = 100
in_flow_delay = 0
smtputf8_enable = no
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
"
        );
        std::fs::write(dir.0.join("main.cf"), main_cf).expect("main.cf");
        let master = std::fs::read_to_string("/etc/postfix/master.cf").expect("Debian's master.cf");
        let mut out = String::new();
        for line in master.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let service_line = !line.starts_with(' ')
                && !line.starts_with('\t')
                && !line.starts_with('#')
                && fields.len() >= 8;
            if line.starts_with("#postlog") {
                out.push_str(&line[1..].replace(" - ", " n "));
            } else if service_line && fields[0] == "smtp" && fields[1] == "inet" {
                out.push_str(&format!("127.0.0.1:{port} inet n - n - - smtpd"));
            } else if service_line {
                let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
                f[4] = "n".into(); // no chroot: the queue directory is not populated for one
                out.push_str(&f.join(" "));
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        std::fs::write(dir.0.join("master.cf"), out).expect("master.cf");
        let started = Command::new(&postfix)
            .args(["-c", &d, "start"])
            .output()
            .expect("postfix start");
        assert!(
            started.status.success(),
            "postfix start failed: {}{}\nmaillog: {}",
            String::from_utf8_lossy(&started.stdout),
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(dir.0.join("maillog")).unwrap_or_default()
        );
        let pf = Postfix { dir, port };
        assert!(
            wait_until(Duration::from_secs(20), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            }),
            "Postfix smtpd did not listen on {port}"
        );
        Some(pf)
    }

    /// The maillog path.
    pub fn maillog(&self) -> PathBuf {
        self.dir.0.join("maillog")
    }

    /// `status=sent` lines in the maillog.
    pub fn sent_count(&self) -> usize {
        std::fs::read_to_string(self.maillog())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("status=sent"))
            .count()
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        let d = self.dir.0.display().to_string();
        let _ = Command::new("postfix").args(["-c", &d, "stop"]).output();
        let pid_file = self.dir.0.join("queue/pid/master.pid");
        wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok())
                .is_none_or(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        });
    }
}
