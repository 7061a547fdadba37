//! A disposable Cyrus IMAP (IMAP, POP3, LMTP) for mailbox benchmarks, the second store a
//! capacity comparison needs beside Dovecot: its own imapd.conf and cyrus.conf in a
//! temporary directory, its mailbox database and mail partition together on a RAM disk or
//! on disk, listeners on free loopback ports, users in a private sasldb (no system
//! accounts), each INBOX made as its first mail arrives or its user first logs in. Cyrus
//! logs only through syslog, so its master runs in a namespace whose `/dev/log` is the
//! lab's log socket (see `isolate`, `syslog`). It runs from Debian 12's packages (3.6.1)
//! unpacked by `scripts/install-cyrus.sh` beside the system's Dovecot; started with
//! `master -d`, stopped and removed on drop.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::host::{self, QueueDir, io};
use super::{
    LabError, LabServer, MailFormat, QueueKind, ServerMetric, SettingsFlag, Store, StoreEndpoints,
    StoreLab, StoreOptions, StoreUser,
};

/// Where scripts/install-cyrus.sh unpacked Debian's packages: installed with apt-get,
/// Cyrus would remove Dovecot's IMAP and POP3 servers (both provide `imap-server`).
fn root() -> PathBuf {
    std::env::var_os("MAILBENCH_STORES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/mailbench/stores"))
        .join("cyrus")
}

/// A Cyrus program in the unpacked tree.
fn bin(program: &str) -> PathBuf {
    root().join("usr/lib/cyrus/bin").join(program)
}

/// The unpacked tree's libraries (Cyrus's own libcyrus*), for its programs' loader: the
/// directory under usr/lib that holds libcyrus.so.0, whatever the architecture.
fn library_path() -> PathBuf {
    let lib = root().join("usr/lib");
    std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("libcyrus.so.0").exists())
        .unwrap_or(lib)
}
const SASLPASSWD: &str = "/usr/sbin/saslpasswd2";
/// The user Cyrus drops to; everything it writes must be its own.
const OWNER: &str = "cyrus:mail";
/// Processes per service: Cyrus serves one connection per process, so these cap sessions
/// (raised far above a benchmark's, as the Dovecot lab's are).
const MAXCHILD: [(&str, u32); 3] = [("imap", 20_000), ("pop3", 20_000), ("lmtp", 5_000)];
/// The master's listen queue (its default of 32 turns a burst of connects into retries).
const BACKLOG: u32 = 1024;

/// Cyrus's line in the lab registry.
pub const KIND: Store = Store {
    name: "cyrus",
    title: "Cyrus",
    about: "Cyrus IMAP (IMAP, POP3, LMTP) from Debian's packages",
    settings: SettingsFlag {
        flag: "--store-conf",
        example: "fulldirhash=1",
    },
    check,
    start: |opts| Ok(Box::new(Lab::start(opts)?)),
    faults: false,
};

/// The running lab; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Lab {
    dir: PathBuf,
    mail: QueueDir,
    name: String,
    admin_password: String,
    endpoints: StoreEndpoints,
    users: Vec<StoreUser>,
    notices: Vec<String>,
    starttls: bool,
    /// Its imapd.conf, as written (the lab's options with the user's replacing them).
    conf: Vec<(String, String)>,
    capture: Option<super::syslog::Capture>,
}

/// Checks that a Cyrus lab can run here; the error says how to fix it.
pub fn check() -> Result<(), String> {
    for program in ["master", "imapd", "lmtpd", "pop3d"] {
        if !bin(program).exists() {
            return Err(format!(
                "Cyrus is not unpacked in {}; run scripts/install-deps.sh (or scripts/install-cyrus.sh)",
                root().display()
            ));
        }
    }
    if !Path::new(SASLPASSWD).exists() {
        return Err(
            "sasl2-bin is not installed; run scripts/install-deps.sh (or apt-get install sasl2-bin)"
                .into(),
        );
    }
    host::check_root("the Cyrus lab")
}

/// What the Dovecot lab offers that Cyrus has no counterpart for, refused by flag.
fn unsupported(opts: &StoreOptions) -> Result<(), LabError> {
    if opts.mail_format == MailFormat::Mdbox {
        return Err(LabError::Setting(
            "--mail-format mdbox: Cyrus keeps mail in its own format; drop --mail-format".into(),
        ));
    }
    if opts.server_stats {
        return Err(LabError::Setting(
            "--server-stats: the cyrus lab keeps no statistics of its own; drop the flag".into(),
        ));
    }
    Ok(())
}

/// A login name's local part and domain (`user1`, `store.test`); Cyrus keeps them apart.
fn split(address: &str) -> (&str, &str) {
    address.rsplit_once('@').unwrap_or((address, ""))
}

/// `conf` with each of `settings` replacing the option of its name, or added after: Cyrus
/// refuses an option given twice, so a user's value cannot simply follow the lab's.
fn overridden(
    mut conf: Vec<(String, String)>,
    settings: &[(String, String)],
) -> Vec<(String, String)> {
    for (k, v) in settings {
        match conf.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.clone(),
            None => conf.push((k.clone(), v.clone())),
        }
    }
    conf
}

/// A string as an IMAP quoted string.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl Lab {
    /// Starts Cyrus; retries on other ports when one was taken meanwhile.
    pub fn start(opts: &StoreOptions) -> Result<Lab, LabError> {
        check().map_err(LabError::Failed)?;
        unsupported(opts)?;
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
        let port = || -> Result<SocketAddr, LabError> {
            Ok(SocketAddr::from(([127, 0, 0, 1], host::free_port()?)))
        };
        let tls_port =
            || -> Result<Option<SocketAddr>, LabError> { opts.starttls.then(port).transpose() };
        let dir = host::instance_dir(0)?;
        let (mail, notice) = QueueDir::make(&dir, "mail", 0, opts.placement == QueueKind::Tmpfs)?;
        let mut lab = Lab {
            name: format!("store-{:08x}.mailbench.test", fastrand::u32(..)),
            admin_password: format!("{:016x}", fastrand::u64(..)),
            endpoints: StoreEndpoints {
                imap: port()?,
                pop3: port()?,
                lmtp: port()?,
                imaps: tls_port()?,
                pop3s: tls_port()?,
            },
            users: opts.user_list(),
            notices: notice.into_iter().collect(),
            starttls: opts.starttls,
            conf: Vec::new(),
            capture: None,
            dir,
            mail,
        };
        // On any error from here, dropping `lab` stops what was started and removes it.
        lab.conf = lab.imapd_conf(&opts.settings);
        lab.write_files()?;
        lab.check_settings(&opts.settings)?;
        lab.add_users()?;
        lab.run_master()?;
        let pids = || lab.pids();
        host::wait_for_greeting(lab.endpoints.imap, &lab.name, "cyrus", &pids)?;
        host::wait_for_greeting(lab.endpoints.pop3, &lab.name, "cyrus", &pids)?;
        Ok(lab)
    }

    fn conf_path(&self) -> PathBuf {
        self.dir.join("imapd.conf")
    }

    /// The options, in order, each once (Cyrus refuses an option given twice): the lab's,
    /// then the user's, replacing a lab option of the same name. Why each: its database
    /// and mail in the lab's mail directory; users and their passwords in a sasldb,
    /// logging in in clear text (no TLS unless asked); an INBOX made by the first delivery
    /// or login (no admin step per user); `user/name@domain` names as the users log in;
    /// no cap on logins per user or per address (every generator connection comes from
    /// 127.0.0.1).
    fn imapd_conf(&self, settings: &[(String, String)]) -> Vec<(String, String)> {
        let d = self.dir.display();
        let m = self.mail.path.display();
        let mut conf: Vec<(String, String)> = [
            ("configdirectory", format!("{m}/conf")),
            ("defaultpartition", "default".into()),
            ("partition-default", format!("{m}/part")),
            ("servername", self.name.clone()),
            ("admins", "cyrus".into()),
            ("allowplaintext", "yes".into()),
            ("sasl_pwcheck_method", "auxprop".into()),
            ("sasl_auxprop_plugin", "sasldb".into()),
            ("sasl_sasldb_path", format!("{d}/sasldb2")),
            ("sasl_mech_list", "PLAIN LOGIN".into()),
            ("unixhierarchysep", "yes".into()),
            ("virtdomains", "userid".into()),
            ("lmtpsocket", format!("{d}/sock/lmtp")),
            ("idlesocket", format!("{d}/sock/idle")),
            ("notifysocket", format!("{d}/sock/notify")),
            ("autocreate_post", "yes".into()),
            ("autocreate_quota", "0".into()),
            ("maxlogins_per_user", "0".into()),
            ("maxlogins_per_host", "0".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if self.starttls {
            conf.push(("tls_server_cert".into(), format!("{d}/tls.crt")));
            conf.push(("tls_server_key".into(), format!("{d}/tls.key")));
        }
        overridden(conf, settings)
    }

    /// The services: IMAP, POP3 and LMTP (and IMAPS, POP3S) on the lab's ports, each with
    /// its process cap; the database recovered at start and checkpointed; `idled`, so
    /// that IDLE hears of new mail at once instead of polling.
    fn cyrus_conf(&self) -> String {
        let conf = self.conf_path();
        let c = conf.display();
        let e = &self.endpoints;
        let cap = |service: &str| {
            MAXCHILD
                .iter()
                .find(|(s, _)| *s == service)
                .map_or(0, |(_, n)| *n)
        };
        // Programs by their full path: the master looks for bare names where Debian's
        // package installs them, not in the unpacked tree.
        let run = |program: &str, flags: &str| format!("{} {flags}-C {c}", bin(program).display());
        let mut services = String::new();
        let mut add = |name: &str, cmd: String, addr: SocketAddr, cap: u32| {
            let _ = writeln!(
                services,
                "  {name} cmd=\"{cmd}\" listen=\"{addr}\" maxchild={cap}"
            );
        };
        add("imap", run("imapd", ""), e.imap, cap("imap"));
        add("pop3", run("pop3d", ""), e.pop3, cap("pop3"));
        add("lmtp", run("lmtpd", "-a "), e.lmtp, cap("lmtp"));
        if let Some(a) = e.imaps {
            add("imaps", run("imapd", "-s "), a, cap("imap"));
        }
        if let Some(a) = e.pop3s {
            add("pop3s", run("pop3d", "-s "), a, cap("pop3"));
        }
        format!(
            "START {{\n  recover cmd=\"{}\"\n}}\n\
             SERVICES {{\n{services}}}\n\
             EVENTS {{\n  checkpoint cmd=\"{}\" period=30\n}}\n\
             DAEMON {{\n  idled cmd=\"{}\"\n}}\n",
            run("ctl_cyrusdb", "-r "),
            run("ctl_cyrusdb", "-c "),
            run("idled", ""),
        )
    }

    /// The directories (Cyrus's own), the users list, the certificate, both configurations.
    /// Cyrus makes none of its configuration directory's parts itself: without `db` its
    /// every process assumes its databases need recovery, without `socket` no process
    /// hears `idled` (IDLE never wakes) and the service locks are off (as Debian's
    /// `makedirs` would make them).
    fn write_files(&self) -> Result<(), LabError> {
        let d = &self.dir;
        let m = &self.mail.path;
        let conf = [
            "db", "proc", "socket", "log", "msg", "user", "quota", "lock",
        ]
        .map(|sub| m.join("conf").join(sub));
        let own = [
            d.join("run"),
            d.join("sock"),
            d.join("log"),
            m.join("conf"),
            m.join("part"),
        ];
        for sub in own.into_iter().chain(conf) {
            std::fs::create_dir_all(&sub).map_err(|e| io("create the lab directories", e))?;
            host::chown_to(&sub, OWNER)?;
        }
        host::chown_to(m, OWNER)?;
        host::set_mode(m, 0o750);
        host::write_users_list(&self.users_file(), &self.users)?;
        if self.starttls {
            host::write_tls_files(d, &self.name)?;
            host::chown_to(&d.join("tls.key"), OWNER)?;
        }
        let conf: String = self
            .conf
            .iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect();
        std::fs::write(self.conf_path(), conf).map_err(|e| io("write imapd.conf", e))?;
        std::fs::write(d.join("cyrus.conf"), self.cyrus_conf())
            .map_err(|e| io("write cyrus.conf", e))
    }

    /// Cyrus starts with an option it does not know (and ignores it) and dies on a value
    /// it cannot read; `cyr_info conf-lint` says both, so a `--store-conf` value it
    /// refuses is named in one line before anything starts. It reads the master's
    /// configuration too (Debian 12's 3.6.1-4+deb12u5 does; it fails without one, and the
    /// lab leaves /etc alone), so it is given the lab's.
    fn check_settings(&self, settings: &[(String, String)]) -> Result<(), LabError> {
        let out = Command::new(bin("cyr_info"))
            .env("LD_LIBRARY_PATH", library_path())
            .arg("-C")
            .arg(self.conf_path())
            .arg("-M")
            .arg(self.dir.join("cyrus.conf"))
            .arg("conf-lint")
            .output()
            .map_err(|e| io("run cyr_info", e))?;
        let unknown = String::from_utf8_lossy(&out.stdout);
        let fatal = String::from_utf8_lossy(&out.stderr);
        let fatal = fatal.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        for (k, _) in settings {
            if unknown
                .lines()
                .any(|l| l.split(':').next() == Some(k.as_str()))
            {
                return Err(LabError::Setting(format!(
                    "--store-conf {k}: Cyrus has no such option; fix or drop the value"
                )));
            }
            if fatal.contains(&format!(" {k} ")) || fatal.contains(&format!("'{k}'")) {
                return Err(LabError::Setting(format!(
                    "--store-conf {k}: Cyrus refused it ({}); fix or drop the value",
                    fatal.trim()
                )));
            }
        }
        match out.status.success() {
            true => Ok(()),
            false => Err(LabError::Failed(format!(
                "lab: Cyrus refused its configuration: {}",
                fatal.trim()
            ))),
        }
    }

    /// Every user in the sasldb with its password, and the admin (in the server's own
    /// realm, so that it logs in as plain `cyrus`).
    fn add_users(&self) -> Result<(), LabError> {
        let db = self.dir.join("sasldb2");
        let admin = ("cyrus", self.name.as_str(), self.admin_password.as_str());
        let users = self.users.iter().map(|u| {
            let (local, domain) = split(&u.address);
            (local, domain, u.password.as_str())
        });
        for (local, realm, password) in std::iter::once(admin).chain(users) {
            let mut child = Command::new(SASLPASSWD)
                .arg("-f")
                .arg(&db)
                .args(["-p", "-c", "-u", realm, local])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| io("run saslpasswd2", e))?;
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(password.as_bytes());
            }
            let out = child
                .wait_with_output()
                .map_err(|e| io("run saslpasswd2", e))?;
            if !out.status.success() {
                return Err(LabError::Failed(format!(
                    "lab: saslpasswd2 refused user {local}@{realm}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        host::chown_to(&db, OWNER)
    }

    /// Starts the master in its namespace (its `/dev/log` the lab's log socket). It
    /// daemonizes and keeps inherited pipes open: its start-up errors go to a file.
    fn run_master(&mut self) -> Result<(), LabError> {
        let d = &self.dir;
        let capture = super::syslog::Capture::start(&d.join("log.sock"), &d.join("log/cyrus.log"))?;
        let iso = super::isolate::Isolation {
            hostname: self.name.clone(),
            dev_log: Some(capture.socket.clone()),
            dir: d.clone(),
            ..Default::default()
        };
        self.capture = Some(capture);
        let args = [
            "-C".to_string(),
            self.conf_path().display().to_string(),
            "-M".into(),
            d.join("cyrus.conf").display().to_string(),
            "-p".into(),
            d.join("run/master.pid").display().to_string(),
            "-l".into(),
            BACKLOG.to_string(),
            "-d".into(),
        ];
        let mut cmd = iso
            .command(&bin("master"), &args)
            .map_err(|e| io("prepare the namespace", e))?;
        // The master's services inherit it.
        cmd.env("LD_LIBRARY_PATH", library_path());
        let errors = d.join("log/start.err");
        let err_file = std::fs::File::create(&errors).map_err(|e| io("create the start log", e))?;
        let status = super::leftovers::own_group(&mut cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err_file)
            .status()
            .map_err(|e| io("run the Cyrus master", e))?;
        if status.success() {
            return Ok(());
        }
        let reason = std::fs::read_to_string(&errors).unwrap_or_default();
        Err(LabError::Failed(format!(
            "lab: cyrus did not start: {}",
            reason.trim()
        )))
    }

    /// Runs `commands` as the admin in one IMAP session, pipelined; a NO that `tolerated`
    /// accepts (e.g. a mailbox that exists) is no error.
    fn admin(&self, commands: &[String], tolerated: &str) -> Result<(), LabError> {
        let failed = |what: String| LabError::Failed(format!("lab: Cyrus admin session: {what}"));
        let stream = TcpStream::connect_timeout(&self.endpoints.imap, Duration::from_secs(5))
            .map_err(|e| failed(e.to_string()))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| failed(e.to_string()))?;
        let mut out = stream.try_clone().map_err(|e| failed(e.to_string()))?;
        let mut script = format!("a0 LOGIN cyrus {}\r\n", quoted(&self.admin_password));
        for (i, c) in commands.iter().enumerate() {
            let _ = write!(script, "a{} {c}\r\n", i + 1);
        }
        let _ = write!(script, "a{} LOGOUT\r\n", commands.len() + 1);
        out.write_all(script.as_bytes())
            .map_err(|e| failed(e.to_string()))?;
        let mut reader = BufReader::new(stream);
        let mut answered = 0;
        let mut line = String::new();
        while answered <= commands.len() + 1 {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => return Err(failed("the server closed the session".into())),
                Ok(_) => {}
                Err(e) => return Err(failed(e.to_string())),
            }
            let Some(rest) = line.strip_prefix('a') else {
                continue;
            };
            let Some((tag, reply)) = rest.split_once(' ') else {
                continue;
            };
            let Ok(n) = tag.parse::<usize>() else {
                continue;
            };
            answered += 1;
            let ok = reply.starts_with("OK") || (n > 0 && reply.contains(tolerated));
            if !ok {
                let what = match n {
                    0 => "LOGIN".to_string(),
                    n => commands.get(n - 1).cloned().unwrap_or_default(),
                };
                return Err(failed(format!("{what}: {}", reply.trim())));
            }
        }
        Ok(())
    }
}

impl LabServer for Lab {
    fn pids(&self) -> Vec<u32> {
        host::trees(&[self.dir.join("run/master.pid")])
    }

    fn logs(&self) -> Vec<PathBuf> {
        vec![self.dir.join("log/cyrus.log")]
    }

    fn dirs(&self) -> Vec<PathBuf> {
        vec![self.dir.clone(), self.mail.path.clone()]
    }

    fn notices(&self) -> &[String] {
        &self.notices
    }

    fn describe(&self) -> Vec<String> {
        vec![host::store_line(
            "cyrus",
            &self.endpoints,
            &self.users,
            &self.conf_path().display(),
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
        let mut out: Vec<(String, String)> = MAXCHILD
            .iter()
            .map(|(s, n)| (format!("service {s} maxchild"), n.to_string()))
            .collect();
        out.push(("master listen backlog".into(), BACKLOG.to_string()));
        for key in ["maxlogins_per_user", "maxlogins_per_host"] {
            if let Some((k, v)) = self.conf.iter().find(|(k, _)| k == key) {
                out.push((k.clone(), v.clone()));
            }
        }
        out
    }

    fn server_stats(&self) -> Vec<ServerMetric> {
        Vec::new()
    }

    /// Cyrus delivers `user+fN@` into folder fN only when it exists and lets anyone post
    /// (otherwise into the INBOX, silently): the admin makes each user's INBOX and folders
    /// and opens them to LMTP. The INBOXes are made even without folders: left to LMTP's
    /// autocreate, two of the fill's sessions delivering to a new user at once race, and
    /// the loser is refused `451 4.3.0 Mailbox already exists` (2 of 6 store comparisons
    /// failed so).
    fn prepare_folders(&self, folders: u32) -> Result<(), LabError> {
        let mut commands = Vec::new();
        for u in &self.users {
            let (local, domain) = split(&u.address);
            commands.push(format!(
                "CREATE {}",
                quoted(&format!("user/{local}@{domain}"))
            ));
            for f in 2..=folders {
                let name = quoted(&format!("user/{local}/f{f}@{domain}"));
                commands.push(format!("CREATE {name}"));
                commands.push(format!("SETACL {name} anyone p"));
            }
        }
        self.admin(&commands, "already exists")
    }
}

impl Drop for Lab {
    /// The master gets SIGTERM and `command::STOP` to exit; then whatever of the lab still
    /// runs is ended by force.
    fn drop(&mut self) {
        let pid_file = self.dir.join("run/master.pid");
        let tree = host::trees(std::slice::from_ref(&pid_file));
        if let Some(pid) = host::read_pid(&pid_file) {
            super::leftovers::signal(&[pid], "TERM");
            host::wait_exit(pid, super::command::STOP);
        }
        // Whatever the master left running (it was cut short, or hung).
        super::leftovers::end(
            &[&self.dir, &self.mail.path],
            &tree,
            std::time::Duration::from_secs(2),
        );
        self.capture = None;
        self.mail.remove();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_the_last_at_and_quote_for_imap() {
        assert_eq!(split("user1@store.test"), ("user1", "store.test"));
        assert_eq!(split("a@b@c.test"), ("a@b", "c.test"));
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn a_setting_replaces_the_lab_option_of_its_name_and_others_follow() {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        let lab = vec![kv("admins", "cyrus"), kv("autocreate_quota", "0")];
        let got = overridden(
            lab,
            &[kv("autocreate_quota", "100"), kv("fulldirhash", "1")],
        );
        assert_eq!(
            got,
            [
                kv("admins", "cyrus"),
                kv("autocreate_quota", "100"),
                kv("fulldirhash", "1")
            ]
        );
    }
}
