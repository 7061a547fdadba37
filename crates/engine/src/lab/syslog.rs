//! A log file for an MTA that logs through a datagram socket: syslog (Sendmail, Cyrus:
//! the socket is what the MTA sees as `/dev/log`, see `isolate`) or Postfix's postlog
//! (the socket is in its queue's `public/`, see `postfix`). A thread of mailbench appends
//! each message to the lab's log file, one line each, without a `<priority>` prefix. It
//! only reads the socket, so the MTA's logging can wait for it but never deadlock on it
//! (Postfix's own reader, postlogd, writes to the socket it reads). The machine's own
//! syslog is neither needed nor touched.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::LabError;
use super::host::io;

/// The running capture; stops (and removes its socket) on drop.
#[derive(Debug)]
pub struct Capture {
    /// The socket to give the MTA as `/dev/log`.
    pub socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A syslog message without its `<priority>` prefix.
fn line(msg: &[u8]) -> &[u8] {
    let msg = msg.strip_suffix(b"\n").unwrap_or(msg);
    match (msg.first(), msg.iter().position(|&b| b == b'>')) {
        (Some(b'<'), Some(end)) if end <= 4 => &msg[end + 1..],
        _ => msg,
    }
}

impl Capture {
    /// Listens on `socket` and appends what arrives to `log`.
    pub fn start(socket: &Path, log: &Path) -> Result<Capture, LabError> {
        let _ = std::fs::remove_file(socket);
        let sock = UnixDatagram::bind(socket).map_err(|e| io("bind the lab's log socket", e))?;
        super::host::set_mode(socket, 0o666);
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| io("set up the lab's log socket", e))?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| io("open the lab's log", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            // syslog(3) messages are short; a longer one is cut, never grown into.
            let mut buf = vec![0u8; 8192];
            let mut out = Vec::with_capacity(8192);
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    out.clear();
                    out.extend_from_slice(line(&buf[..n]));
                    out.push(b'\n');
                    // Written at once: the drain counts deliveries in this file.
                    let _ = file.write_all(&out);
                }
            }
        });
        Ok(Capture {
            socket: socket.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_lines_without_their_priority() {
        let dir = std::env::temp_dir().join(format!("mailbench-syslog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (sock, log) = (dir.join("log.sock"), dir.join("maillog"));
        let cap = Capture::start(&sock, &log).expect("start");
        let client = UnixDatagram::unbound().expect("socket");
        for m in [
            "<22>Nov 24 17:52:39 sendmail[1]: x: stat=Sent\n",
            "no priority",
        ] {
            client.send_to(m.as_bytes(), &sock).expect("send");
        }
        let want = "Nov 24 17:52:39 sendmail[1]: x: stat=Sent\nno priority\n";
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&log).unwrap_or_default() != want
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(cap);
        let got = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got, want);
        assert!(!sock.exists(), "the socket is removed on drop");
    }
}
