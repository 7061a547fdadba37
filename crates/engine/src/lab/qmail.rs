//! A disposable qmail (notqmail 1.09, built from `third_party/notqmail` by
//! `scripts/install-mtas.sh`), the MTA seed 004 compares with Postfix. Its home
//! (`/var/qmail`) is compiled in, so each instance runs in its own namespace (see
//! `isolate`) where the instance's directory is bound over it, with the built programs as
//! its `bin` and the lab's queue (a copy of the built, empty one) as its `queue`.
//! `qmail-smtpd` runs under Debian's `tcpserver` (ucspi-tcp) and `qmail-start` runs
//! `qmail-send`, `-lspawn`, `-rspawn` and `-clean` with the users it expects;
//! `control/smtproutes` sends every message to the next hop's port. qmail-send logs to its
//! standard output (no multilog), which is the lab's log; deliveries are its
//! `delivery N: success:` lines. With `--mta-logging off` its output is discarded and the
//! delivered count is the sink's; with `multilog` it goes through daemontools' multilog
//! (as seed 004 ran it), whose `current` is then the lab's log. Its retry schedule is minutes, so the lab has it retry
//! every 2 s with SIGALRM.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::LabError;
use super::chain::{self, Flavor, Hop};
use super::host::io;
use super::{LabOptions, MtaLimits, MtaLogging};
use crate::stats::queues::QueueState;

/// Its home as built, below the MTA root.
const HOME: &str = "var/qmail";
/// The home compiled into its programs.
const COMPILED_HOME: &str = "/var/qmail";
/// The most parallel deliveries it can run: `conf-spawn` as built.
const MAX_SPAWN: u32 = 120;

/// The control files the lab lets `--mta-conf` set (the ones `qmail-control(5)` lists,
/// but the routes, the host name and the lists of local domains the lab itself writes).
const CONTROLS: &[&str] = &[
    "badmailfrom",
    "bouncefrom",
    "bouncehost",
    "concurrencylocal",
    "concurrencyremote",
    "databytes",
    "defaultdomain",
    "defaulthost",
    "doublebouncehost",
    "doublebounceto",
    "envnoathost",
    "helohost",
    "idhost",
    "localiphost",
    "percenthack",
    "plusdomain",
    "queuelifetime",
    "rcpthosts",
    "smtpgreeting",
    "timeoutconnect",
    "timeoutremote",
    "timeoutsmtpd",
];

/// The qmail lab.
pub struct Qmail;

/// The qmail lab's chain of instances.
pub type Lab = chain::Chain<Qmail>;

/// What it does beyond relaying (`--fault`s, `--mta-logging`, … are refused without).
const FEATURES: super::Features = super::Features {
    logging_off: true,
    multilog: true,
    ..super::Features::RELAY
};

/// qmail's line in the lab registry.
pub const KIND: super::Mta = chain::kind::<Qmail>(
    "qmail (notqmail 1.09), built beside it by scripts/install-mtas.sh",
    FEATURES,
);

fn built(rel: &str) -> PathBuf {
    chain::mta_root().join("qmail").join(HOME).join(rel)
}

/// The control files of the instance called `name` relaying to `next`, `(file, contents)`.
fn controls(
    name: &str,
    next: std::net::SocketAddr,
    opts: &LabOptions,
) -> Result<Vec<(String, String)>, LabError> {
    let MtaLimits {
        per_destination, ..
    } = opts.limits;
    if opts.dns.is_some() {
        return Err(LabError::Setting(
            "--dns-domains: qmail delivers by MX to port 25 only, where the lab's sinks cannot listen; run DNS benchmarks on postfix, exim or sendmail".into(),
        ));
    }
    let per = per_destination.unwrap_or(100);
    if per > MAX_SPAWN {
        return Err(LabError::Setting(format!(
            "--mta-dest-concurrency: qmail runs at most {MAX_SPAWN} deliveries at once (conf-spawn as built); give {MAX_SPAWN} or less"
        )));
    }
    let std::net::IpAddr::V4(ip) = next.ip() else {
        return Err(LabError::Failed(
            "lab: qmail relays over IPv4 only; give the relay target an IPv4 address".into(),
        ));
    };
    let mut files = vec![
        ("me".to_string(), name.to_string()),
        // No local domains: everything goes to the next hop.
        ("locals".into(), String::new()),
        ("smtproutes".into(), format!(":{ip}:{}", next.port())),
        ("concurrencyremote".into(), per.to_string()),
    ];
    for (k, v) in &opts.settings {
        if !CONTROLS.contains(&k.as_str()) {
            return Err(LabError::Setting(format!(
                "--mta-conf: qmail has no control file {k} the lab lets you set; each KEY=VALUE writes control/KEY, one of {}",
                CONTROLS.join(", ")
            )));
        }
        files.retain(|(name, _)| name != k);
        files.push((k.clone(), v.clone()));
    }
    Ok(files)
}

/// The file `services` writes `qmail-send`'s process id to (the retry signal's target).
fn send_pid(hop: &Hop) -> PathBuf {
    hop.dir.join("qmail-send.pid")
}

/// The shell script run in the namespace: `tcpserver` serving `qmail-smtpd` as `qmaild`,
/// and `qmail-start` (which becomes `qmail-send` and starts the rest), both below the
/// shell (the lab's pid file names it) and started in the instance's directory (so that
/// `leftovers` finds them by it, whichever dies first); when `qmail-send` ends, the SMTP
/// service goes with it. `qmail-start` finds its programs by `PATH`. `tcpserver -D` sets
/// TCP_NODELAY as qmail sites run it: without it, qmail-smtpd's two-part replies to a
/// pipelining client waited out the client's delayed ACK, 40 ms per MAIL (a newcomer saw
/// 5,225 msg/min where the same qmail takes 39,857 without pipelining).
fn services(hop: &Hop, opts: &LabOptions) -> String {
    let processes = opts.limits.processes.unwrap_or(512);
    format!(
        "cd '{dir}'
PATH={COMPILED_HOME}/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
tcpserver -q -D -H -R -l {name} -c {processes} -b {processes} -u \"$(id -u qmaild)\" -g \"$(id -g qmaild)\" 127.0.0.1 {port} {COMPILED_HOME}/bin/qmail-smtpd &
smtpd=$!
{multilog}qmail-start ./Maildir/ {log}&
echo $! > '{pid}'
wait $!
kill $smtpd
",
        dir = hop.dir.display(),
        name = hop.name,
        port = hop.entry.port(),
        pid = send_pid(hop).display(),
        log = match opts.logging {
            MtaLogging::On => "",
            MtaLogging::Off => ">/dev/null 2>&1 ",
            MtaLogging::Multilog => ">./logpipe 2>&1 ",
        },
        // As qmail sites run it (s: 16 MB files, so that a run's lines stay in `current`,
        // the file the lab counts deliveries in); it ends when qmail-send closes the pipe.
        multilog = match opts.logging {
            MtaLogging::Multilog => {
                "[ -p ./logpipe ] || mkfifo ./logpipe\nmultilog s16777215 n20 ./multilog <./logpipe &\n"
            }
            _ => "",
        },
    )
}

/// Waits up to 10 s for `qmail-send`'s first status line; a qmail that cannot start says
/// why in the log, which the error quotes.
fn wait_for_send(hop: &Hop) -> Result<(), LabError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read(hop.log()).unwrap_or_default();
        if String::from_utf8_lossy(&log).contains("status: ") {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(LabError::Failed(format!(
                "lab: qmail-send did not start: {}",
                chain::said(&log)
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Fills the lab's queue with the empty one the build made (its directories, owners,
/// modes and trigger fifo), then gives its top to qmail's queue user.
fn make_queue(queue: &Path) -> Result<(), LabError> {
    let from = built("queue");
    let out = Command::new("cp")
        .arg("-a")
        .arg(from.join("."))
        .arg(queue)
        .output()
        .map_err(|e| io("run cp", e))?;
    if !out.status.success() {
        return Err(LabError::Failed(format!(
            "lab: cannot copy qmail's empty queue: {}",
            chain::said(&out.stderr)
        )));
    }
    super::host::chown_to(queue, "qmailq:qmail")?;
    super::host::set_mode(queue, 0o750);
    Ok(())
}

/// Starts qmail (`services`) in its namespace, where its home, programs and queue are
/// bound over the compiled-in paths: at start, and again on the same queue after a crash.
fn launch(hop: &Hop, opts: &LabOptions) -> Result<(), LabError> {
    let mut iso = hop.isolation(opts)?;
    let compiled = PathBuf::from(COMPILED_HOME);
    iso.binds.push((hop.dir.join("home"), compiled.clone()));
    iso.binds.push((built("bin"), compiled.join("bin")));
    iso.binds
        .push((hop.queue.path.clone(), compiled.join("queue")));
    let args = ["-c".to_string(), services(hop, opts), "qmail".into()];
    let cmd = iso
        .command(Path::new("/bin/sh"), &args)
        .map_err(|e| io("prepare the namespace", e))?;
    hop.spawn_daemon(cmd, "qmail")
}

impl Flavor for Qmail {
    const LOG: &'static str = "maillog";
    const NAME: &'static str = "qmail";

    fn check() -> Result<(), String> {
        chain::check_unpacked("qmail", "qmail", &format!("{HOME}/bin/qmail-send"))?;
        if Command::new("tcpserver").output().is_err() {
            return Err(
                "tcpserver is missing (qmail's SMTP service runs under it; Debian's ucspi-tcp); run scripts/install-mtas.sh".into(),
            );
        }
        Ok(())
    }

    fn start(hop: &mut Hop, opts: &LabOptions) -> Result<(), LabError> {
        let home = hop.dir.join("home");
        let control = home.join("control");
        for d in [&control, &home.join("users"), &home.join("alias")] {
            std::fs::create_dir_all(d).map_err(|e| io("create qmail's home", e))?;
        }
        for (name, text) in controls(&hop.name, hop.next, opts)? {
            std::fs::write(control.join(&name), format!("{text}\n"))
                .map_err(|e| io(&format!("write control/{name}"), e))?;
        }
        make_queue(&hop.queue.path)?;
        if opts.logging == MtaLogging::Multilog {
            // qmail-send's lines are in multilog's `current` (what the shell itself says
            // goes there too until multilog starts, then into a file multilog sets aside).
            std::fs::create_dir_all(hop.dir.join("multilog"))
                .map_err(|e| io("create multilog's directory", e))?;
            hop.log_name = "multilog/current";
        }
        launch(hop, opts)?;
        // Without its log there is no status line to wait for: the greeting check that
        // follows, and the drain, tell whether it runs.
        if opts.logging != MtaLogging::Off {
            wait_for_send(hop)?;
        }
        hop.retry_every(
            std::time::Duration::from_secs(2),
            vec![
                "sh".into(),
                "-c".into(),
                format!("kill -ALRM \"$(cat '{}')\"", send_pid(hop).display()),
            ],
        );
        Ok(())
    }

    /// qmail keeps each message it accepts in its queue (`mess/`, with its envelope in
    /// `intd/`, then `todo/`, `info/` and `remote/`), and qmail-send, started again,
    /// delivers what a crash left there (its retry signal follows the new pid file).
    const RESTART: Option<chain::Relaunch> = Some(launch);

    /// Not on LazyFS: LazyFS creates every file as root, and qmail-rspawn refuses to
    /// deliver a message file not owned by qmailq (`deferral: Sorry, message has wrong
    /// owner. (#4.3.5)`, every message, forever): a power-loss run lost all it accepted.
    const ON_LAZYFS: bool = false;

    /// `delivery N: success: …` lines, one per recipient.
    fn delivered(log: &str) -> usize {
        log.lines()
            .filter(|l| l.starts_with("delivery ") && l.contains(": success: "))
            .count()
    }

    /// Never in DNS benchmarks (refused above).
    fn dns_deferred(_log: &str) -> usize {
        0
    }

    /// Each message is a file in `mess/`, one qmail-send still works on: its number in
    /// `todo/` (not yet preprocessed) or in `info/` (until its delivery ends: "end msg"
    /// unlinks it, then qmail-clean the rest). A kill between the two leaves the `mess/`
    /// file alone, which qmail-send removes only after 36 hours; a drain that counted it
    /// waited its whole timeout for a message its log showed delivered.
    fn queued(queue: &Path) -> usize {
        super::host::count_files_where(&queue.join("mess"), &|f| {
            let (Some(id), Some(split)) = (f.file_name(), f.parent().and_then(Path::file_name))
            else {
                return false;
            };
            queue.join("todo").join(id).exists() || queue.join("info").join(split).join(id).exists()
        })
    }

    /// `qmail-qstat`'s two numbers: messages in the queue (`mess/`, without those a crash
    /// left that qmail-send no longer works on, which qmail-qstat counts) and files below
    /// `todo/` (not yet preprocessed by qmail-send).
    fn states(queue: &Path) -> Vec<QueueState> {
        vec![
            QueueState::new("queue", Self::queued(queue) as u64),
            QueueState::new("todo", super::host::count_files(&queue.join("todo")) as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message in `todo/` or `info/` counts; a `mess/` file a kill left after its
    /// delivery ended ("end msg", `info/` unlinked) does not.
    #[test]
    fn the_queue_is_the_messages_qmail_send_still_works_on() {
        let q = std::env::temp_dir().join(format!("mailbench-qmail-q-{}", std::process::id()));
        for (dir, f) in [
            ("mess/3", "100"),
            ("todo", "100"),
            ("mess/5", "200"),
            ("info/5", "200"),
            ("mess/7", "300"),
        ] {
            std::fs::create_dir_all(q.join(dir)).expect("dir");
            std::fs::write(q.join(dir).join(f), "x").expect("file");
        }
        let n = Qmail::queued(&q);
        let _ = std::fs::remove_dir_all(&q);
        assert_eq!(n, 2, "expected 100 (todo) and 200 (info) queued, not 300");
    }

    fn options(settings: &[(&str, &str)], per_destination: Option<u32>) -> LabOptions {
        LabOptions {
            hops: 1,
            queue: super::super::QueueKind::Tmpfs,
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            limits: MtaLimits {
                processes: None,
                per_destination,
            },
            relay: "127.0.0.1:2525".parse().expect("address"),
            relay_lmtp: false,
            starttls: false,
            hold: false,
            dkim: None,
            dns: None,
            lookup: None,
            logging: MtaLogging::On,
            between: None,
        }
    }

    #[test]
    fn the_routes_send_everything_to_the_next_port_and_a_setting_replaces_the_labs() {
        let next = "127.0.0.1:4000".parse().expect("address");
        let files = controls(
            "lab0.test",
            next,
            &options(&[("concurrencyremote", "7")], None),
        )
        .expect("accepted");
        let file = |n: &str| {
            files
                .iter()
                .filter(|(f, _)| f == n)
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(file("smtproutes"), [":127.0.0.1:4000"]);
        assert_eq!(file("me"), ["lab0.test"]);
        assert_eq!(file("locals"), [""]);
        assert_eq!(file("concurrencyremote"), ["7"]);
        let per = controls("lab0.test", next, &options(&[], Some(30))).expect("accepted");
        assert!(per.contains(&("concurrencyremote".into(), "30".into())));
    }

    #[test]
    fn an_unknown_control_file_or_too_many_deliveries_is_the_users_error() {
        let next = "127.0.0.1:4000".parse().expect("address");
        for opts in [
            options(&[("smtproutes", ":10.0.0.1")], None),
            options(&[("../x", "1")], None),
            options(&[], Some(MAX_SPAWN + 1)),
        ] {
            assert!(matches!(
                controls("lab0.test", next, &opts),
                Err(LabError::Setting(_))
            ));
        }
    }

    #[test]
    fn deliveries_are_the_success_lines() {
        let log = "new msg 1835008
info msg 1835008: bytes 312 from <x@y.test> qp 4242 uid 109
starting delivery 1: msg 1835008 to remote a@b.test
status: local 0/10 remote 1/100
delivery 1: success: 127.0.0.1_accepted_message./Remote_host_said:_250_2.0.0_Ok/
delivery 2: deferral: Connected_to_127.0.0.1_but_greeting_failed./Remote_host_said:_421_try_later/
delivery 3: failure: Sorry,_I_couldn't_find_any_host_named_nowhere.test._(#5.1.2)/
end msg 1835008
";
        assert_eq!(Qmail::delivered(log), 1);
    }
}
