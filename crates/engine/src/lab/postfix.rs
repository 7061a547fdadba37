//! A disposable Postfix for a benchmark: its own config, queue and log in a temporary
//! directory, smtpd on a free loopback port, relaying everything to the next hop (another
//! lab instance, or the sink). Chroot off, process and concurrency limits raised, quick
//! retries. Started with `postfix -c DIR/conf start`, stopped (with a deadline, then by
//! force) and removed on drop; never touches `/etc/postfix` or the system queue. The
//! settings were checked on Debian 12's Postfix 3.7; `start_one` says why each is there.
//!
//! Its log is written by mailbench, not by Postfix's postlogd: every Postfix process sends
//! its lines to a datagram socket in the queue's `public/` directory, and postlogd — the
//! only reader of that socket — sends its own start-up lines (a warning about main.cf,
//! one per setting) to the same socket before it reads. With more than
//! `net.unix.max_dgram_qlen` (10 here) lines queued by then, its send blocks forever,
//! and so does every process's next log line: smtpd never greets, `postfix stop` never
//! ends. The lab's socket is read by a thread of mailbench (`syslog::Capture`), which
//! never writes to it, so logging cannot deadlock the MTA.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::command::{self, STOP};
use super::fs::loopfs::LoopFs;
use super::fs::queue::LazyQueue;
use super::host::{self, QueueDir, io};
use super::opendkim;
use super::{
    LabError, LabOptions, LabServer, LookupBackend, MtaLab, MtaLogging, QueueKind, RecipientLookup,
    ldap,
};
use crate::stats::queues::QueueState;
use crate::transport::shaper::Shaper;

const POSTFIX: &str = "/usr/sbin/postfix";

/// The name of the lab's log service (`postlog_service_name`): its socket, which
/// mailbench reads, is `public/mailbench-log` in the queue directory. master.cf keeps
/// Debian's `postlog` service, which `postfix start` insists on when `maillog_file` is
/// set; no process sends to it, so its postlogd never runs.
const LOG_SERVICE: &str = "mailbench-log";

/// One running instance.
#[derive(Debug)]
struct Instance {
    /// Its myhostname, unique, so that its greeting identifies it.
    name: String,
    /// The instance's directory (data, maillog, tables, the config directory).
    dir: PathBuf,
    /// Its config directory (main.cf and master.cf only, as `postfix-script check-warn`
    /// wants a config directory: everything in it root's, with no queue below it).
    conf: PathBuf,
    queue: QueueDir,
    /// smtpd address.
    smtpd: SocketAddr,
    /// The DKIM-signing milter in front of its queue, when asked.
    milter: Option<opendkim::Milter>,
    /// The reader of its log socket, writing `maillog` (with `--mta-logging on`).
    log: Option<super::syslog::Capture>,
    /// The queue on LazyFS ([`QueueKind::Lazyfs`]), whose power can be cut.
    lazy: Option<std::sync::Mutex<LazyQueue>>,
    /// The entry's queue on a small ext4 image ([`QueueKind::Loop`]), which can fill.
    disk: Option<std::sync::Mutex<LoopFs>>,
}

/// The running lab; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Lab {
    /// Instances, first (the one to inject into) first.
    instances: Vec<Instance>,
    notices: Vec<String>,
    starttls: bool,
    /// Writes maillog (`--mta-logging on`).
    logging: bool,
    /// The LDAP directory the entry looks recipients up in (`--mta-lookup ldap`); dropped
    /// after the instances, which are stopped first.
    directory: Option<ldap::Directory>,
    /// The shaped links between one instance and the next (`--link mta-mta:…`).
    links: Vec<Shaper>,
}

/// Postfix's line in the lab registry.
pub const KIND: super::Mta = super::Mta {
    name: "postfix",
    about: "Postfix from Debian's package",
    features: super::Features {
        starttls: true,
        dkim: true,
        lmtp_onward: true,
        hold: true,
        lookups: true,
        logging_off: true,
        multilog: false,
        crash: true,
        power_loss: true,
        disk_full: true,
        log: super::LogSyntax::Postfix,
    },
    check,
    start: |opts| Ok(Box::new(Lab::start(opts)?)),
    unknown_setting: unknown_parameter,
};

/// Checks that a Postfix lab can run here; the error says how to fix it.
pub fn check() -> Result<(), String> {
    if !Path::new(POSTFIX).exists() {
        return Err(
            "Postfix is not installed; run scripts/install-deps.sh --postfix (or apt-get install postfix)"
                .into(),
        );
    }
    host::check_root("the Postfix lab")
}

impl Lab {
    /// Starts the instances, last hop first.
    pub fn start(opts: &LabOptions) -> Result<Lab, LabError> {
        check().map_err(LabError::Failed)?;
        let mut lab = Lab {
            instances: Vec::new(),
            notices: Vec::new(),
            starttls: opts.starttls,
            logging: opts.logging != MtaLogging::Off,
            directory: None,
            links: Vec::new(),
        };
        if let Some(RecipientLookup {
            backend: LookupBackend::Ldap(faults),
            recipients,
        }) = &opts.lookup
        {
            lab.directory = Some(ldap::Directory::start(recipients, *faults)?);
        }
        let mut next = opts.relay;
        for hop in (0..opts.hops.max(1)).rev() {
            // A free port can be taken by someone else before Postfix binds it; the greeting
            // tells whether the smtpd that answers is this instance's. Then retry elsewhere.
            super::interrupt::check()?;
            let mut attempt = 0;
            let inst = loop {
                attempt += 1;
                match lab.start_one(hop, next, opts) {
                    Ok(inst) => break inst,
                    Err(LabError::PortTaken(_)) if attempt < 3 => continue,
                    Err(e) => return Err(e),
                }
            };
            next = super::between::reached_at(inst.smtpd, hop, opts, &mut lab.links)?;
            lab.instances.insert(0, inst);
        }
        Ok(lab)
    }

    fn start_one(
        &mut self,
        hop: u8,
        relay: SocketAddr,
        opts: &LabOptions,
    ) -> Result<Instance, LabError> {
        let dir = host::instance_dir(hop)?;
        let conf = dir.join("conf");
        for d in [dir.join("data"), conf.clone()] {
            std::fs::create_dir_all(d).map_err(|e| io("create the lab directory", e))?;
        }
        let (queue, notice) = QueueDir::make(&dir, "queue", hop, opts.queue == QueueKind::Tmpfs)?;
        self.notices.extend(notice);
        // Postfix's sockets and fifos, and its pid file, beside the LazyFS queue (which
        // cannot hold them), each as Postfix itself makes it.
        let lazy = match opts.queue {
            QueueKind::Lazyfs => Some(std::sync::Mutex::new(
                LazyQueue::make(
                    &dir,
                    "queue",
                    &[
                        ("public", "postfix:postdrop", 0o710),
                        ("private", "postfix:root", 0o700),
                        ("pid", "root:root", 0o755),
                    ],
                )
                .map_err(|e| LabError::Failed(format!("lab postfix: queue on LazyFS: {e}")))?,
            )),
            _ => None,
        };
        // The entry's queue on a small real file system, mounted over its directory.
        let disk = match opts.queue {
            QueueKind::Loop(size) if hop == 0 => Some(std::sync::Mutex::new(
                LoopFs::make(&dir.join("queue.img"), &queue.path, size).map_err(|e| {
                    LabError::Failed(format!("lab postfix: queue on a loop device: {e}"))
                })?,
            )),
            _ => None,
        };
        let mut inst = Instance {
            lazy,
            disk,
            name: format!("lab{hop}-{:08x}.mailbench.test", fastrand::u32(..)),
            queue,
            dir: dir.clone(),
            conf: conf.clone(),
            smtpd: SocketAddr::from(([127, 0, 0, 1], host::free_port()?)),
            milter: None,
            log: None,
        };
        if host::chown_to(&dir.join("data"), "postfix:postfix").is_err() {
            inst.stop();
            return Err(LabError::Failed(
                "lab: cannot give the data directory to user postfix (is Postfix installed?)"
                    .into(),
            ));
        }
        let d = dir.display();
        let c = conf.display().to_string();
        let last_hop = hop + 1 == opts.hops.max(1);
        // Why each setting: its own queue, data directory and log in the lab directory
        // (nothing shared with the system's Postfix); mail for every domain relayed from
        // loopback to the next hop, with DNS off (the relayhost is an address); no local
        // delivery, aliases or recipient checks, which would only cost time; process and
        // destination concurrency raised far above what a benchmark uses, and no flow
        // control, so that Postfix's defaults are not what is measured; SMTPUTF8 off, as
        // the generator does not ask for it.
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
{route}
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
local_recipient_maps =
default_process_limit = {processes}
default_destination_concurrency_limit = {per_destination}
smtp_destination_concurrency_limit = {per_destination}
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
",
            q = inst.queue.path.display(),
            name = inst.name,
            processes = opts.limits.processes.unwrap_or(512),
            per_destination = opts.limits.per_destination.unwrap_or(100),
            route = match (opts.dns, last_hop) {
                // Destinations by MX, as in production, through the test DNS server that
                // the chrooted smtp client's own resolv.conf names; the sinks' port.
                (Some(dns), true) => format!(
                    "smtp_dns_support_level = enabled\nsmtp_tcp_port = {}",
                    dns.port
                ),
                _ => format!(
                    "relayhost = [{}]:{}\nsmtp_dns_support_level = disabled",
                    relay.ip(),
                    relay.port()
                ),
            },
            // The smtpd listens on 127.0.0.1 either way; the smtp client needs IPv6 for a
            // relay (the sink) on ::1.
            protocols = if relay.is_ipv4() { "ipv4" } else { "all" }
        );
        if opts.logging != MtaLogging::Off {
            main_cf.push_str(&format!(
                "maillog_file = {d}/maillog\nmaillog_file_prefixes = {d}\npostlog_service_name = {LOG_SERVICE}\n"
            ));
        }
        if let (Some(lookup), 0) = (&opts.lookup, hop) {
            let settings = match self.recipient_table(&dir, lookup) {
                Ok(s) => s,
                Err(e) => {
                    inst.stop();
                    return Err(e);
                }
            };
            main_cf.push_str(&settings);
        }
        if opts.relay_lmtp && last_hop {
            // Into a store: the relayhost's address, over Postfix's LMTP client.
            main_cf.push_str(&format!(
                "default_transport = lmtp:[{}]:{}\n",
                relay.ip(),
                relay.port()
            ));
        }
        if opts.hold && hop == 0 {
            // Every message to the hold queue at the end of its data (DATA or the last
            // BDAT), whoever sends it: the flush benchmark releases them with postsuper.
            main_cf.push_str("smtpd_end_of_data_restrictions = check_client_access static:HOLD\n");
        }
        if let (Some(s), 0) = (&opts.dkim, hop) {
            match opendkim::Milter::start(&dir, s) {
                Ok(m) => {
                    main_cf.push_str(&m.postfix_settings());
                    inst.milter = Some(m);
                }
                Err(e) => {
                    inst.stop();
                    return Err(e);
                }
            }
        }
        if opts.starttls && hop == 0 {
            host::write_tls_files(&dir, &inst.name)?;
            main_cf.push_str(&format!(
                "smtpd_tls_cert_file = {d}/tls.crt\nsmtpd_tls_key_file = {d}/tls.key\nsmtpd_tls_security_level = may\n"
            ));
        }
        let main_cf = with_settings(&main_cf, &opts.settings);
        std::fs::write(conf.join("main.cf"), main_cf).map_err(|e| io("write main.cf", e))?;
        if let Err(e) = index_table(&dir, &conf, hop, opts) {
            inst.stop();
            return Err(e);
        }
        let master = std::fs::read_to_string("/etc/postfix/master.cf")
            .map_err(|e| io("read /etc/postfix/master.cf", e))?;
        let resolver = opts.dns.filter(|_| last_hop).map(|d| d.resolver);
        std::fs::write(
            conf.join("master.cf"),
            master_cf(&master, inst.smtpd, resolver.is_some()),
        )
        .map_err(|e| io("write master.cf", e))?;
        if let Some(ip) = resolver {
            host::chroot_resolver(&inst.queue.path, ip)?;
        }
        if let Err(e) = check_overrides(&conf, &opts.settings) {
            inst.stop();
            return Err(e);
        }
        if opts.logging != MtaLogging::Off {
            match log_socket(&inst) {
                Ok(capture) => inst.log = Some(capture),
                Err(e) => {
                    inst.stop();
                    return Err(e);
                }
            }
        }
        let started = command::run(
            Command::new(POSTFIX).args(["-c", &c, "start"]),
            command::SETUP,
            "`postfix start`",
        );
        let out = match started {
            Ok(out) => out,
            Err(why) => {
                inst.stop();
                return Err(LabError::Failed(format!("lab postfix: {why}")));
            }
        };
        if !out.status.success() {
            let reason = start_failure(&conf);
            inst.stop();
            // A fatal error that names an overridden key is that --postconf value's fault.
            let named = opts
                .settings
                .iter()
                .find(|(k, _)| reason.contains(&format!("{k} =")));
            return Err(match named {
                Some((k, _)) => LabError::Setting(format!(
                    "--mta-conf {k}: Postfix refused it ({reason}); fix or drop the value"
                )),
                None => LabError::Failed(format!("lab: postfix start failed: {reason}")),
            });
        }
        let tree = [inst.queue.path.join("pid/master.pid")];
        if let Err(e) =
            host::wait_for_greeting(inst.smtpd, &inst.name, "postfix", &|| host::trees(&tree))
        {
            inst.stop();
            return Err(e);
        }
        Ok(inst)
    }
}

/// The lab's log socket, `public/mailbench-log` in the queue directory, read by mailbench
/// into `maillog`: `public` made first as Postfix makes it (owned by postfix, group
/// postdrop, 0710), so that `postfix start` finds the socket there and every Postfix
/// process logs to it from its first line on.
fn log_socket(inst: &Instance) -> Result<super::syslog::Capture, LabError> {
    let public = inst.queue.path.join("public");
    std::fs::create_dir_all(&public).map_err(|e| io("create the queue's public directory", e))?;
    host::chown_to(&public, "postfix:postdrop")?;
    host::set_mode(&public, 0o710);
    super::syslog::Capture::start(&public.join(LOG_SERVICE), &inst.dir.join("maillog"))
}

/// The lab's main.cf with each `key = value` of `settings` in place of the lab's line for
/// that key (or added): Postfix would take the last of two lines too, but warns about the
/// first in every process it starts ("overriding earlier entry"), lines that cost time and
/// filled the log socket at start.
fn with_settings(main_cf: &str, settings: &[(String, String)]) -> String {
    let key_of = |line: &str| -> Option<String> {
        let (k, _) = line.split_once('=')?;
        let k = k.trim();
        (!line.starts_with([' ', '\t', '#']) && !k.is_empty() && !k.contains(' '))
            .then(|| k.to_string())
    };
    let mut lines: Vec<String> = main_cf.lines().map(str::to_string).collect();
    for (k, v) in settings {
        let line = format!("{k} = {v}");
        match lines
            .iter()
            .position(|l| key_of(l).as_deref() == Some(k.as_str()))
        {
            Some(i) => lines[i] = line,
            None => lines.push(line),
        }
    }
    lines.join("\n") + "\n"
}

impl Lab {
    /// The entry's recipient check: the run's recipient domains relayed, each recipient
    /// looked up in `relay_recipient_maps` (an unknown one refused with 550, a failed
    /// lookup answered `451 4.3.0 Temporary lookup failure`).
    fn recipient_table(&self, dir: &Path, lookup: &RecipientLookup) -> Result<String, LabError> {
        let mut domains: Vec<&str> = lookup
            .recipients
            .iter()
            .filter_map(|r| r.rsplit_once('@').map(|(_, d)| d))
            .collect();
        domains.sort_unstable();
        domains.dedup();
        let table = match (&lookup.backend, &self.directory) {
            (LookupBackend::Ldap(_), Some(directory)) => {
                format!("ldap:{}", directory.postfix_table(dir)?.display())
            }
            (LookupBackend::Ldap(_), None) => {
                return Err(LabError::Failed(
                    "lab: the LDAP directory did not start".into(),
                ));
            }
            (LookupBackend::Hash, _) => hash_table(dir, &lookup.recipients)?,
        };
        Ok(format!(
            "relay_domains = {}\nrelay_recipient_maps = {table}\n",
            domains.join(" ")
        ))
    }
}

/// Writes the recipients as a Postfix `hash:` table source (one `address OK` line each);
/// [`index_table`] indexes it once main.cf exists (postmap reads it).
fn hash_table(dir: &Path, recipients: &[String]) -> Result<String, LabError> {
    let path = dir.join("recipients");
    let text: String = recipients.iter().map(|r| format!("{r} OK\n")).collect();
    std::fs::write(&path, text).map_err(|e| io("write the recipient table", e))?;
    Ok(format!("hash:{}", path.display()))
}

/// `postmap -c CONF hash:DIR/recipients`, when this is the entry (hop 0) and it has a hash
/// table.
fn index_table(dir: &Path, conf: &Path, hop: u8, opts: &LabOptions) -> Result<(), LabError> {
    if hop != 0 || !matches!(&opts.lookup, Some(l) if l.backend == LookupBackend::Hash) {
        return Ok(());
    }
    let out = command::run(
        Command::new("/usr/sbin/postmap")
            .arg("-c")
            .arg(conf)
            .arg(format!("hash:{}", dir.join("recipients").display())),
        command::SETUP,
        "postmap",
    )
    .map_err(|e| LabError::Failed(format!("lab postfix: {e}")))?;
    if !out.status.success() {
        return Err(LabError::Failed(format!(
            "lab: postmap could not index the recipients: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl LabServer for Lab {
    fn pids(&self) -> Vec<u32> {
        let masters: Vec<PathBuf> = self
            .instances
            .iter()
            .flat_map(|i| {
                let milter = i.milter.as_ref().map(|m| m.pid_file.clone());
                std::iter::once(i.queue.path.join("pid/master.pid")).chain(milter)
            })
            .collect();
        host::trees(&masters)
    }

    /// The instances' maillogs, then the LDAP directory's access log (its `SRCH` lines
    /// are the reference for the lookups counted).
    fn logs(&self) -> Vec<PathBuf> {
        self.instances
            .iter()
            .map(|i| i.dir.join("maillog"))
            .chain(self.directory.as_ref().map(|d| d.access_log()))
            .collect()
    }

    fn dirs(&self) -> Vec<PathBuf> {
        self.instances
            .iter()
            .flat_map(|i| [i.dir.clone(), i.conf.clone(), i.queue.path.clone()])
            .chain(self.directory.as_ref().map(|d| d.dir().to_path_buf()))
            .collect()
    }

    fn notices(&self) -> &[String] {
        &self.notices
    }

    fn describe(&self) -> Vec<String> {
        self.instances
            .iter()
            .enumerate()
            .map(|(i, inst)| {
                format!(
                    "postfix {i}: smtpd on {}, config {}",
                    inst.smtpd,
                    inst.conf.display()
                )
            })
            .collect()
    }

    fn certificate(&self) -> Option<PathBuf> {
        self.starttls.then(|| self.instances[0].dir.join("tls.crt"))
    }
}

impl MtaLab for Lab {
    fn entry(&self) -> SocketAddr {
        self.instances[0].smtpd
    }

    /// `status=sent` deliveries logged by the last hop (the ones that reached the relay).
    fn delivered_logged(&self) -> usize {
        self.instances
            .last()
            .map(|i| host::count_lines(&i.dir.join("maillog"), "status=sent"))
            .unwrap_or(0)
    }

    fn queue_dir(&self) -> PathBuf {
        self.instances[0].queue.path.clone()
    }

    fn held(&self) -> usize {
        host::count_files(&self.instances[0].queue.path.join("hold"))
    }

    /// `postsuper -H ALL` moves the held messages to the deferred queue and `postqueue -f`
    /// has the queue manager take them now, not at its next scan.
    fn release(&self) -> Result<usize, String> {
        let d = self.instances[0].conf.display().to_string();
        let out = command::run(
            Command::new("/usr/sbin/postsuper").args(["-c", &d, "-H", "ALL"]),
            command::SETUP,
            "`postsuper -H ALL`",
        )
        .map_err(|e| format!("lab postfix: {e}"))?;
        let said = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("lab: postsuper -H ALL failed: {}", said.trim()));
        }
        let _ = command::run(
            Command::new("/usr/sbin/postqueue").args(["-c", &d, "-f"]),
            command::SETUP,
            "`postqueue -f`",
        );
        // "postsuper: Released from hold: 123 messages"
        Ok(said
            .split("Released from hold:")
            .nth(1)
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(0))
    }

    /// `status=deferred` lines of the last hop whose reason is a failed lookup ("Host or
    /// domain name not found", "Name service error").
    fn dns_deferred(&self) -> usize {
        self.instances
            .last()
            .map(|i| {
                host::count_lines_with(
                    &i.dir.join("maillog"),
                    "status=deferred",
                    &[
                        "Name service error",
                        "Host or domain name not found",
                        "Host not found",
                    ],
                )
            })
            .unwrap_or(0)
    }

    fn lookups(&self) -> Option<ldap::proxy::Counts> {
        self.directory.as_ref().map(|d| d.proxy.counts())
    }

    fn logs_deliveries(&self) -> bool {
        self.logging
    }

    /// Complete files (cleanup done: mode 0700) under incoming, active, deferred and hold,
    /// in all instances.
    fn queued(&self) -> usize {
        self.instances
            .iter()
            .map(|i| {
                // Complete files only: one a crash cut mid-write is never delivered.
                ["incoming", "active", "deferred", "hold"]
                    .iter()
                    .map(|q| host::count_complete_files(&i.queue.path.join(q)))
                    .sum::<usize>()
            })
            .sum()
    }

    /// Every instance's master tree killed at once (the DKIM milter lives on); with
    /// `cut_power`, then each LazyFS queue drops what was not fsynced, after its report of
    /// what that is.
    fn crash(&self, cut_power: bool) -> Result<super::Crashed, String> {
        let masters: Vec<PathBuf> = self
            .instances
            .iter()
            .map(|i| i.queue.path.join("pid/master.pid"))
            .collect();
        let mut crashed = super::Crashed {
            killed: super::crash::kill_trees(&masters, &[])
                .map_err(|e| format!("lab postfix: {e}"))?,
            ..super::Crashed::default()
        };
        if !cut_power {
            return Ok(crashed);
        }
        let (mut files, mut bytes) = (Vec::new(), 0);
        for i in &self.instances {
            let Some(q) = &i.lazy else {
                return Err("lab postfix: a power cut needs the queue on LazyFS".into());
            };
            let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
            let u = q.unsynced().map_err(|e| format!("lab postfix: {e}"))?;
            q.cut_power().map_err(|e| format!("lab postfix: {e}"))?;
            files.extend(u.files);
            bytes += u.bytes;
        }
        crashed.unsynced_files = Some(files);
        crashed.unsynced_bytes = Some(bytes);
        Ok(crashed)
    }

    /// `postfix start` on each instance's configuration, last hop first, each awaited
    /// until it greets (its stale pid file is no obstacle: the master's lock on it died
    /// with it).
    fn restart(&self) -> Result<(), String> {
        for inst in self.instances.iter().rev() {
            let c = inst.conf.display().to_string();
            let out = command::run(
                Command::new(POSTFIX).args(["-c", &c, "start"]),
                command::SETUP,
                "`postfix start`",
            )
            .map_err(|e| format!("lab postfix: restart: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "lab postfix: restart after the crash failed: {}",
                    start_failure(&inst.conf)
                ));
            }
            let tree = [inst.queue.path.join("pid/master.pid")];
            host::wait_for_greeting(inst.smtpd, &inst.name, "postfix", &|| host::trees(&tree))
                .map_err(|e| format!("lab postfix: restart: {e}"))?;
        }
        Ok(())
    }

    /// The ballast in the entry's loop-mounted queue file system.
    fn fill_queue(&self, leave: u64) -> Result<super::QueueFilled, String> {
        let disk = self.entry_disk()?;
        let mut d = disk.lock().unwrap_or_else(|p| p.into_inner());
        let ballast = d.fill(leave).map_err(|e| format!("lab postfix: {e}"))?;
        Ok(super::QueueFilled {
            size: d.size(),
            ballast,
            free: d.free_bytes().map_err(|e| format!("lab postfix: {e}"))?,
        })
    }

    fn free_queue(&self) -> Result<(), String> {
        let disk = self.entry_disk()?;
        let mut d = disk.lock().unwrap_or_else(|p| p.into_inner());
        d.free().map_err(|e| format!("lab postfix: {e}"))
    }

    fn queue_states(&self) -> Vec<QueueState> {
        let mut all = Vec::new();
        for i in &self.instances {
            let states: Vec<QueueState> = QUEUES
                .iter()
                .map(|q| QueueState::new(q, ready_files(&i.queue.path.join(q))))
                .collect();
            crate::stats::queues::add(&mut all, &states);
        }
        all
    }
}

impl Lab {
    /// The entry's loop-mounted queue file system, or why there is none.
    fn entry_disk(&self) -> Result<&std::sync::Mutex<LoopFs>, String> {
        self.instances
            .first()
            .and_then(|i| i.disk.as_ref())
            .ok_or_else(|| "lab postfix: filling the queue needs it on a loop device".into())
    }
}

/// The queues `qshape` shows, in its order (maildrop, which only the `sendmail` command
/// fills, is never used by an SMTP benchmark).
const QUEUES: [&str; 4] = ["incoming", "active", "deferred", "hold"];

/// Queue files below `dir` that Postfix's `showq` (behind `postqueue -j` and `mailq`)
/// counts as messages: regular files whose owner bits are `rwx`. A file `cleanup` is still
/// writing is `rw-` until the message is complete, and is not a message yet.
fn ready_files(dir: &Path) -> u64 {
    use std::os::unix::fs::PermissionsExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => ready_files(&e.path()),
            Ok(m) => u64::from(m.is_file() && m.permissions().mode() & 0o700 == 0o700),
            Err(_) => 0,
        })
        .sum()
}

/// Why `postfix start` failed. Postfix prints its fatal errors only to a terminal (or a
/// syslog this machine may not run), so `postfix check` runs again on a pseudo-terminal
/// (util-linux `script`, part of every Debian system) to read them.
fn start_failure(conf: &Path) -> String {
    let cmd = format!("{POSTFIX} -c '{}' check", conf.display());
    let out = command::run(
        Command::new("script").args(["-qec", &cmd, "/dev/null"]),
        command::SETUP,
        "`postfix check`",
    );
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

/// The first of `keys` Postfix does not know (`postconf -d KEY` warns "KEY: unknown
/// parameter"), so that a misspelt setting is refused before any lab starts rather than
/// after one has. `None` when all are known or Postfix cannot be asked (the lab's own
/// checks then say why).
pub fn unknown_parameter<'a>(keys: &[&'a str]) -> Option<&'a str> {
    if keys.is_empty() || check().is_err() {
        return None;
    }
    let out = command::run(
        Command::new("/usr/sbin/postconf").arg("-d").args(keys),
        command::SETUP,
        "postconf -d",
    )
    .ok()?;
    let warnings = String::from_utf8_lossy(&out.stderr);
    keys.iter()
        .copied()
        .find(|k| warnings.contains(&format!(" {k}: unknown parameter")))
}

/// Postfix only warns about a parameter it does not know ("unused parameter") and runs
/// on without it, so a misspelt `--postconf` key would quietly benchmark the default.
/// `postconf -n` reports those warnings; an overridden key among them is refused.
fn check_overrides(conf: &Path, overrides: &[(String, String)]) -> Result<(), LabError> {
    if overrides.is_empty() {
        return Ok(());
    }
    let out = command::run(
        Command::new("/usr/sbin/postconf").args(["-c", &conf.display().to_string(), "-n"]),
        command::SETUP,
        "postconf",
    )
    .map_err(|e| LabError::Failed(format!("lab postfix: {e}")))?;
    let warnings = String::from_utf8_lossy(&out.stderr);
    match overrides
        .iter()
        .find(|(k, _)| warnings.contains(&format!("unused parameter: {k}=")))
    {
        Some((k, _)) => Err(LabError::Setting(format!(
            "--mta-conf {k}: Postfix has no such parameter (postconf: unused parameter); check its spelling in postconf(5)"
        ))),
        None => Ok(()),
    }
}

/// Debian's master.cf with smtpd moved to `smtpd`, chroot off everywhere (except the smtp
/// client when `chroot_smtp`: it then resolves with the queue directory's etc/resolv.conf),
/// postlog on (`postfix start` requires the service when `maillog_file` is set; the lab's
/// processes log to [`LOG_SERVICE`] instead, see the module's doc).
fn master_cf(master: &str, smtpd: SocketAddr, chroot_smtp: bool) -> String {
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
            f[4] = if chroot_smtp && fields[0] == "smtp" && fields[1] == "unix" {
                "y"
            } else {
                "n"
            };
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
    /// `postfix stop` and the master's exit get [`STOP`]; then whatever of the instance
    /// still runs is ended by force (its stop said in one line when it did not finish).
    fn stop(&mut self) {
        if !self.dir.exists() {
            return;
        }
        let pid_file = self.queue.path.join("pid/master.pid");
        let mut roots: Vec<PathBuf> = vec![pid_file.clone()];
        roots.extend(self.milter.as_ref().map(|m| m.pid_file.clone()));
        let tree = host::trees(&roots);
        let deadline = Instant::now() + STOP;
        let stopped = command::run(
            Command::new(POSTFIX).args(["-c", &self.conf.display().to_string(), "stop"]),
            STOP,
            "`postfix stop`",
        );
        match (stopped, host::read_pid(&pid_file)) {
            (Err(why), _) => host::say(&format!(
                "mailbench: lab postfix: {why}; ending the lab's processes"
            )),
            (Ok(_), Some(pid)) => {
                host::wait_exit(pid, deadline.saturating_duration_since(Instant::now()))
            }
            (Ok(_), None) => {}
        }
        // Whatever `postfix stop` left running (it was cut short, or the master hung).
        super::leftovers::end(
            &[&self.dir, &self.queue.path],
            &tree,
            Duration::from_secs(2),
        );
        self.milter = None;
        self.log = None;
        self.lazy = None;
        self.disk = None;
        self.queue.remove();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_cf_moves_smtpd_and_turns_chroot_off() {
        let debian = "smtp      inet  n       -       y       -       -       smtpd\n#postlog   unix-dgram n  -       n       -       1       postlogd\npickup    unix  n       -       y       60      1       pickup\n  -o x=y\n";
        let out = master_cf(debian, "127.0.0.1:2725".parse().expect("addr"), false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "127.0.0.1:2725 inet n - n - - smtpd");
        assert!(lines[1].starts_with("postlog") && lines[1].contains("postlogd"));
        assert_eq!(lines[2], "pickup unix n - n 60 1 pickup");
        assert_eq!(lines[3], "  -o x=y");
        let client = "smtp      unix  -       -       y       -       -       smtp\n";
        let addr = "127.0.0.1:2725".parse().expect("addr");
        assert_eq!(master_cf(client, addr, true), "smtp unix - - y - - smtp\n");
        assert_eq!(master_cf(client, addr, false), "smtp unix - - n - - smtp\n");
    }
}
