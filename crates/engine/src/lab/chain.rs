//! What the lab MTAs unpacked beside the system's (Exim, OpenSMTPD, Sendmail) share: a
//! chain of instances started last hop first, each in its own directory with its queue,
//! log and private namespace (see `isolate`), stopped with its whole process tree and
//! removed on drop. An MTA is a [`Flavor`]: how to configure and start one instance, and
//! how to read its log and queue. Postfix, which Debian installs as the system MTA and
//! which has its own stop command, hold queue and milter support, keeps its own file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::fs::loopfs::LoopFs;
use super::fs::queue::LazyQueue;
use super::host::{self, QueueDir, io};
use super::{LabError, LabOptions, LabServer, MtaLab, QueueKind};
use crate::stats::queues::{self, QueueState};
use crate::transport::shaper::Shaper;

/// Where `scripts/install-mtas.sh` unpacks the MTAs (`$MAILBENCH_MTAS` overrides it).
pub fn mta_root() -> PathBuf {
    std::env::var_os("MAILBENCH_MTAS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/mailbench/mtas"))
}

/// Checks that `binary` (relative to the MTA's unpacked tree) is there and that we run
/// as root; the error names the fix.
pub fn check_unpacked(mta: &str, label: &str, binary: &str) -> Result<PathBuf, String> {
    let path = mta_root().join(mta).join(binary);
    if !path.exists() {
        return Err(format!(
            "{label} is not unpacked for the lab ({} is missing); run scripts/install-mtas.sh (Debian allows one system MTA, so the lab unpacks the others beside it)",
            path.display()
        ));
    }
    host::check_root(&format!("the {label} lab"))?;
    Ok(path)
}

/// Refuses `--mta-dest-concurrency` for an MTA that delivers each message in its own
/// process as it arrives, and so has no per-destination limit.
pub fn no_per_destination(label: &str, per_destination: Option<u32>) -> Result<(), LabError> {
    match per_destination {
        Some(_) => Err(LabError::Setting(format!(
            "--mta-dest-concurrency: {label} has no per-destination limit (each message is delivered by its own process as it arrives); leave it out, or bound it with --mta-processes"
        ))),
        None => Ok(()),
    }
}

/// One running instance of an MTA.
#[derive(Debug)]
pub struct Hop {
    /// Its host name, unique, so that its greeting identifies it.
    pub name: String,
    /// Its directory (configuration, log, pid file).
    pub dir: PathBuf,
    /// Its queue.
    pub queue: QueueDir,
    /// Where it listens.
    pub entry: SocketAddr,
    /// Where it relays to (the next hop, or the sink).
    pub next: SocketAddr,
    /// The last hop (which relays to the sink, or resolves through the test DNS).
    pub last: bool,
    /// Its log file's name in `dir`.
    pub log_name: &'static str,
    /// The daemon's process, when it stays in the foreground (behind a lock, so that a
    /// restart after a crash, which has the hop shared, can put the new one there).
    pub child: std::sync::Mutex<Option<Child>>,
    /// Its log socket, when it logs through syslog only.
    pub capture: Option<super::syslog::Capture>,
    /// A command run every few seconds, for an MTA whose retry timer cannot be shortened.
    pub retrier: Option<Periodic>,
    /// The queue on LazyFS ([`QueueKind::Lazyfs`]), whose power can be cut.
    pub lazy: Option<std::sync::Mutex<LazyQueue>>,
    /// The entry's queue on a small ext4 image ([`QueueKind::Loop`]), which can fill.
    pub disk: Option<std::sync::Mutex<LoopFs>>,
}

/// A command run at a fixed interval until dropped.
#[derive(Debug)]
pub struct Periodic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Hop {
    /// The log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join(self.log_name)
    }

    /// The daemon's pid file.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }

    /// The namespace this hop runs in: its host name, and the test DNS server in its
    /// `/etc/resolv.conf` when it is the last hop of a DNS benchmark.
    pub fn isolation(&self, opts: &LabOptions) -> Result<super::isolate::Isolation, LabError> {
        let mut iso = super::isolate::Isolation {
            hostname: self.name.clone(),
            dir: self.dir.clone(),
            ..Default::default()
        };
        if let (Some(dns), true) = (opts.dns, self.last) {
            let resolv = self.dir.join("resolv.conf");
            std::fs::write(&resolv, format!("nameserver {}\n", dns.resolver))
                .map_err(|e| io("write the lab's resolv.conf", e))?;
            iso.binds.push((resolv, PathBuf::from("/etc/resolv.conf")));
        }
        Ok(iso)
    }

    /// Runs `cmd` (a daemon that puts itself in the background) and fails with what it
    /// said when it exits non-zero, or does not exit within `command::SETUP`.
    pub fn run_daemon(&self, mut cmd: Command, what: &str) -> Result<(), LabError> {
        let out = super::command::run(&mut cmd, super::command::SETUP, what)
            .map_err(|e| LabError::Failed(format!("lab: {e}")))?;
        if out.status.success() {
            return Ok(());
        }
        Err(LabError::Failed(format!(
            "lab: {what} did not start: {}",
            said(&out.stderr)
        )))
    }

    /// Runs `cmd` as a foreground daemon whose output is its log (after a crash, the
    /// killed one it replaces is reaped).
    pub fn spawn_daemon(&self, mut cmd: Command, what: &str) -> Result<(), LabError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .map_err(|e| io("open the lab's log", e))?;
        let err = log.try_clone().map_err(|e| io("open the lab's log", e))?;
        let child = super::leftovers::own_group(&mut cmd)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| io(&format!("run {what}"), e))?;
        std::fs::write(self.pid_file(), child.id().to_string())
            .map_err(|e| io("write the pid file", e))?;
        let mut slot = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut old) = slot.replace(child) {
            let _ = old.kill();
            let _ = old.wait();
        }
        Ok(())
    }

    /// Runs `argv` every `every` while the instance runs (its output discarded).
    pub fn retry_every(&mut self, every: Duration, argv: Vec<String>) {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let tick = Duration::from_millis(100);
            let mut waited = Duration::ZERO;
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                waited += tick;
                if waited >= every {
                    waited = Duration::ZERO;
                    // Bounded: a stuck MTA's control command must not hold up its stop.
                    let _ = super::command::run(
                        Command::new(&argv[0]).args(&argv[1..]),
                        every,
                        &argv[0],
                    );
                }
            }
        });
        self.retrier = Some(Periodic {
            stop,
            thread: Some(thread),
        });
    }

    /// Stops the daemon and everything it started, unmounts and removes what this
    /// instance made. Idempotent. The daemon's tree gets SIGTERM and `command::STOP` to
    /// go; then whatever of the instance still runs is ended by force.
    fn stop(&mut self) {
        self.retrier = None;
        let roots = host::trees(&[self.pid_file()]);
        super::leftovers::signal(&roots, "TERM");
        let deadline = Instant::now() + super::command::STOP;
        while roots.iter().any(|p| super::leftovers::running(*p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        super::leftovers::end(&[&self.dir, &self.queue.path], &roots, Duration::ZERO);
        let child = self.child.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(mut c) = child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.capture = None;
        self.lazy = None;
        self.disk = None;
        self.queue.remove();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The last lines a program wrote, trimmed, for an error message.
pub fn said(out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.len() {
        0 => "it gave no reason".into(),
        n => lines[n.saturating_sub(3)..].join("; "),
    }
}

/// The registry entry (see [`super::MTAS`]) of an MTA the chain runs: `crash` and
/// `power-loss` are what its file's [`Flavor::RESTART`] declares (`power-loss` only where
/// [`Flavor::ON_LAZYFS`]: a chain's queue goes on LazyFS like Postfix's), `disk-full`
/// what its [`Flavor::DISK_FULL`] declares.
pub const fn kind<F: Flavor>(about: &'static str, features: super::Features) -> super::Mta {
    super::Mta {
        name: F::NAME,
        about,
        features: super::Features {
            crash: F::RESTART.is_some(),
            power_loss: F::RESTART.is_some() && F::ON_LAZYFS,
            disk_full: F::DISK_FULL,
            ..features
        },
        check: F::check,
        start: start::<F>,
        unknown_setting: |_| None,
    }
}

fn start<F: Flavor>(opts: &LabOptions) -> Result<Box<dyn MtaLab>, LabError> {
    Ok(Box::new(Chain::<F>::start(opts)?))
}

/// One MTA the chain can run: one file each.
pub trait Flavor: Send + Sync + 'static {
    /// The name in results and messages (`exim`).
    const NAME: &'static str;
    /// Its log file's name in the instance directory.
    const LOG: &'static str;
    /// Checks that the lab can run here; the error says how to fix it.
    fn check() -> Result<(), String>;
    /// Writes the instance's configuration (its `opts.settings` among it, refused with
    /// the MTA's reason when it rejects one) and starts it.
    fn start(hop: &mut Hop, opts: &LabOptions) -> Result<(), LabError>;
    /// Recipients its log says were delivered to the next hop.
    fn delivered(log: &str) -> usize;
    /// Deferrals its log blames on DNS.
    fn dns_deferred(log: &str) -> usize;
    /// Messages its queue holds.
    fn queued(queue: &Path) -> usize;
    /// Its queues and the messages in each, as its own queue tool counts them.
    fn states(queue: &Path) -> Vec<QueueState>;
    /// How to start an instance again after a crash, on the configuration and queue
    /// [`Flavor::start`] made (returning once the daemon is launched; the chain awaits its
    /// greeting). `Some` is this MTA's declaration that `relay --fault` can crash, cut the
    /// power of and restart it; `None`: it cannot yet.
    const RESTART: Option<Relaunch> = None;
    /// `true` is this MTA's declaration that `relay --fault disk-full` can put the
    /// entry's queue on a small loop-mounted file system and fill it: the MTA refuses
    /// with a 4xx when its queue's file system is nearly full (its own check, set in its
    /// file), rather than losing what it accepted.
    const DISK_FULL: bool = false;
    /// Whether its queue works on LazyFS, so that `power-loss` can cut its power: false
    /// for an MTA that checks its queue files' owner (LazyFS creates every file as its own
    /// user, root).
    const ON_LAZYFS: bool = true;
}

/// Starts a crashed instance again (see [`Flavor::RESTART`]).
pub type Relaunch = fn(&Hop, &LabOptions) -> Result<(), LabError>;

/// A running chain of one MTA; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Chain<F: Flavor> {
    hops: Vec<Hop>,
    /// The shaped links between one hop and the next (`--link mta-mta:…`), kept as long
    /// as the chain runs (a restarted hop is reached through the same link).
    links: Vec<Shaper>,
    /// What it was started with, for [`Flavor::RESTART`].
    opts: LabOptions,
    notices: Vec<String>,
    /// The MTA writes its log (`--mta-logging`, refused off for those that cannot).
    logging: bool,
    _flavor: std::marker::PhantomData<F>,
}

impl<F: Flavor> Chain<F> {
    /// Starts the instances, last hop first; a port taken before the MTA bound it is
    /// retried elsewhere.
    pub fn start(opts: &LabOptions) -> Result<Chain<F>, LabError> {
        F::check().map_err(LabError::Failed)?;
        let mut chain = Chain {
            hops: Vec::new(),
            links: Vec::new(),
            opts: opts.clone(),
            notices: Vec::new(),
            logging: opts.logging != super::MtaLogging::Off,
            _flavor: std::marker::PhantomData,
        };
        let hops = opts.hops.max(1);
        let mut next = opts.relay;
        for n in (0..hops).rev() {
            super::interrupt::check()?;
            let mut attempt = 0;
            let hop = loop {
                attempt += 1;
                match chain.start_one(n, next, n + 1 == hops, opts) {
                    Ok(hop) => break hop,
                    Err(LabError::PortTaken(_)) if attempt < 3 => continue,
                    Err(e) => return Err(e),
                }
            };
            next = super::between::reached_at(hop.entry, n, opts, &mut chain.links)?;
            chain.hops.insert(0, hop);
        }
        Ok(chain)
    }

    fn start_one(
        &mut self,
        n: u8,
        next: SocketAddr,
        last: bool,
        opts: &LabOptions,
    ) -> Result<Hop, LabError> {
        let dir = host::instance_dir(n)?;
        let (queue, notice) = QueueDir::make(&dir, "queue", n, opts.queue == QueueKind::Tmpfs)?;
        self.notices.extend(notice);
        // Its queue on LazyFS (mounted over the queue directory), for a power cut.
        let lazy = match opts.queue {
            QueueKind::Lazyfs if F::RESTART.is_some() && F::ON_LAZYFS => {
                match LazyQueue::make(&dir, "queue", &[]) {
                    Ok(q) => Some(std::sync::Mutex::new(q)),
                    Err(e) => {
                        let _ = std::fs::remove_dir_all(&dir);
                        return Err(LabError::Failed(format!(
                            "lab {}: queue on LazyFS: {e}",
                            F::NAME
                        )));
                    }
                }
            }
            _ => None,
        };
        // The entry's queue on a small real file system, mounted over its directory.
        let disk = match opts.queue {
            QueueKind::Loop(size) if n == 0 && F::DISK_FULL => {
                match LoopFs::make(&dir.join("queue.img"), &queue.path, size) {
                    Ok(d) => Some(std::sync::Mutex::new(d)),
                    Err(e) => {
                        let _ = std::fs::remove_dir_all(&dir);
                        return Err(LabError::Failed(format!(
                            "lab {}: queue on a loop device: {e}",
                            F::NAME
                        )));
                    }
                }
            }
            _ => None,
        };
        let mut hop = Hop {
            lazy,
            disk,
            name: format!("lab{n}-{:08x}.mailbench.test", fastrand::u32(..)),
            dir,
            queue,
            entry: SocketAddr::from(([127, 0, 0, 1], host::free_port()?)),
            next,
            last,
            log_name: F::LOG,
            child: std::sync::Mutex::new(None),
            capture: None,
            retrier: None,
        };
        let started = F::start(&mut hop, opts).and_then(|()| {
            let files = [hop.pid_file()];
            host::wait_for_greeting(hop.entry, &hop.name, F::NAME, &|| host::trees(&files))
        });
        match started {
            Ok(()) => Ok(hop),
            Err(e) => {
                hop.stop();
                Err(e)
            }
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

impl<F: Flavor> LabServer for Chain<F> {
    fn pids(&self) -> Vec<u32> {
        let files: Vec<PathBuf> = self.hops.iter().map(Hop::pid_file).collect();
        host::trees(&files)
    }

    fn logs(&self) -> Vec<PathBuf> {
        self.hops.iter().map(Hop::log).collect()
    }

    fn dirs(&self) -> Vec<PathBuf> {
        self.hops
            .iter()
            .flat_map(|h| [h.dir.clone(), h.queue.path.clone()])
            .collect()
    }

    fn notices(&self) -> &[String] {
        &self.notices
    }

    fn describe(&self) -> Vec<String> {
        self.hops
            .iter()
            .enumerate()
            .map(|(i, h)| {
                format!(
                    "{} {i}: listens on {}, config and log in {}",
                    F::NAME,
                    h.entry,
                    h.dir.display()
                )
            })
            .collect()
    }

    fn certificate(&self) -> Option<PathBuf> {
        None
    }
}

impl<F: Flavor> MtaLab for Chain<F> {
    fn entry(&self) -> SocketAddr {
        self.hops[0].entry
    }

    fn delivered_logged(&self) -> usize {
        self.hops
            .last()
            .map_or(0, |h| F::delivered(&read(&h.log())))
    }

    fn queued(&self) -> usize {
        self.hops.iter().map(|h| F::queued(&h.queue.path)).sum()
    }

    fn queue_dir(&self) -> PathBuf {
        self.hops[0].queue.path.clone()
    }

    fn held(&self) -> usize {
        0
    }

    fn release(&self) -> Result<usize, String> {
        Err(format!(
            "--flush: the {} lab has no hold queue; the flush benchmark runs on --lab postfix",
            F::NAME
        ))
    }

    fn dns_deferred(&self) -> usize {
        self.hops
            .last()
            .map_or(0, |h| F::dns_deferred(&read(&h.log())))
    }

    fn logs_deliveries(&self) -> bool {
        self.logging
    }

    fn queue_states(&self) -> Vec<QueueState> {
        let mut all = Vec::new();
        for h in &self.hops {
            queues::add(&mut all, &F::states(&h.queue.path));
        }
        all
    }

    fn crash(&self, cut_power: bool) -> Result<super::Crashed, String> {
        self.crash_all(cut_power)
    }

    fn restart(&self) -> Result<(), String> {
        self.restart_all()
    }

    /// The ballast in the entry's loop-mounted queue file system.
    fn fill_queue(&self, leave: u64) -> Result<super::QueueFilled, String> {
        let name = F::NAME;
        let mut d = self.entry_disk()?.lock().unwrap_or_else(|p| p.into_inner());
        let ballast = d.fill(leave).map_err(|e| format!("lab {name}: {e}"))?;
        Ok(super::QueueFilled {
            size: d.size(),
            ballast,
            free: d.free_bytes().map_err(|e| format!("lab {name}: {e}"))?,
        })
    }

    fn free_queue(&self) -> Result<(), String> {
        let mut d = self.entry_disk()?.lock().unwrap_or_else(|p| p.into_inner());
        d.free().map_err(|e| format!("lab {}: {e}", F::NAME))
    }
}

impl<F: Flavor> Chain<F> {
    /// The entry's loop-mounted queue file system, or why there is none.
    fn entry_disk(&self) -> Result<&std::sync::Mutex<LoopFs>, String> {
        if !F::DISK_FULL {
            return Err(super::NO_FAULTS.into());
        }
        self.hops
            .first()
            .and_then(|h| h.disk.as_ref())
            .ok_or_else(|| {
                format!(
                    "lab {}: filling the queue needs it on a loop device",
                    F::NAME
                )
            })
    }

    /// Every instance's tree killed at once; with `cut_power`, then each LazyFS queue
    /// drops what was not fsynced, after its report of what that is.
    fn crash_all(&self, cut_power: bool) -> Result<super::Crashed, String> {
        let name = F::NAME;
        if F::RESTART.is_none() {
            return Err(super::NO_FAULTS.into());
        }
        let roots: Vec<PathBuf> = self.hops.iter().map(Hop::pid_file).collect();
        let queues: Vec<&std::path::Path> =
            self.hops.iter().map(|h| h.queue.path.as_path()).collect();
        let mut crashed = super::Crashed {
            killed: super::crash::kill_trees(&roots, &queues)
                .map_err(|e| format!("lab {name}: {e}"))?,
            ..super::Crashed::default()
        };
        if !cut_power {
            return Ok(crashed);
        }
        let (mut files, mut bytes) = (Vec::new(), 0);
        for h in &self.hops {
            let Some(q) = &h.lazy else {
                return Err(format!("lab {name}: a power cut needs the queue on LazyFS"));
            };
            let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
            let u = q.unsynced().map_err(|e| format!("lab {name}: {e}"))?;
            q.cut_power().map_err(|e| format!("lab {name}: {e}"))?;
            files.extend(u.files);
            bytes += u.bytes;
        }
        crashed.unsynced_files = Some(files);
        crashed.unsynced_bytes = Some(bytes);
        Ok(crashed)
    }

    /// Each instance started again on its configuration and queue, last hop first, each
    /// awaited until it greets.
    fn restart_all(&self) -> Result<(), String> {
        let name = F::NAME;
        let Some(relaunch) = F::RESTART else {
            return Err(super::NO_FAULTS.into());
        };
        for hop in self.hops.iter().rev() {
            relaunch(hop, &self.opts).map_err(|e| format!("lab {name}: restart: {e}"))?;
            let files = [hop.pid_file()];
            host::wait_for_greeting(hop.entry, &hop.name, name, &|| host::trees(&files))
                .map_err(|e| format!("lab {name}: restart: {e}"))?;
        }
        Ok(())
    }
}

impl<F: Flavor> Drop for Chain<F> {
    fn drop(&mut self) {
        for h in &mut self.hops {
            h.stop();
        }
    }
}
