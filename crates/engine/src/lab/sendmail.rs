//! A disposable Sendmail (Debian 12's sendmail-bin 8.17, unpacked by
//! `scripts/install-mtas.sh`): its sendmail.cf is built with m4 from sendmail-cf's macros
//! in the lab directory, with its own queue, relaying everything to the next hop as a
//! smart host (or by MX through the test DNS), load-average limits off, no STARTTLS to the
//! next hop, queue runs every 2 s. It logs through syslog only, so it runs in its own
//! namespace whose `/dev/log` is the lab's log socket (see `syslog`), with its host name
//! in `/etc/hosts` (else it sleeps a minute at start looking for it). Deliveries are its
//! `stat=Sent` lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::LabError;
use super::chain::{self, Flavor, Hop};
use super::host::io;
use super::{LabOptions, MtaLimits};
use crate::stats::queues::QueueState;

const BINARY: &str = "usr/libexec/sendmail/sendmail";

/// The Sendmail lab.
pub struct Sendmail;

/// The Sendmail lab's chain of instances.
pub type Lab = chain::Chain<Sendmail>;

/// What it does beyond relaying (`--fault`s, `--mta-logging`, … are refused without).
const FEATURES: super::Features = super::Features::RELAY;

/// Sendmail's line in the lab registry.
pub const KIND: super::Mta = chain::kind::<Sendmail>(
    "Sendmail, unpacked beside it by scripts/install-mtas.sh",
    FEATURES,
);

fn path(rel: &str) -> PathBuf {
    chain::mta_root().join("sendmail").join(rel)
}

/// The m4 source of one instance's sendmail.cf.
fn mc(hop: &Hop, opts: &LabOptions) -> Result<String, LabError> {
    let MtaLimits {
        processes,
        per_destination,
    } = opts.limits;
    chain::no_per_destination("Sendmail", per_destination)?;
    let d = hop.dir.display();
    let dns = opts.dns.filter(|_| hop.last);
    let port = dns.map_or(hop.next.port(), |d| d.port);
    // By MX through the test DNS, or everything to the next hop; `relay:` because a bare
    // [127.0.0.1] is taken as this host and the mail then goes by MX.
    let route = match dns {
        Some(_) => String::new(),
        None => format!(
            "define(`SMART_HOST', `relay:[{}]')dnl\n",
            match hop.next.ip() {
                std::net::IpAddr::V6(ip) => format!("IPv6:{ip}"),
                ip => ip.to_string(),
            }
        ),
    };
    Ok(format!(
        "divert(-1)
divert(0)dnl
OSTYPE(`linux')dnl
define(`confDOMAIN_NAME', `{name}')dnl
define(`QUEUE_DIR', `{q}')dnl
define(`STATUS_FILE', `{d}/statistics')dnl
define(`confPID_FILE', `{d}/daemon.pid')dnl
define(`ALIAS_FILE', `')dnl
define(`confHOST_STATUS_DIRECTORY', `')dnl
define(`confQUEUE_LA', `10000')dnl
define(`confREFUSE_LA', `10000')dnl
define(`confDELAY_LA', `0')dnl
define(`confMAX_DAEMON_CHILDREN', `{processes}')dnl
define(`confCONNECTION_RATE_THROTTLE', `0')dnl
define(`confMIN_QUEUE_AGE', `0')dnl
define(`confBIND_OPTS', `-DNSRCH -DEFNAMES')dnl
define(`confDONT_PROBE_INTERFACES', `true')dnl
define(`confLOG_LEVEL', `9')dnl
{route}define(`RELAY_MAILER_ARGS', `TCP $h {port}')dnl
define(`ESMTP_MAILER_ARGS', `TCP $h {port}')dnl
FEATURE(`no_default_msa')dnl
FEATURE(`nocanonify')dnl
FEATURE(`promiscuous_relay')dnl
FEATURE(`accept_unresolvable_domains')dnl
DAEMON_OPTIONS(`Port={listen}, Addr=127.0.0.1, Name=MTA, Listen=1024')dnl
MAILER(`smtp')dnl
LOCAL_TRY_TLS
LOCAL_RULESETS
SLocal_try_tls
R$*\t$#error $@ 5.7.1 $: \"550 no STARTTLS to the next hop in the lab\"
",
        name = hop.name,
        q = hop.queue.path.display(),
        processes = processes.unwrap_or(512),
        listen = hop.entry.port(),
    ))
}

/// Starts the daemon (queue runs every 2 s) on the sendmail.cf `start` wrote, in its
/// namespace whose `/dev/log` is the instance's log socket (which outlives a crash).
fn launch(hop: &Hop, opts: &LabOptions) -> Result<(), LabError> {
    let mut iso = hop.isolation(opts)?;
    iso.dev_log = hop.capture.as_ref().map(|c| c.socket.clone());
    let args = [
        "-C".to_string(),
        hop.dir.join("sendmail.cf").display().to_string(),
        "-bd".into(),
        "-q2s".into(),
    ];
    let cmd = iso
        .command(&path(BINARY), &args)
        .map_err(|e| io("prepare the namespace", e))?;
    hop.run_daemon(cmd, "sendmail")
}

impl Flavor for Sendmail {
    const LOG: &'static str = "maillog";
    const NAME: &'static str = "sendmail";

    fn check() -> Result<(), String> {
        chain::check_unpacked("sendmail", "Sendmail", BINARY)?;
        if Command::new("m4").arg("--version").output().is_err() {
            return Err(
                "m4 is missing (it builds sendmail.cf); run scripts/install-mtas.sh".into(),
            );
        }
        Ok(())
    }

    fn start(hop: &mut Hop, opts: &LabOptions) -> Result<(), LabError> {
        let source = mc(hop, opts)?;
        let cf_dir = path("usr/share/sendmail/cf");
        let out = Command::new("m4")
            .arg(format!("-D_CF_DIR_={}/", cf_dir.display()))
            .arg(cf_dir.join("m4/cf.m4"))
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                if let Some(mut i) = c.stdin.take() {
                    i.write_all(source.as_bytes())?;
                }
                c.wait_with_output()
            })
            .map_err(|e| io("run m4 for sendmail.cf", e))?;
        if !out.status.success() {
            return Err(LabError::Failed(format!(
                "lab: m4 could not build sendmail.cf: {}",
                chain::said(&out.stderr)
            )));
        }
        let mut cf = String::from_utf8_lossy(&out.stdout).into_owned();
        for (k, v) in &opts.settings {
            cf.push_str(&format!("O {k}={v}\n"));
        }
        let cf_path = hop.dir.join("sendmail.cf");
        std::fs::write(&cf_path, cf).map_err(|e| io("write sendmail.cf", e))?;
        let iso = hop.isolation(opts)?;
        refused(&iso, &cf_path, &opts.settings)?;
        super::host::set_mode(&hop.queue.path, 0o700);
        hop.capture = Some(super::syslog::Capture::start(
            &hop.dir.join("log.sock"),
            &hop.log(),
        )?);
        launch(hop, opts)
    }

    /// Sendmail keeps each message it accepts as `df` and `qf` files in its queue
    /// directory, and its queue runs (every 2 s) deliver what a crash left there.
    const RESTART: Option<chain::Relaunch> = Some(launch);

    /// The recipients of its `stat=Sent` lines (`to=<a>,<b>, …`).
    fn delivered(log: &str) -> usize {
        log.lines()
            .filter(|l| l.contains("stat=Sent"))
            .map(|l| {
                l.split_once(" to=")
                    .map(|(_, rest)| {
                        let to = rest.split(", delay=").next().unwrap_or(rest);
                        to.matches('<').count().max(1)
                    })
                    .unwrap_or(0)
            })
            .sum()
    }

    /// `stat=Deferred` lines that blame the name server.
    fn dns_deferred(log: &str) -> usize {
        log.lines()
            .filter(|l| {
                l.contains("stat=Deferred") && (l.contains("Name server") || l.contains("DNS"))
            })
            .count()
    }

    /// Each message is a `qf` file with something in it. A zero-length `qf` is what a
    /// power cut left of a message whose control file was never written to disk: Sendmail
    /// never delivers it (it leaves it alone for 10 minutes, then removes it), so counting
    /// it kept the drain waiting for nothing and told of a message still queued.
    fn queued(queue: &Path) -> usize {
        std::fs::read_dir(queue).map_or(0, |rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("qf"))
                .filter(|e| e.metadata().is_ok_and(|m| m.len() > 0))
                .count()
        })
    }

    /// One queue, as `mailq` counts it (its `qf` files): Sendmail marks a deferred
    /// message inside its `qf` file, not by moving it.
    fn states(queue: &Path) -> Vec<QueueState> {
        vec![QueueState::new("queue", Self::queued(queue) as u64)]
    }
}

/// Sendmail reads an unknown or bad option with a `readcf:` complaint and runs on; an
/// overridden one among them is refused.
/// (Run in the instance's namespace, where its host name is known: elsewhere Sendmail
/// first sleeps a minute looking for it.)
fn refused(
    iso: &super::isolate::Isolation,
    cf: &Path,
    settings: &[(String, String)],
) -> Result<(), LabError> {
    if settings.is_empty() {
        return Ok(());
    }
    let args = [
        "-C".to_string(),
        cf.display().to_string(),
        "-bt".into(),
        "-d0.1".into(),
    ];
    let out = iso
        .command(&path(BINARY), &args)
        .map_err(|e| io("prepare the namespace", e))?
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| io("run sendmail", e))?;
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    match text.lines().find(|l| l.contains("readcf:")) {
        Some(l) => Err(LabError::Setting(format!(
            "--mta-conf: Sendmail refused a setting ({}); each KEY=VALUE is the sendmail.cf option `O KEY=VALUE`",
            l.trim()
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_recipient_of_a_sent_line_counts() {
        let log = "Nov 24 17:52:39 sendmail[12339]: 6AOHqd9s012337: to=<a@b.test>, delay=00:00:00, xdelay=00:00:00, mailer=relay, pri=30234, relay=[127.0.0.1] [127.0.0.1], dsn=2.0.0, stat=Sent (message accepted)
Nov 24 17:52:39 sendmail[12340]: 6AOHqd9s012338: to=<a@b.test>,<c@b.test>, delay=00:00:00, mailer=relay, dsn=2.0.0, stat=Sent (message accepted)
Nov 24 17:52:39 sendmail[12341]: 6AOHqd9s012339: to=<d@b.test>, delay=00:00:01, mailer=relay, dsn=4.0.0, stat=Deferred: 451 try later
Nov 24 17:52:40 sendmail[12342]: 6AOHqd9s012340: to=<e@d1.example.test>, delay=00:00:01, mailer=esmtp, dsn=4.4.3, stat=Deferred: Name server: d1.example.test.: host name lookup failure
";
        assert_eq!(Sendmail::delivered(log), 3);
        assert_eq!(Sendmail::dns_deferred(log), 1);
    }
}
