//! Watching a running lab MTA for a stall: when its log has not grown (without a log:
//! its processes have used no CPU) for [`QUIET`], the watchdog connects to its entry; a server that does
//! not greet within [`BANNER`] has stopped answering, and the lab is reported in one line
//! naming the process that is stuck and where ("lab postfix: no banner on 127.0.0.1:2525
//! in 10 s: smtpd (pid 2538) blocked in sendto on /tmp/…/public/postlog") — instead of
//! one timeout per connection of the run (12 × 60 s once). A busy MTA logs or works, so
//! a benchmark's load is never probed; an idle one answers the probe at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::MtaLab;

/// How long a lab may be without a sign of life (its log growing, its CPU time rising)
/// before it is asked to greet.
pub const QUIET: Duration = Duration::from_secs(5);

/// How long the asked lab has to greet.
pub const BANNER: Duration = Duration::from_secs(10);

/// A running watchdog; stops when dropped.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    stalled: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

/// What the watchdog watches of a lab: where it greets, how to list its processes, its
/// logs.
pub struct Watched {
    /// The lab's name in the line (`postfix`).
    pub name: String,
    /// Its entry.
    pub entry: SocketAddr,
    /// Its processes, now.
    pub pids: Box<dyn Fn() -> Vec<u32> + Send>,
    /// Its log files.
    pub logs: Vec<PathBuf>,
    /// Whether its CPU time is a sign of life: only when it keeps no log (a lab's idle
    /// timers use a tick now and then, which would put off a stalled lab's probe).
    pub cpu: bool,
}

impl Watched {
    /// What to watch of a lab MTA.
    pub fn mta(name: &str, lab: Arc<dyn MtaLab>) -> Watched {
        Watched {
            name: name.to_string(),
            entry: lab.entry(),
            logs: lab.logs(),
            cpu: !lab.logs_deliveries(),
            pids: Box::new(move || lab.pids()),
        }
    }
}

impl Watchdog {
    /// Watches `lab` until dropped; on a stall, `on_stall` is called once with the line
    /// (then kept for [`Watchdog::stalled`]) and the watching ends.
    pub fn start(lab: Watched, on_stall: impl Fn(&str) + Send + 'static) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let stalled = Arc::new(Mutex::new(None));
        let (stopping, found) = (stop.clone(), stalled.clone());
        let thread = std::thread::spawn(move || {
            if let Some(line) = watch(&lab, &stopping)
                && let Ok(mut s) = found.lock()
            {
                on_stall(&line);
                *s = Some(line);
            }
        });
        Watchdog {
            stop,
            stalled,
            thread: Some(thread),
        }
    }

    /// The line that reported the lab stalled, once it did.
    pub fn stalled(&self) -> Option<String> {
        self.stalled.lock().ok().and_then(|s| s.clone())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A sign of life: the logs' sizes and the processes' CPU ticks (their own, and their
/// reaped children's, so that short-lived workers count).
fn life(lab: &Watched, with_cpu: bool) -> (u64, u64) {
    let logs = lab
        .logs
        .iter()
        .filter_map(|l| std::fs::metadata(l).ok())
        .map(|m| m.len())
        .sum();
    if !with_cpu || !lab.cpu {
        return (logs, 0);
    }
    let ticks = (lab.pids)()
        .iter()
        .filter_map(|p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let f: Vec<u64> = s
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .skip(11)
                .take(4)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some(f.iter().sum::<u64>())
        })
        .sum();
    (logs, ticks)
}

/// Watches until `stop`; the stall's line if one came. After each greeting the quiet
/// it takes to ask again doubles (to a minute): an idle lab is asked rarely, its log
/// barely touched; any sign of life brings it back to [`QUIET`].
fn watch(lab: &Watched, stop: &AtomicBool) -> Option<String> {
    let tick = Duration::from_millis(250);
    let mut last = life(lab, true);
    let mut alive_at = Instant::now();
    let mut quiet = QUIET;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        // The logs first: a busy lab shows it there, and its processes are not read.
        let logs = life(lab, false).0;
        if logs != last.0 {
            last.0 = logs;
            alive_at = Instant::now();
            quiet = QUIET;
            continue;
        }
        if alive_at.elapsed() < quiet {
            continue;
        }
        let now = life(lab, true);
        if now != last {
            last = now;
            alive_at = Instant::now();
            quiet = QUIET;
            continue;
        }
        if greets(lab.entry, BANNER, stop) {
            // What the greeting itself logged and used is no sign of life.
            std::thread::sleep(Duration::from_millis(500));
            last = life(lab, true);
            alive_at = Instant::now();
            quiet = (quiet * 2).min(Duration::from_secs(60));
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let pids = (lab.pids)();
        return Some(format!(
            "lab {}: no banner on {} in {} s: {}",
            lab.name,
            lab.entry,
            BANNER.as_secs(),
            super::stall::describe(&pids, Some(lab.entry.port()))
        ));
    }
    None
}

/// Whether the server at `addr` greets within `wait` (given up early on `stop`).
fn greets(addr: SocketAddr, wait: Duration, stop: &AtomicBool) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let deadline = Instant::now() + wait;
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 512];
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => {
                let _ = s.write_all(b"QUIT\r\n");
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return false,
        }
    }
    // Stopped while waiting: not a stall.
    stop.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_accepts_and_never_greets_is_a_stall_and_one_that_greets_is_not() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = silent.local_addr().expect("addr");
        let stop = AtomicBool::new(false);
        // The kernel completes the connection; nothing ever writes.
        let t0 = Instant::now();
        assert!(!greets(addr, Duration::from_secs(1), &stop));
        assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
        let greeter = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let gaddr = greeter.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            use std::io::Write;
            if let Ok((mut c, _)) = greeter.accept() {
                let _ = c.write_all(b"220 hello\r\n");
            }
        });
        assert!(greets(gaddr, Duration::from_secs(5), &stop));
        let _ = t.join();
    }
}
