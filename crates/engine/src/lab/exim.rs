//! A disposable Exim (Debian 12's exim4-daemon-light 4.96, unpacked by
//! `scripts/install-mtas.sh`): its own configuration, spool and log in the lab directory,
//! relaying everything from loopback to the next hop with `manualroute` (or by MX through
//! the test DNS with `dnslookup`), connection limits raised to the Postfix lab's, quick
//! retries. Run as `exim4 -C conf -bd -q2s`; deliveries are its ` => ` / ` -> ` log lines.

use std::path::Path;

use super::LabError;
use super::chain::{self, Flavor, Hop};
use super::host::{self, io};
use super::{LabOptions, MtaLimits};
use crate::stats::queues::QueueState;

const BINARY: &str = "usr/sbin/exim4";
/// The user Exim switches to (its compiled-in `exim_user`).
const USER: &str = "Debian-exim";

/// The Exim lab.
pub struct Exim;

/// The Exim lab's chain of instances.
pub type Lab = chain::Chain<Exim>;

/// What it does beyond relaying (`--fault`s, `--mta-logging`, … are refused without).
const FEATURES: super::Features = super::Features::RELAY;

/// Exim's line in the lab registry.
pub const KIND: super::Mta = chain::kind::<Exim>(
    "Exim 4, unpacked beside it by scripts/install-mtas.sh",
    FEATURES,
);

fn binary() -> std::path::PathBuf {
    chain::mta_root().join("exim").join(BINARY)
}

/// The main section, routers, transport and retry rule of one instance.
fn config(hop: &Hop, opts: &LabOptions) -> Result<String, LabError> {
    let d = hop.dir.display();
    let MtaLimits {
        processes,
        per_destination,
    } = opts.limits;
    chain::no_per_destination("Exim", per_destination)?;
    let dns = opts.dns.filter(|_| hop.last);
    let mut main = format!(
        "exim_path = {exe}
spool_directory = {q}
split_spool_directory = true
log_file_path = {d}/%slog
primary_hostname = {name}
daemon_smtp_ports = {port}
local_interfaces = 127.0.0.1
host_lookup =
rfc1413_hosts =
keep_environment =
tls_advertise_hosts =
# Every connection delivers what it accepts at once (not queued after the 10th message),
# with as many connections as the Postfix lab takes.
smtp_accept_max = {processes}
smtp_accept_queue_per_connection = 0
smtp_connect_backlog = {processes}
remote_max_parallel = 100
queue_run_max = 16
acl_smtp_rcpt = acl_check_rcpt
domainlist local_domains =
hostlist relay_from_hosts = 127.0.0.0/8
",
        exe = binary().display(),
        q = hop.queue.path.display(),
        name = hop.name,
        port = hop.entry.port(),
        processes = processes.unwrap_or(512),
    );
    // A client Exim drops (after more than smtp_accept_max_nonmail RSETs, as when a
    // full spool answers each MAIL FROM with a 452) is logged only with these.
    if !opts.settings.iter().any(|(k, _)| k == "log_selector") {
        main.push_str("log_selector = +smtp_protocol_error +smtp_syntax_error\n");
    }
    for (k, v) in &opts.settings {
        main.push_str(&format!("{k} = {v}\n"));
    }
    let router = match dns {
        // By MX, as in production, through the test DNS the namespace's resolv.conf names.
        Some(_) => "  driver = dnslookup\n  transport = remote_smtp\n  self = send\n".to_string(),
        None => format!(
            "  driver = manualroute\n  transport = remote_smtp\n  route_list = * {} byname\n  self = send\n",
            // Exim's lists are colon-separated: an IPv6 address doubles its colons.
            hop.next.ip().to_string().replace(':', "::")
        ),
    };
    let port = dns.map_or(hop.next.port(), |d| d.port);
    Ok(format!(
        "{main}
begin acl
acl_check_rcpt:
  accept hosts = +relay_from_hosts
  deny

begin routers
onward:
{router}
begin transports
remote_smtp:
  driver = smtp
  port = {port}
  hosts_avoid_tls = *

begin retry
# Retried within a run: every 2 s for 10 minutes.
* * F,10m,2s
"
    ))
}

/// Starts the daemon (with a queue runner every 2 s) on the configuration `start` wrote.
fn launch(hop: &Hop, opts: &LabOptions) -> Result<(), LabError> {
    let args = [
        "-C".to_string(),
        hop.dir.join("exim.conf").display().to_string(),
        "-bd".into(),
        "-q2s".into(),
        "-oP".into(),
        hop.pid_file().display().to_string(),
    ];
    let cmd = hop
        .isolation(opts)?
        .command(&binary(), &args)
        .map_err(|e| io("prepare the namespace", e))?;
    hop.run_daemon(cmd, "exim")
}

impl Flavor for Exim {
    const LOG: &'static str = "mainlog";
    const NAME: &'static str = "exim";

    fn check() -> Result<(), String> {
        chain::check_unpacked("exim", "Exim", BINARY).map(|_| ())
    }

    fn start(hop: &mut Hop, opts: &LabOptions) -> Result<(), LabError> {
        let conf = hop.dir.join("exim.conf");
        std::fs::write(&conf, config(hop, opts)?).map_err(|e| io("write exim.conf", e))?;
        for p in [&hop.queue.path, &hop.dir] {
            host::chown_to(p, &format!("{USER}:{USER}"))?;
        }
        // Exim reads its configuration before it starts; what it refuses names the line.
        let out = std::process::Command::new(binary())
            .arg("-C")
            .arg(&conf)
            .arg("-bV")
            .output()
            .map_err(|e| io("run exim", e))?;
        if !out.status.success() {
            let why = chain::said(&out.stderr);
            return Err(
                match opts
                    .settings
                    .iter()
                    .find(|(k, _)| why.contains(&format!("\"{k}\"")))
                {
                    Some((k, _)) => LabError::Setting(format!(
                        "--mta-conf {k}: Exim refused it ({why}); fix or drop the value"
                    )),
                    None => LabError::Failed(format!("lab: Exim refused its configuration: {why}")),
                },
            );
        }
        launch(hop, opts)
    }

    /// Exim keeps each message it accepts in its spool (`-D` data, `-H` header file),
    /// and on start a queue runner delivers what a crash left there.
    const RESTART: Option<chain::Relaunch> = Some(launch);

    /// Exim checks its spool's free space before it takes a message: below
    /// `check_spool_space` (10M by default since 4.88; the SIZE of MAIL FROM added) it
    /// answers MAIL FROM with a 452 and logs the refusal, so a nearly full disk is
    /// refused rather than written to.
    const DISK_FULL: bool = true;

    /// ` => ` (a delivery) and ` -> ` (another recipient of the same delivery) lines.
    fn delivered(log: &str) -> usize {
        log.lines()
            .filter(|l| l.contains(" => ") || l.contains(" -> "))
            .count()
    }

    /// ` == ` (deferred) lines whose reason is a lookup that failed.
    fn dns_deferred(log: &str) -> usize {
        log.lines()
            .filter(|l| {
                l.contains(" == ")
                    && (l.contains("host lookup did not complete")
                        || l.contains("DNS")
                        || l.contains("all host address lookups failed"))
            })
            .count()
    }

    /// Each message is a `-H` (header) file under `input/`, one Exim can still deliver
    /// with its `-D` (data) file beside it. A power cut can leave a delivered message's
    /// `-H` and `-J` (its journal: every recipient delivered, `D` in `exim -bp`) without
    /// the `-D`: Exim never completes nor delivers it, and a drain that counted it waited
    /// its whole timeout for mail that had arrived.
    fn queued(queue: &Path) -> usize {
        host::count_files_where(&queue.join("input"), &|f| {
            f.file_name()
                .and_then(|n| n.to_str()?.strip_suffix("-H"))
                .is_some_and(|id| f.with_file_name(format!("{id}-D")).exists())
        })
    }

    /// One queue, the messages Exim can still deliver (`exim -bpc` also counts a `-H`
    /// whose `-D` a power cut took): Exim keeps no separate deferred or frozen directory
    /// (those are flags inside each message's `-H` file, not read here).
    fn states(queue: &Path) -> Vec<QueueState> {
        vec![QueueState::new("queue", Self::queued(queue) as u64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message with its data file counts; a delivered one a power cut left as `-H` and
    /// `-J` without its `-D` does not, nor a lone `-D` (a reception in progress).
    #[test]
    fn the_queue_is_the_messages_exim_can_still_deliver() {
        let q = std::env::temp_dir().join(format!("mailbench-exim-q-{}", std::process::id()));
        let input = q.join("input/L");
        std::fs::create_dir_all(&input).expect("dir");
        for f in ["1a-H", "1a-D", "2b-H", "2b-J", "3c-D"] {
            std::fs::write(input.join(f), "x").expect("file");
        }
        let n = Exim::queued(&q);
        let _ = std::fs::remove_dir_all(&q);
        assert_eq!(n, 1, "expected only 1a (its -H and -D) queued");
    }

    #[test]
    fn deliveries_and_dns_deferrals_are_read_from_the_main_log() {
        let log = "2026-11-24 17:46:21 1xV-1e <= x@y.test H=(vm) [127.0.0.1] P=esmtp S=418
2026-11-24 17:46:21 1xV-1e => a@b.test R=onward T=remote_smtp H=127.0.0.1 [127.0.0.1] C=\"250 ok\"
2026-11-24 17:46:21 1xV-1e -> b@b.test R=onward T=remote_smtp H=127.0.0.1 [127.0.0.1] C=\"250 ok\"
2026-11-24 17:46:21 1xV-2e == c@d1.example.test R=onward defer (-1): host lookup did not complete
2026-11-24 17:46:21 1xV-3e == c@d1.example.test R=onward T=remote_smtp defer (-44): SMTP error from remote mail server after RCPT TO:<c@d1.example.test>: 451 try later
";
        assert_eq!(Exim::delivered(log), 2);
        assert_eq!(Exim::dns_deferred(log), 1);
    }
}
