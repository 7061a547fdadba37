//! A disposable Dovecot (IMAP, POP3, LMTP) for mailbox benchmarks: its own configuration,
//! run and state directories, log and mail in a temporary directory, listeners on free
//! loopback ports, users in a passwd-file (no system accounts: every mailbox belongs to
//! nobody), mail kept as maildir or mdbox on a RAM disk or on disk. Started with
//! `dovecot -c FILE`, stopped and removed on drop; never touches the system's Dovecot.
//! Checked on Debian 12's Dovecot 2.3.19.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::fs::queue::LazyQueue;
use super::host::{self, QueueDir, io};
use super::{
    LabError, LabServer, MailFormat, QueueKind, ServerMetric, StoreEndpoints, StoreLab,
    StoreOptions, StoreUser,
};

const DOVECOT: &str = "/usr/sbin/dovecot";
const DOVECONF: &str = "/usr/bin/doveconf";
const DOVEADM: &str = "/usr/bin/doveadm";

/// The running lab; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Lab {
    dir: PathBuf,
    mail: QueueDir,
    name: String,
    endpoints: StoreEndpoints,
    users: Vec<StoreUser>,
    notices: Vec<String>,
    starttls: bool,
    server_stats: bool,
    /// The mail directory as a LazyFS mount (`--fault power-loss`), whose power a crash
    /// cuts; unmounted when the lab stops, after Dovecot.
    lazy: Option<std::sync::Mutex<LazyQueue>>,
}

/// Dovecot's metrics the lab defines with `--server-stats` (event → name in the results;
/// logins are grouped by success, IMAP commands by name). Durations are microseconds.
const METRICS: &str = "metric logins {
  filter = event=auth_request_finished
  group_by = success
}
metric deliveries {
  filter = event=mail_delivery_finished
}
metric imap {
  filter = event=imap_command_finished
  group_by = cmd_name
}
";

/// Reads `doveadm stats dump` (a header, then tab-separated name, field, count, sum, min,
/// max, avg, median, stddev, %95): the lab's metrics, with `logins_yes` renamed
/// `logins_ok` and the ungrouped `imap` total left out.
fn parse_stats_dump(text: &str) -> Vec<ServerMetric> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let int = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
            let name = match *f.first()? {
                "imap" => return None,
                "logins_yes" => "logins_ok".to_string(),
                other => other.to_string(),
            };
            Some(ServerMetric {
                name,
                count: int(2)?,
                mean_us: f.get(6)?.parse().ok()?,
                p50_us: int(7)?,
                p95_us: int(9)?,
                max_us: int(5)?,
            })
        })
        .collect()
}

/// Dovecot's line in the lab registry. Its settings flag is `--store-conf`, as every
/// store's (`--doveconf` stays an alias, never the name a message tells the user).
pub const KIND: super::Store = super::Store {
    name: "dovecot",
    title: "Dovecot",
    about: "Dovecot (IMAP, POP3, LMTP) from Debian's packages",
    settings: super::SettingsFlag {
        flag: "--store-conf",
        example: "mail_fsync=always",
    },
    check,
    start: |opts| Ok(Box::new(Lab::start(opts)?)),
    faults: true,
};

/// Checks that a Dovecot lab can run here; the error says how to fix it.
pub fn check() -> Result<(), String> {
    for (bin, package) in [
        (DOVECOT, "dovecot-core"),
        ("/usr/lib/dovecot/imap", "dovecot-imapd"),
        ("/usr/lib/dovecot/pop3", "dovecot-pop3d"),
        ("/usr/lib/dovecot/lmtp", "dovecot-lmtpd"),
    ] {
        if !Path::new(bin).exists() {
            return Err(format!(
                "{package} is not installed; run scripts/install-deps.sh (or apt-get install dovecot-imapd dovecot-pop3d dovecot-lmtpd)"
            ));
        }
    }
    host::check_root("the Dovecot lab")
}

impl Lab {
    /// Starts Dovecot; retries on other ports when one was taken meanwhile.
    pub fn start(opts: &StoreOptions) -> Result<Lab, LabError> {
        check().map_err(LabError::Failed)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Lab::start_once(opts) {
                Err(LabError::PortTaken(_)) if attempt < 3 => continue,
                other => return other,
            }
        }
    }

    fn start_once(opts: &StoreOptions) -> Result<Lab, LabError> {
        let tls_port = || -> Result<Option<SocketAddr>, LabError> {
            Ok(match opts.starttls {
                true => Some(SocketAddr::from(([127, 0, 0, 1], host::free_port()?))),
                false => None,
            })
        };
        let dir = host::instance_dir(0)?;
        let (mail, notice) = QueueDir::make(&dir, "mail", 0, opts.placement == QueueKind::Tmpfs)?;
        // The mail on LazyFS for a power cut: Dovecot's sockets and pid file stay in its
        // run directory, beside it, so nothing of LazyFS's missing `mknod` matters.
        let lazy = match opts.placement {
            QueueKind::Lazyfs => Some(std::sync::Mutex::new(
                LazyQueue::make(&dir, "mail", &[])
                    .map_err(|e| LabError::Failed(format!("lab dovecot: mail on LazyFS: {e}")))?,
            )),
            _ => None,
        };
        let lab = Lab {
            name: format!("store-{:08x}.mailbench.test", fastrand::u32(..)),
            endpoints: StoreEndpoints {
                imap: SocketAddr::from(([127, 0, 0, 1], host::free_port()?)),
                pop3: SocketAddr::from(([127, 0, 0, 1], host::free_port()?)),
                lmtp: SocketAddr::from(([127, 0, 0, 1], host::free_port()?)),
                imaps: tls_port()?,
                pop3s: tls_port()?,
            },
            users: opts.user_list(),
            notices: notice.into_iter().collect(),
            starttls: opts.starttls,
            server_stats: opts.server_stats,
            dir,
            mail,
            lazy,
        };
        // On any error from here, dropping `lab` stops what was started and removes it.
        lab.write_files(opts)?;
        lab.check_settings(&opts.settings)?;
        lab.launch()?;
        let mut lab = lab;
        let log = lab.dir.join("log/dovecot.log");
        // Dovecot's processes log through its log process, a moment later: what they said
        // while starting is in the file once the greeting probes' own `pop3-login:` line
        // is (a deadline, for a logging setting that leaves it out; 1 s was passed once on
        // a loaded CI machine, and the start's complaints went unsaid).
        let probed = Instant::now() + Duration::from_secs(5);
        while Instant::now() < probed
            && !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("pop3-login: "))
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let said = host::start_complaints(&log, &["Fatal: ", "Error: ", "Warning: "], "Dovecot");
        lab.notices.extend(said);
        Ok(lab)
    }

    /// Starts the master on the lab's configuration (a first start, or the restart after a
    /// crash: the stale pid file of a killed master is no obstacle) and waits until IMAP
    /// and POP3 greet.
    fn launch(&self) -> Result<(), LabError> {
        let conf = self.conf();
        // The master daemonizes and keeps inherited pipes open: its start-up errors go to a
        // file instead, read when it fails.
        let errors = self.dir.join("log/start.err");
        let err_file = std::fs::File::create(&errors).map_err(|e| io("create the start log", e))?;
        let status = super::command::status(
            Command::new(DOVECOT)
                .args(["-c", &conf])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(err_file),
            super::command::SETUP,
            "dovecot",
        )
        .map_err(|e| LabError::Failed(format!("lab dovecot: {e}")))?;
        if !status.success() {
            let reason = std::fs::read_to_string(&errors).unwrap_or_default();
            return Err(LabError::Failed(format!(
                "lab: dovecot did not start: {}",
                reason.trim()
            )));
        }
        let pids = || self.pids();
        host::wait_for_greeting(self.endpoints.imap, &self.name, "dovecot", &pids)?;
        host::wait_for_greeting(self.endpoints.pop3, &self.name, "dovecot", &pids)
    }

    fn conf(&self) -> String {
        self.dir.join("dovecot.conf").display().to_string()
    }

    /// The users file, the mail root owned by nobody, the certificate, dovecot.conf.
    fn write_files(&self, opts: &StoreOptions) -> Result<(), LabError> {
        let d = &self.dir;
        for sub in ["run", "state", "log"] {
            std::fs::create_dir_all(d.join(sub))
                .map_err(|e| io("create the lab directories", e))?;
        }
        let (uid, gid) = host::nobody()?;
        host::chown(&self.mail.path, uid, gid)?;
        host::set_mode(&self.mail.path, 0o755);
        let mut users = String::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.password.contains(':') || u.address.contains(':') {
                return Err(LabError::Setting(format!(
                    "user {} has a ':' in its name or password; the passwd-file cannot hold it",
                    u.address
                )));
            }
            let home = self.mail.path.join(format!("u{}", i + 1));
            let _ = writeln!(
                users,
                "{}:{{PLAIN}}{}:{uid}:{gid}::{}::",
                u.address,
                u.password,
                home.display()
            );
        }
        std::fs::write(d.join("users"), users).map_err(|e| io("write the users file", e))?;
        host::write_users_list(&self.users_file(), &self.users)?;
        if self.starttls {
            host::write_tls_files(d, &self.name)?;
        }
        let conf = self.dovecot_conf(opts);
        std::fs::write(d.join("dovecot.conf"), conf).map_err(|e| io("write dovecot.conf", e))
    }

    /// The configuration. Why each part: everything Dovecot writes (run, state, log) in the
    /// lab directory; users and their passwords in a passwd-file, logging in in clear text
    /// (no TLS unless asked); listeners on this lab's ports only (no IMAPS/POP3S, no system
    /// ports); LMTP saving to `user+folder@` folders, creating them, so that population can
    /// fill several; and the limits that cap a benchmark before the hardware does raised:
    /// 10 connections per user and address (every generator connection comes from
    /// 127.0.0.1), 100 processes per service and 1,024 imap and pop3 processes (one per
    /// session); and the per-IP authentication penalty off.
    fn dovecot_conf(&self, opts: &StoreOptions) -> String {
        let d = self.dir.display();
        let mail_location = match opts.mail_format {
            MailFormat::Maildir => "maildir:~/Maildir",
            MailFormat::Mdbox => "mdbox:~/mdbox",
        };
        let ssl = if self.starttls {
            format!("ssl = yes\nssl_cert = <{d}/tls.crt\nssl_key = <{d}/tls.key\n")
        } else {
            "ssl = no\n".to_string()
        };
        // A listener on its address, or off (port 0) when there is none.
        let inet = |name: &str, addr: Option<SocketAddr>| match addr {
            Some(a) => format!(
                "  inet_listener {name} {{\n    address = {}\n    port = {}\n  }}\n",
                a.ip(),
                a.port()
            ),
            None => format!("  inet_listener {name} {{\n    port = 0\n  }}\n"),
        };
        let mut c = format!(
            "base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/log/dovecot.log
listen = 127.0.0.1
protocols = imap pop3 lmtp
{ssl}disable_plaintext_auth = no
auth_mechanisms = plain login apop
default_internal_user = dovecot
default_login_user = dovenull
login_greeting = {name} ready.
mail_location = {mail_location}
default_process_limit = 5000
default_client_limit = 20000
lmtp_save_to_detail_mailbox = yes
lda_mailbox_autocreate = yes
{imap_service}{pop3_service}protocol imap {{
  mail_max_userip_connections = 100000
}}
protocol pop3 {{
  mail_max_userip_connections = 100000
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {d}/users
}}
userdb {{
  driver = passwd-file
  args = {d}/users
}}
",
            name = self.name,
            imap_service = service_block("imap", &opts.settings),
            pop3_service = service_block("pop3", &opts.settings),
        );
        let e = &self.endpoints;
        c += &format!(
            "service imap-login {{\n{}{}}}\n",
            inet("imap", Some(e.imap)),
            inet("imaps", e.imaps)
        );
        c += &format!(
            "service pop3-login {{\n{}{}}}\n",
            inet("pop3", Some(e.pop3)),
            inet("pop3s", e.pop3s)
        );
        c += &format!("service lmtp {{\n{}}}\n", inet("lmtp", Some(e.lmtp)));
        // Every simulated user logs in from 127.0.0.1: the per-IP brute-force penalty
        // (2, 4, 8 … 15 s after failed logins) would charge one user's failure to all.
        c += "service anvil {\n  unix_listener anvil-auth-penalty {\n    mode = 0\n  }\n}\n";
        if opts.server_stats {
            c += METRICS;
        }
        for (k, v) in opts.settings.iter().filter(|(k, _)| !in_service_block(k)) {
            let _ = writeln!(c, "{k} = {v}");
        }
        c
    }

    /// Dovecot refuses an unknown or bad setting when it reads its configuration; `doveconf`
    /// says which and why, so a `--store-conf` value it refuses is named in one line.
    fn check_settings(&self, settings: &[(String, String)]) -> Result<(), LabError> {
        let out = Command::new(DOVECONF)
            .args(["-c", &self.conf(), "-n"])
            .output()
            .map_err(|e| io("run doveconf", e))?;
        if out.status.success() {
            return Ok(());
        }
        let reason = String::from_utf8_lossy(&out.stderr)
            .lines()
            .find(|l| l.contains("Fatal") || l.contains("Error"))
            .unwrap_or("no reason given")
            .trim()
            .to_string();
        // Dovecot names either the setting or only the line it is on.
        let conf = std::fs::read_to_string(self.conf()).unwrap_or_default();
        let on_line = reason
            .split("line ")
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| conf.lines().nth(n.saturating_sub(1)))
            .and_then(|l| l.split('=').next())
            .map(str::trim)
            .unwrap_or_default();
        let named = settings
            .iter()
            .find(|(k, _)| reason.contains(k.as_str()) || k == on_line)
            .map(|(k, _)| k.clone());
        Err(match named {
            Some(k) => LabError::Setting(format!(
                "{} {k}: Dovecot refused it ({reason}); fix or drop the value",
                KIND.settings.flag
            )),
            None => LabError::Failed(format!("lab: Dovecot refused its configuration: {reason}")),
        })
    }

    /// A setting's value for `protocol` as Dovecot will use it.
    fn effective(&self, protocol: &str, key: &str) -> String {
        Command::new(DOVECONF)
            .args([
                "-c",
                &self.conf(),
                "-f",
                &format!("protocol={protocol}"),
                "-h",
                key,
            ])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }
}

impl LabServer for Lab {
    fn pids(&self) -> Vec<u32> {
        host::trees(&[self.dir.join("run/master.pid")])
    }

    fn logs(&self) -> Vec<PathBuf> {
        vec![self.dir.join("log/dovecot.log")]
    }

    fn dirs(&self) -> Vec<PathBuf> {
        vec![self.dir.clone(), self.mail.path.clone()]
    }

    fn notices(&self) -> &[String] {
        &self.notices
    }

    fn describe(&self) -> Vec<String> {
        vec![host::store_line(
            "dovecot",
            &self.endpoints,
            &self.users,
            &self.conf(),
        )]
    }

    fn certificate(&self) -> Option<PathBuf> {
        self.starttls.then(|| self.dir.join("tls.crt"))
    }
}

impl StoreLab for Lab {
    fn endpoints(&self) -> StoreEndpoints {
        self.endpoints
    }

    fn users(&self) -> &[StoreUser] {
        &self.users
    }

    fn users_file(&self) -> PathBuf {
        self.dir.join("users.txt")
    }

    fn limits(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = [
            ("imap", "mail_max_userip_connections"),
            ("pop3", "mail_max_userip_connections"),
        ]
        .iter()
        .map(|(p, k)| (format!("{p} {k}"), self.effective(p, k)))
        .collect();
        // Each service's own limits, its 0 resolved to the default it stands for.
        for service in ["imap", "imap-login", "pop3", "pop3-login"] {
            for key in ["process_limit", "client_limit"] {
                let mut v = self.effective("imap", &format!("service/{service}/{key}"));
                if v == "0" {
                    v = self.effective("imap", &format!("default_{key}"));
                }
                out.push((format!("service {service} {key}"), v));
            }
        }
        out
    }

    fn server_stats(&self) -> Vec<ServerMetric> {
        self.stats_dump()
    }

    /// The master's whole tree killed at once (and any process still working in the mail);
    /// with `cut_power`, then the LazyFS mail drops what was not fsynced, after its report
    /// of what that is.
    fn crash(&self, cut_power: bool) -> Result<super::Crashed, String> {
        let master = [self.dir.join("run/master.pid")];
        let mut crashed = super::Crashed {
            killed: super::crash::kill_trees(&master, &[&self.mail.path])
                .map_err(|e| format!("lab dovecot: {e}"))?,
            ..super::Crashed::default()
        };
        // Dovecot refuses to start while its pid file names a process that exists, and
        // the killed master may linger as a zombie nobody reaps: the file goes with it.
        let _ = std::fs::remove_file(&master[0]);
        if !cut_power {
            return Ok(crashed);
        }
        let Some(q) = &self.lazy else {
            return Err("lab dovecot: a power cut needs the mail on LazyFS".into());
        };
        let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
        let u = q.unsynced().map_err(|e| format!("lab dovecot: {e}"))?;
        q.cut_power().map_err(|e| format!("lab dovecot: {e}"))?;
        crashed.unsynced_files = Some(u.files);
        crashed.unsynced_bytes = Some(u.bytes);
        Ok(crashed)
    }

    /// `dovecot -c CONF` again, on the same mail, awaited until it greets.
    fn restart(&self) -> Result<(), String> {
        self.launch()
            .map_err(|e| format!("lab dovecot: restart after the crash: {e}"))
    }
}

impl Lab {
    /// `doveadm stats dump` of the lab's metrics.
    fn stats_dump(&self) -> Vec<ServerMetric> {
        if !self.server_stats {
            return Vec::new();
        }
        Command::new(DOVEADM)
            .args(["-c", &self.conf(), "stats", "dump"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| parse_stats_dump(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_default()
    }
}

impl Drop for Lab {
    /// `doveadm stop` and the master's exit get `command::STOP`; then whatever of the lab
    /// still runs is ended by force.
    fn drop(&mut self) {
        let pid_file = self.dir.join("run/master.pid");
        let tree = host::trees(std::slice::from_ref(&pid_file));
        let deadline = std::time::Instant::now() + super::command::STOP;
        let stopped = super::command::run(
            Command::new(DOVEADM).args(["-c", &self.conf(), "stop"]),
            super::command::STOP,
            "`doveadm stop`",
        );
        match (stopped, host::read_pid(&pid_file)) {
            (Err(why), _) => host::say(&format!(
                "mailbench: lab dovecot: {why}; ending the lab's processes"
            )),
            (Ok(_), Some(pid)) => host::wait_exit(
                pid,
                deadline.saturating_duration_since(std::time::Instant::now()),
            ),
            (Ok(_), None) => {}
        }
        // Whatever `doveadm stop` left running (it was cut short, or the master hung).
        super::leftovers::end(
            &[&self.dir, &self.mail.path],
            &tree,
            std::time::Duration::from_secs(2),
        );
        // LazyFS unmounted once nothing of Dovecot uses the mail.
        self.lazy = None;
        self.mail.remove();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a setting goes into the lab's imap or pop3 service block: doveconf's names
/// for a service's settings, `service/imap/process_limit`, which seed 001's "a store held
/// to fewer processes" sets.
fn in_service_block(key: &str) -> bool {
    key.starts_with("service/imap/") || key.starts_with("service/pop3/")
}

/// Service `name`'s block: the lab's process limit, each `service/NAME/KEY` setting
/// replacing the lab's value of KEY or added.
fn service_block(name: &str, settings: &[(String, String)]) -> String {
    let prefix = format!("service/{name}/");
    let mut lines = vec![("process_limit".to_string(), "20000".to_string())];
    for (k, v) in settings {
        if let Some(key) = k.strip_prefix(&prefix) {
            lines.retain(|(x, _)| x != key);
            lines.push((key.to_string(), v.clone()));
        }
    }
    let body: String = lines
        .iter()
        .map(|(k, v)| format!("  {k} = {v}\n"))
        .collect();
    format!("service {name} {{\n{body}}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_setting_goes_into_its_block_in_place_of_the_labs() {
        let set = |k: &str, v: &str| (k.to_string(), v.to_string());
        let s = [
            set("service/imap/process_limit", "3"),
            set("service/imap/client_limit", "1"),
            set("mail_fsync", "always"),
        ];
        assert_eq!(
            service_block("imap", &s),
            "service imap {\n  process_limit = 3\n  client_limit = 1\n}\n"
        );
        assert_eq!(
            service_block("pop3", &s),
            "service pop3 {\n  process_limit = 20000\n}\n"
        );
        assert!(in_service_block("service/pop3/process_limit"));
        assert!(
            !in_service_block("service/lmtp/process_limit"),
            "doveconf judges it"
        );
    }

    #[test]
    fn a_stats_dump_gives_the_lab_metrics() {
        // As Dovecot 2.3.19 printed it after 7 logins (5 good), 6 deliveries and 3 IMAP
        // commands.
        let dump = "metric_name\tfield\tcount\tsum\tmin\tmax\tavg\tmedian\tstddev\t%95
logins\tduration\t7\t368\t39\t67\t52.57\t54\t8.12\t67
logins_yes\tduration\t5\t265\t39\t67\t53.00\t54\t9.14\t67
deliveries\tduration\t6\t4824\t426\t1886\t804.00\t477\t544.20\t1886
imap\tduration\t3\t325\t76\t173\t108.33\t76\t45.73\t173
imap_SELECT\tduration\t1\t173\t173\t173\t173.00\t173\t0.00\t173
";
        let m = parse_stats_dump(dump);
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["logins", "logins_ok", "deliveries", "imap_SELECT"]);
        assert_eq!(
            m[2],
            ServerMetric {
                name: "deliveries".into(),
                count: 6,
                mean_us: 804.0,
                p50_us: 477,
                p95_us: 1886,
                max_us: 1886,
            }
        );
        assert!(parse_stats_dump("metric_name\tfield\nbroken\tline\n").is_empty());
    }
}
