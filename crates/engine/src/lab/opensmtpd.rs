//! A disposable OpenSMTPD (Debian 12's opensmtpd 6.8, unpacked by
//! `scripts/install-mtas.sh`). Its spool, privilege-separation and control-socket paths
//! are compiled in, so each instance runs in its own namespace (see `isolate`) where the
//! lab's queue is `/var/spool/smtpd`; it relays everything from loopback to the next hop
//! without TLS, with its connection limits and delays raised to the Postfix lab's. It runs
//! in the foreground (`smtpd -d`), its log being what it writes; deliveries are
//! `result="Ok"` lines. Its retry timer is compiled in (minutes), so the lab has it retry
//! every 2 s with `smtpctl schedule all`.

use std::path::{Path, PathBuf};

use super::LabError;
use super::chain::{self, Flavor, Hop};
use super::host::io;
use super::{LabOptions, MtaLimits};
use crate::stats::queues::QueueState;

const BINARY: &str = "usr/sbin/smtpd";
const CTL: &str = "usr/sbin/smtpctl";

/// The OpenSMTPD lab.
pub struct OpenSmtpd;

/// The OpenSMTPD lab's chain of instances.
pub type Lab = chain::Chain<OpenSmtpd>;

/// What it does beyond relaying (`--fault`s, `--mta-logging`, … are refused without).
const FEATURES: super::Features = super::Features {
    log: super::LogSyntax::Opensmtpd,
    ..super::Features::RELAY
};

/// OpenSMTPD's line in the lab registry.
pub const KIND: super::Mta = chain::kind::<OpenSmtpd>(
    "OpenSMTPD, unpacked beside it by scripts/install-mtas.sh",
    FEATURES,
);

fn path(rel: &str) -> PathBuf {
    chain::mta_root().join("opensmtpd").join(rel)
}

/// smtpd.conf of one instance.
fn config(hop: &Hop, opts: &LabOptions) -> Result<String, LabError> {
    let MtaLimits {
        processes,
        per_destination,
    } = opts.limits;
    if processes.is_some() {
        return Err(LabError::Setting(
            "--mta-processes: OpenSMTPD runs a fixed set of event-driven processes and has no process or connection limit to set; leave it out".into(),
        ));
    }
    if opts.dns.is_some() {
        return Err(LabError::Setting(
            "--dns-domains: OpenSMTPD delivers by MX to port 25 only, where the lab's sinks cannot listen; run DNS benchmarks on postfix, exim or sendmail".into(),
        ));
    }
    let per = per_destination.unwrap_or(100);
    let mut conf = format!(
        "# Limits raised to the Postfix lab's: connections per destination (default 10 per
# host, 5 per route), no delays between them (default 5 s and 2 s), messages per session.
mta limit max-conn-per-host {per} max-conn-per-route {per} max-conn-per-relay {per} max-conn-per-domain {per} max-conn-per-source {per} max-conn-per-connector {per} session-mail-max 1000 conn-delay-relay 0 conn-delay-host 0 conn-delay-route 0 reconn-delay-route 0
mta max-deferred 100000
scheduler limit max-inflight 100000
smtp limit max-mails 100000
smtp limit max-rcpt 100000
smtp max-message-size 100M
"
    );
    for (k, v) in &opts.settings {
        conf.push_str(&format!("{k} {v}\n"));
    }
    let next = match hop.next.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    conf.push_str(&format!(
        "listen on 127.0.0.1 port {port} hostname {name}
action \"onward\" relay host smtp+notls://{next}:{nport}
match from any for any action \"onward\"
",
        port = hop.entry.port(),
        name = hop.name,
        nport = hop.next.port(),
    ));
    Ok(conf)
}

/// Starts `smtpd -d` in its namespace on the configuration and spool `start` made (again
/// after a crash).
fn launch(hop: &Hop, opts: &LabOptions) -> Result<(), LabError> {
    let conf = hop.dir.join("smtpd.conf");
    // Its spool must belong to root and let others only through.
    super::host::set_mode(&hop.queue.path, 0o711);
    let mut iso = hop.isolation(opts)?;
    iso.tmpfs = vec!["/var/spool".into(), "/var/lib".into(), "/run".into()];
    iso.dirs = vec!["/var/lib/opensmtpd/empty".into()];
    iso.binds
        .push((hop.queue.path.clone(), PathBuf::from("/var/spool/smtpd")));
    let args = ["-d".to_string(), "-f".into(), conf.display().to_string()];
    let cmd = iso
        .command(&path(BINARY), &args)
        .map_err(|e| io("prepare the namespace", e))?;
    hop.spawn_daemon(cmd, "smtpd")
}

impl Flavor for OpenSmtpd {
    const LOG: &'static str = "maillog";
    const NAME: &'static str = "opensmtpd";

    fn check() -> Result<(), String> {
        chain::check_unpacked("opensmtpd", "OpenSMTPD", BINARY).map(|_| ())
    }

    fn start(hop: &mut Hop, opts: &LabOptions) -> Result<(), LabError> {
        let conf = hop.dir.join("smtpd.conf");
        std::fs::write(&conf, config(hop, opts)?).map_err(|e| io("write smtpd.conf", e))?;
        let out = std::process::Command::new(path(BINARY))
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .output()
            .map_err(|e| io("run smtpd", e))?;
        if !out.status.success() {
            let why = chain::said(&[out.stdout, out.stderr].concat());
            return Err(if opts.settings.is_empty() {
                LabError::Failed(format!("lab: OpenSMTPD refused its configuration: {why}"))
            } else {
                LabError::Setting(format!(
                    "--mta-conf: OpenSMTPD refused its configuration ({why}); each KEY=VALUE is the smtpd.conf line `KEY VALUE`"
                ))
            });
        }
        launch(hop, opts)?;
        // The daemon's pid is read at each retry: a restart after a crash has a new one.
        let ctl = format!(
            "nsenter --mount --target=\"$(cat '{}')\" '{}' schedule all",
            hop.pid_file().display(),
            path(CTL).display()
        );
        hop.retry_every(
            std::time::Duration::from_secs(2),
            vec!["sh".into(), "-c".into(), ctl],
        );
        Ok(())
    }

    /// OpenSMTPD commits each message it accepts to its spool (`queue/`) before the 250,
    /// and on start schedules what a crash left there.
    const RESTART: Option<chain::Relaunch> = Some(launch);

    /// `mta delivery … result="Ok"` lines, one per recipient.
    fn delivered(log: &str) -> usize {
        log.lines()
            .filter(|l| l.contains("mta delivery") && l.contains("result=\"Ok\""))
            .count()
    }

    /// Never in DNS benchmarks (refused above).
    fn dns_deferred(_log: &str) -> usize {
        0
    }

    /// Each message is a `message` file in `incoming/` or `queue/`.
    fn queued(queue: &Path) -> usize {
        ["incoming", "queue"]
            .iter()
            .map(|d| super::host::count_files_where(&queue.join(d), &|f| f.ends_with("message")))
            .sum()
    }

    /// Its two spool directories: `incoming` (being received, not yet committed) and
    /// `queue` (committed, waiting or being delivered); OpenSMTPD keeps deferred envelopes
    /// in the scheduler's memory, not in a directory of their own.
    fn states(queue: &Path) -> Vec<QueueState> {
        ["incoming", "queue"]
            .iter()
            .map(|d| {
                let n = super::host::count_files_where(&queue.join(d), &|f| f.ends_with("message"));
                QueueState::new(d, n as u64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_are_the_ok_results() {
        let log = r#"4c8b smtp envelope evpid=4ad1fe6389daebd3 from=<x@y.test> to=<a@b.test>
4c8b mta delivery evpid=4ad1fe6389daebd3 from=<x@y.test> to=<a@b.test> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="Ok" stat="250 2.0.0 message accepted"
4c8c mta delivery evpid=4ad1fe6389daebd4 from=<x@y.test> to=<b@b.test> rcpt=<-> source="127.0.0.1" relay="127.0.0.1 (localhost)" delay=0s result="TempFail" stat="451 try later"
"#;
        assert_eq!(OpenSmtpd::delivered(log), 1);
    }
}
