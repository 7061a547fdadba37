//! The lab's own commands (an MTA's start and stop scripts, its checks, its queue tools)
//! run with a deadline: each runs in a process group of its own (a Ctrl-C at the terminal
//! does not reach it, see `leftovers::own_group`), and one that has not finished when its
//! time is up is ended with everything it started, saying in one line which process was
//! stuck and where (`stall`). A lab waits for nothing without a deadline: a `postfix stop`
//! whose logging blocked once waited forever.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long a lab's stop command may take before the lab's processes are ended by force
/// (Postfix's own `postfix stop` gives its master 5 s before it kills it).
pub const STOP: Duration = Duration::from_secs(10);

/// How long a command that sets a lab up may take (`postfix start` takes about a second,
/// building sendmail.cf or copying qmail's queue less; a loaded machine more).
pub const SETUP: Duration = Duration::from_secs(60);

/// Runs `cmd` to its end, or until `limit`: its output, or the line that says it did not
/// finish (`what` names it), which process of it was stuck and where; it was then killed
/// with everything in its process group.
pub fn run(cmd: &mut Command, limit: Duration, what: &str) -> Result<Output, String> {
    run_with(cmd, None, limit, what)
}

/// [`run`] with `input` on the command's standard input.
pub fn run_with_input(
    cmd: &mut Command,
    input: &[u8],
    limit: Duration,
    what: &str,
) -> Result<Output, String> {
    run_with(cmd, Some(input.to_vec()), limit, what)
}

fn run_with(
    cmd: &mut Command,
    input: Option<Vec<u8>>,
    limit: Duration,
    what: &str,
) -> Result<Output, String> {
    let deadline = Instant::now() + limit;
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = super::leftovers::own_group(cmd)
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        // Written apart, so that a command that stops reading cannot hold this one up.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &data);
        });
    }
    let stdout = Drained::start(child.stdout.take());
    let stderr = Drained::start(child.stderr.take());
    let status = wait(&mut child, deadline, limit, what)?;
    Ok(Output {
        status,
        stdout: stdout.take(),
        stderr: stderr.take(),
    })
}

/// Runs `cmd` (its standard input, output and error as the caller set them: a daemon
/// that keeps them open must not get pipes) to its end, or until `limit`, as [`run`].
pub fn status(cmd: &mut Command, limit: Duration, what: &str) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + limit;
    let mut child = super::leftovers::own_group(cmd)
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    wait(&mut child, deadline, limit, what)
}

/// Waits for `child` until `deadline`; past it, names what of its process group is stuck
/// and kills the group.
fn wait(
    child: &mut Child,
    deadline: Instant,
    limit: Duration,
    what: &str,
) -> Result<ExitStatus, String> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => break,
        }
    }
    let pgid = child.id();
    let members = super::stall::group(pgid);
    let why = super::stall::describe(&members, None);
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .output();
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "{what} did not finish in {} s: {why}; killed it",
        limit.as_secs()
    ))
}

/// A pipe read to its end on a thread of its own (a command that writes much must not wait
/// for this one to read), what came so far kept as it comes.
struct Drained {
    got: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drained {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Drained {
        let got = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let into = got.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            if let Some(mut p) = pipe {
                while let Ok(n @ 1..) = p.read(&mut buf) {
                    if let Ok(mut g) = into.lock() {
                        g.extend_from_slice(&buf[..n]);
                    }
                }
            }
            let _ = tx.send(());
        });
        Drained { got, done }
    }

    /// What the pipe gave: all of it once its writers closed it, or what came within a
    /// second (a daemon the command started may hold it open).
    fn take(self) -> Vec<u8> {
        let _ = self.done.recv_timeout(Duration::from_secs(1));
        self.got
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_ends_gives_its_output_and_status() {
        let out = run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
            "sh",
        )
        .expect("finished");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        let out = run_with_input(
            &mut Command::new("cat"),
            b"fed",
            Duration::from_secs(10),
            "cat",
        )
        .expect("finished");
        assert_eq!(out.stdout, b"fed");
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_what_it_started() {
        let t0 = Instant::now();
        let err = run(
            // The forked shell is stopped only once it has become `sleep`: stopped before
            // its exec, it would rightly be named `sh`.
            Command::new("sh").args([
                "-c",
                "sleep 300 & until [ \"$(cat /proc/$!/comm)\" = sleep ]; do :; done; \
                 kill -STOP $!; wait",
            ]),
            Duration::from_secs(1),
            "`sh sleeper`",
        )
        .expect_err("past its deadline");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(
            err.starts_with("`sh sleeper` did not finish in 1 s: sleep (pid ")
                && err.ends_with(" stopped (SIGSTOP or a debugger); killed it"),
            "{err}"
        );
        let pid: u32 = err
            .split("(pid ")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .and_then(|s| s.parse().ok())
            .expect("a pid");
        let deadline = Instant::now() + Duration::from_secs(5);
        while super::super::leftovers::running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !super::super::leftovers::running(pid),
            "the stopped sleep was killed"
        );
    }
}
