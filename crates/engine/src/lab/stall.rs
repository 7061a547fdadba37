//! What a lab process that stopped answering is doing, read from /proc, so that a lab
//! whose server does not greet, or whose stop command does not end, is reported in one
//! line naming the process that is stuck and where — "smtpd (pid 2538) blocked in sendto
//! on /tmp/…/queue/public/postlog" — instead of a run of timeouts. A process is stuck
//! when it is stopped (SIGSTOP, a debugger), in uninterruptible sleep, or blocked in a
//! call that hands data to someone else (write, send, connect) whose reader does not read;
//! waiting for work (accept, epoll, a lock between idle Postfix daemons) is not stuck.

/// A process of the lab as /proc shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its pid.
    pub pid: u32,
    /// Its name (`comm`: smtpd, postlogd, master).
    pub name: String,
    /// Why it is stuck, when it is ("blocked in sendto on /tmp/x/public/postlog").
    pub stuck: Option<String>,
    /// The kernel function it sleeps in (`wchan`), for a process that is not stuck.
    pub waits_in: String,
}

impl Seen {
    /// `name (pid N)`.
    pub fn label(&self) -> String {
        format!("{} (pid {})", self.name, self.pid)
    }
}

/// Reads what `pid` is doing; `None` when it has gone.
pub fn look(pid: u32) -> Option<Seen> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let state = stat.get(close + 1..)?.trim_start().chars().next()?;
    let waits_in = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    let stuck = match state {
        'T' | 't' => Some("stopped (SIGSTOP or a debugger)".to_string()),
        'Z' | 'X' => return None,
        _ => {
            let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            sending(pid, &call).or_else(|| {
                (state == 'D').then(|| format!("in uninterruptible sleep in {waits_in}"))
            })
        }
    };
    Some(Seen {
        pid,
        name,
        stuck,
        waits_in,
    })
}

/// The system calls that hand data to another process, by number on this architecture:
/// blocked in one of them, a process waits for its reader.
fn sending_call(nr: u64) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    let name = match nr {
        1 => "write",
        18 => "pwrite64",
        20 => "writev",
        42 => "connect",
        44 => "sendto",
        46 => "sendmsg",
        307 => "sendmmsg",
        _ => return None,
    };
    #[cfg(target_arch = "aarch64")]
    let name = match nr {
        64 => "write",
        66 => "writev",
        68 => "pwrite64",
        203 => "connect",
        206 => "sendto",
        211 => "sendmsg",
        269 => "sendmmsg",
        _ => return None,
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let name: &'static str = {
        let _ = nr;
        return None;
    };
    Some(name)
}

/// "blocked in sendto on PATH" when `/proc/PID/syscall` (`call`) shows a sending call:
/// its number, then its arguments, the first of which is the file descriptor.
fn sending(pid: u32, call: &str) -> Option<String> {
    let mut f = call.split_whitespace();
    let nr: u64 = f.next()?.parse().ok()?;
    let name = sending_call(nr)?;
    let fd = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
    Some(format!("blocked in {name} on {}", target(pid, fd)))
}

/// What file descriptor `fd` of `pid` leads to: a Unix socket's path (its peer's, for a
/// connected socket without one), a file's path, or the kind of object.
fn target(pid: u32, fd: u64) -> String {
    let Ok(link) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
        return format!("file descriptor {fd}");
    };
    let link = link.display().to_string();
    match link
        .strip_prefix("socket:[")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(inode) => unix_path(inode)
            .or_else(|| unix_peer(inode).and_then(unix_path))
            .unwrap_or_else(|| format!("socket {inode}")),
        None if link.starts_with("pipe:") => format!("a pipe ({link})"),
        None => link,
    }
}

/// The path a Unix socket is bound to, from /proc/net/unix.
fn unix_path(inode: u64) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(6)?.parse::<u64>().ok()? == inode)
            .then(|| f.get(7).map(|p| p.to_string()))
            .flatten()
    })
}

/// The inode of a connected Unix socket's peer, from `ss -x` (iproute2; /proc does not
/// show peers), given 5 s. `None` when ss is missing or says nothing of it.
fn unix_peer(inode: u64) -> Option<u64> {
    use std::time::{Duration, Instant};
    // Into a file, not a pipe: a long table must not hold ss up until its deadline.
    let out = std::env::temp_dir().join(format!(
        "mailbench-ss-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let file = std::fs::File::create(&out).ok()?;
    let mut child = std::process::Command::new("ss")
        .args(["-x", "-a", "-n"])
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let done = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    let table = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    done.then(|| peer_in(&table, inode)).flatten()
}

/// The peer inode of socket `inode` in `ss -x -a -n`'s table (`Netid State Recv-Q Send-Q
/// Local Inode Peer Inode`, an unnamed end shown as `*`).
fn peer_in(table: &str, inode: u64) -> Option<u64> {
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 || f[5].parse::<u64>().ok()? != inode {
            return None;
        }
        f[7].parse::<u64>().ok().filter(|p| *p != 0)
    })
}

/// The inodes of the TCP sockets listening on `port` (IPv4 and IPv6).
fn listening(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 0A: LISTEN.
            if local_port == Some(port) && f.get(3) == Some(&"0A") {
                out.extend(f.get(9).and_then(|i| i.parse::<u64>().ok()));
            }
        }
    }
    out
}

/// Whether `pid` holds one of the sockets `inodes`.
fn holds(pid: u32, inodes: &[u64]) -> bool {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    rd.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|l| {
            let l = l.display().to_string();
            inodes.iter().any(|i| l == format!("socket:[{i}]"))
        })
    })
}

/// Whether one of `pids` holds the socket listening on `port`: the port is the lab's, so
/// a silence there is the lab's own.
pub fn serves(pids: &[u32], port: u16) -> bool {
    let inodes = listening(port);
    !inodes.is_empty() && pids.iter().any(|p| holds(*p, &inodes))
}

/// The processes among `pids` that are stuck, the most telling first: those that serve
/// `port` (hold its listening socket: the ones that should have greeted) before the
/// others, the first process of the tree (a master, which only waits for them) last.
pub fn stuck_among(pids: &[u32], port: Option<u16>) -> Vec<Seen> {
    let serving = port.map(listening).unwrap_or_default();
    let root = pids.iter().min().copied();
    let mut found: Vec<(u8, Seen)> = pids
        .iter()
        .filter_map(|p| look(*p))
        .filter(|s| s.stuck.is_some())
        .map(|s| {
            let rank = if Some(s.pid) == root {
                2
            } else if !serving.is_empty() && holds(s.pid, &serving) {
                0
            } else {
                1
            };
            (rank, s)
        })
        .collect();
    found.sort_by_key(|(rank, s)| (*rank, s.pid));
    found.into_iter().map(|(_, s)| s).collect()
}

/// One line on what `pids` are doing: the first stuck process and why, then up to three
/// more by name; or, when none is stuck, what the first of them waits in; then who else
/// holds `port`'s listening socket.
pub fn describe(pids: &[u32], port: Option<u16>) -> String {
    let stuck = stuck_among(pids, port);
    let said = match stuck.split_first() {
        Some((first, rest)) => {
            let mut line = format!(
                "{} {}",
                first.label(),
                first.stuck.as_deref().unwrap_or_default()
            );
            if !rest.is_empty() {
                let names: Vec<String> = rest.iter().take(3).map(Seen::label).collect();
                let more = rest.len().saturating_sub(3);
                line += &format!(
                    "; stuck too: {}{}",
                    names.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
            line
        }
        None => {
            let seen: Vec<Seen> = pids.iter().filter_map(|p| look(*p)).collect();
            match seen.first() {
                Some(s) => format!(
                    "none of its {} processes is stopped or blocked in a send ({} waits in {})",
                    seen.len(),
                    s.label(),
                    if s.waits_in.is_empty() {
                        "nothing the kernel names"
                    } else {
                        &s.waits_in
                    }
                ),
                None => "none of its processes runs".to_string(),
            }
        }
    };
    said + &outsiders_line(pids, port)
}

/// The processes in process group `pgid` (a lab command and what it started).
pub fn group(pgid: u32) -> Vec<u32> {
    crate::stats::sut::led_by(&[pgid])
}

/// The processes outside `pids` that hold a socket listening on `port`: a server's
/// children that outlived it (a crash that missed them) keep its listening socket and
/// take their share of the connections, which wait there unanswered.
fn outsiders_serving(pids: &[u32], port: u16) -> Vec<Seen> {
    let inodes = listening(port);
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Seen> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| !pids.contains(p) && holds(*p, &inodes))
        .filter_map(look)
        .collect();
    found.sort_by_key(|s| s.pid);
    found
}

/// "; port P is also held outside the lab's tree by NAME (pid N), …", or nothing.
fn outsiders_line(pids: &[u32], port: Option<u16>) -> String {
    let Some(port) = port else {
        return String::new();
    };
    let out = outsiders_serving(pids, port);
    if out.is_empty() {
        return String::new();
    }
    let names: Vec<String> = out.iter().take(3).map(Seen::label).collect();
    let more = out.len().saturating_sub(3);
    format!(
        "; port {port} is also held outside the lab's tree by {}{}",
        names.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process outside the lab's pids that listens on the lab's port is named; one of
    /// the lab's is not.
    #[test]
    fn a_listener_outside_the_lab_is_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let me = std::process::id();
        let line = outsiders_line(&[], Some(port));
        assert!(
            line.contains(&format!("(pid {me})")) && line.contains(&format!("port {port}")),
            "expected this process named as holding port {port}: {line:?}"
        );
        assert_eq!(outsiders_line(&[me], Some(port)), "", "one of the lab's");
    }

    #[test]
    fn a_peer_is_read_from_ss_s_table() {
        let table = "Netid State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process
u_dgr UNCONN 0      0      /tmp/x/queue/public/postlog 403253 * 0
u_dgr ESTAB  0      0      * 403722 * 403253
";
        assert_eq!(peer_in(table, 403722), Some(403253));
        assert_eq!(
            peer_in(table, 403253),
            None,
            "an unconnected socket has none"
        );
        assert_eq!(peer_in(table, 1), None);
    }

    #[test]
    fn this_process_is_not_stuck_and_a_stopped_child_is() {
        let me = look(std::process::id()).expect("this process");
        assert_eq!(me.stuck, None, "{me:?}");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let _ = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = look(pid);
        while seen.as_ref().is_some_and(|s| s.stuck.is_none())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen = look(pid);
        }
        let _ = child.kill();
        let _ = child.wait();
        let seen = seen.expect("the child");
        assert_eq!(seen.name, "sleep");
        assert_eq!(
            seen.stuck.as_deref(),
            Some("stopped (SIGSTOP or a debugger)")
        );
        assert_eq!(
            describe(&[pid], None),
            "none of its processes runs",
            "a reaped child is gone"
        );
    }
}
