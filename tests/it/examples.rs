//! Issue 25 item 20: every example a user can copy — from every command's `--help` (the
//! commands found by walking `mailbench help`, so a new command is covered by itself) and
//! from README.md's code blocks — is run for real, and every threshold key a help text
//! shows is accepted by that command.
//!
//! Each example runs in a temporary directory holding the files it names (users, a zone,
//! DKIM keys, results files made by a short real run), with a `mailbench sink` listening
//! where it sends on loopback. It runs until it exits or `RUN_FOR`, then gets SIGINT (a
//! run writes its results on SIGINT). It passes when it did not panic, did not exit 1 (bad
//! usage or input), wrote the --json/-o file it names, and left no lab behind. Examples
//! that need an outside host are listed in `OUTSIDE` by their exact text, with the reason:
//! a new example runs unless it is added there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::{Proc, TempDir, describe, free_port, mailbench, require, run, wait_until};

/// How long an example runs before it is interrupted.
const RUN_FOR: Duration = Duration::from_millis(2500);

/// How long an example whose lab was still starting at `RUN_FOR` runs the second time: a
/// loaded machine can take longer than `RUN_FOR` to start a lab, and a run interrupted then
/// rightly measures and writes nothing, which would leave the results path untested.
const RUN_FOR_SLOW_LAB: Duration = Duration::from_secs(20);

/// What a run interrupted while its lab started says (crates/engine/src/lab/mod.rs).
const LAB_STILL_STARTING: &str = "interrupted while the lab started";

/// How long an interrupted example may take to write its results and tear its lab down.
const WIND_DOWN: Duration = Duration::from_secs(60);

/// clap wraps help text at 100 columns: an example line must fit, or it cannot be copied.
const HELP_WIDTH: usize = 100;

/// Comparisons of labs: interrupted before their first run measured anything (its lab
/// still starting or filling), they have nothing to write, and must say so. Interrupted
/// later, they write what ran like any other example.
const CUT_SHORT: &[(&str, &str)] = &[
    (
        "mailbench relay --lab postfix,exim,opensmtpd,sendmail -n 2000 --json mtas.json",
        "before any variant had run; nothing was measured",
    ),
    (
        "mailbench relay --lab postfix,exim --queue disk --rounds 8 --json mtas.json",
        "before any variant had run; nothing was measured",
    ),
    (
        "mailbench mailbox profile --lab dovecot,cyrus --users 400 --ramp-users 25:25/60s --time-scale 60 --json s1.json",
        "before any variant had run; nothing was measured",
    ),
];

/// Examples run at once (labs and runs share a 2-core machine with the test itself).
const WORKERS: usize = 3;

/// Examples that need a host or server this test cannot provide, by exact text.
const OUTSIDE: &[(&str, &str)] = &[
    (
        "mailbench send mx.test:25 --to 'user{seq}@d{mod:1000}.example.test' --rcpts 3",
        "an outside MTA (mx.test)",
    ),
    (
        "mailbench send unix:/run/dovecot/lmtp --lmtp --recipients users.txt",
        "the system Dovecot's LMTP socket",
    ),
    (
        "mailbench relay --target 10.0.0.5:25 --sink 0.0.0.0:2525 --sut-pid 1234 --rate 200/s -z 5m",
        "an outside MTA (10.0.0.5) and its process",
    ),
    (
        "mailbench relay --target mta.test:25 --sink 0.0.0.0:2525 --sut-pid 1234",
        "an outside MTA (mta.test) and its process",
    ),
    (
        "mailbench send mta.test:25 --dkim-key dkim.pem --dkim-domain example.org",
        "an outside MTA (mta.test)",
    ),
    (
        "mailbench mailbox imap --target 10.0.0.5:143 --users-file users.txt --tls starttls",
        "an outside IMAP server (10.0.0.5)",
    ),
    (
        "mailbench mailbox imap --target 10.0.0.5:143 --users-file users.txt --mix fetch_body=1 --rate 500/s -z 30s",
        "an outside IMAP server (10.0.0.5)",
    ),
    (
        "mailbench mailbox pop3 --target 10.0.0.5:110 --users-file users.txt -c 64 --tls starttls",
        "an outside POP3 server (10.0.0.5)",
    ),
    (
        "mailbench mailbox arrival --smtp 10.0.0.5:25 --imap 10.0.0.6:143 --users-file users.txt --threshold 'p95(e2e)<60s'",
        "an outside MTA and store (10.0.0.5, 10.0.0.6)",
    ),
    (
        "mailbench mailbox profile --imap 10.0.0.5:143 --lmtp 10.0.0.5:24 --users-file users.txt --scenario my-users.toml --virtual-users 500",
        "an outside store (10.0.0.5); its scenario file is run by profile_help_scenario_needs_no_pop3",
    ),
    (
        "mailbench mailbox populate --lmtp unix:/run/dovecot/lmtp --users-file users.txt --per-user 50",
        "the system Dovecot's LMTP socket",
    ),
    (
        "mailbench send mta.test:25 --rate 4000/s -z 10m -c 256 --shard $i/4 --start-at $start --run-id $id --json agent-$i.json -q &",
        "a shell loop of agents against an outside MTA (mta.test)",
    ),
];

/// One example: where it came from and its text (continuation lines joined).
#[derive(Debug, Clone)]
struct Example {
    from: String,
    text: String,
}

/// The command paths (`["mailbox", "imap"]`) under `path`, from its help's Commands list.
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            // A command's name is at two spaces; its wrapped description is further in.
            if line.as_bytes().get(2).is_some_and(|b| *b != b' ')
                && let Some(name) = line.split_whitespace().next()
                && name != "help"
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Every command path and its `--help` text, walking from `mailbench help`.
fn all_helps() -> BTreeMap<Vec<String>, String> {
    let mut helps = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        for sub in subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        helps.insert(path, help);
    }
    helps
}

/// The examples of one help text; a wrapped example line is a failure in `bad`.
fn help_examples(name: &str, help: &str, bad: &mut Vec<String>) -> Vec<Example> {
    let mut out = Vec::new();
    let mut lines = help.lines().skip_while(|l| *l != "Examples:").skip(1);
    let mut section = Vec::new();
    for l in lines.by_ref() {
        if l.trim().is_empty() {
            break;
        }
        section.push(l);
    }
    let mut i = 0;
    while i < section.len() {
        let l = section[i];
        if l.chars().count() > HELP_WIDTH {
            bad.push(format!("{name}: example line wider than {HELP_WIDTH}: {l}"));
        }
        let indent = l.len() - l.trim_start().len();
        if indent == 2 && l.trim_start().starts_with("mailbench ") {
            let mut text = l.trim().to_string();
            while text.ends_with('\\') && i + 1 < section.len() {
                i += 1;
                text.pop();
                text = format!("{} {}", text.trim_end(), section[i].trim());
            }
            out.push(Example {
                from: format!("`{name} --help`"),
                text,
            });
        } else if indent == 2 {
            bad.push(format!(
                "{name}: an example is wrapped at {HELP_WIDTH} columns (this line is its tail, \
                 it cannot be copied): {l:?}"
            ));
        }
        i += 1;
    }
    out
}

/// README.md's command lines in code blocks, comments cut and continuations joined.
fn readme_examples() -> Vec<Example> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<String> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let l = line.trim();
        if let Some(p) = pending.take() {
            let joined = format!("{} {}", p.trim_end_matches('\\').trim_end(), l);
            if joined.ends_with('\\') {
                pending = Some(joined);
            } else {
                out.push(Example {
                    from: "README.md".into(),
                    text: joined,
                });
            }
            continue;
        }
        let l = l.strip_prefix("./target/release/").unwrap_or(l);
        if !l.starts_with("mailbench ") {
            continue;
        }
        let l = cut_comment(l);
        if l.ends_with('\\') {
            pending = Some(l);
        } else {
            out.push(Example {
                from: "README.md".into(),
                text: l,
            });
        }
    }
    out
}

/// A line without its trailing `# comment` (a '#' outside quotes after a space).
fn cut_comment(l: &str) -> String {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in l.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && prev == ' ' => return l[..i].trim_end().to_string(),
            None => {}
        }
        prev = c;
    }
    l.trim_end().to_string()
}

/// The loopback addresses an example listens on or sends to; two examples that share one
/// do not run at once.
fn resources(text: &str) -> BTreeSet<String> {
    let mut r = BTreeSet::new();
    for word in text.split_whitespace() {
        let w = word.trim_matches('\'');
        for prefix in ["127.", "[::1]:", "unix:/tmp/"] {
            if w.starts_with(prefix) && w.contains(':') {
                r.insert(w.to_string());
            }
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    // The defaults of the servers.
    if words.get(1) == Some(&"sink") && !text.contains("--listen") {
        r.insert("127.0.0.1:2525".into());
    }
    if words.get(1) == Some(&"dns") && !text.contains("--listen") {
        r.insert("127.0.0.1:5353".into());
    }
    r
}

/// Where an example sends SMTP on loopback (`send 127.0.0.1:PORT`): a sink must listen.
fn send_target(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    (words.get(1) == Some(&"send"))
        .then(|| words.get(2).copied())
        .flatten()
        .filter(|t| t.starts_with("127."))
        .map(str::to_string)
}

/// The files an example says it writes (--json, -o, --output, --report, --csv).
fn named_outputs(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "--json" | "-o" | "--output" | "--report" | "--csv"))
        .map(|w| w[1].to_string())
        .collect()
}

/// Starts a `mailbench sink` on `addr` (for an example that sends there).
fn sink_at(addr: &str, dir: &Path) -> Proc {
    let child = mailbench()
        .args(["sink", "-q", "--listen", addr])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a sink");
    let proc = Proc(child);
    assert!(
        wait_until(Duration::from_secs(10), || std::net::TcpStream::connect(
            addr
        )
        .is_ok()),
        "the fixture sink did not listen on {addr}"
    );
    proc
}

/// A short real send into a sink, its results written to `json`; `extra` adds flags.
fn results_file(dir: &Path, port: u16, json: &str, extra: &[&str]) {
    let target = format!("127.0.0.1:{port}");
    let mut args = vec![
        "send", &target, "-n", "200", "-c", "4", "-q", "--json", json,
    ];
    args.extend_from_slice(extra);
    let out = mailbench()
        .args(&args)
        .current_dir(dir)
        .output()
        .expect("run send");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
}

/// The files the examples name: users, a zone, DKIM keys, results files. The comparison
/// of two lab MTAs (`mtas.json`) takes a while: it is made in the background, and the
/// returned process is waited for by the examples that read it.
fn fixtures(dir: &Path) -> Option<std::process::Child> {
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).expect("write a fixture");
    };
    write(
        "users.txt",
        "user1@store.test secret1\nuser2@store.test secret2\n",
    );
    write(
        "lab.zone",
        "$ORIGIN lab.test.\n$TTL 300\n@ IN SOA ns.lab.test. admin.lab.test. 1 3600 600 86400 300\n\
         @ IN NS ns\nns IN A 127.0.0.1\n@ IN MX 10 mx\nmx IN A 127.0.0.1\n",
    );
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    openssl(&["genpkey", "-algorithm", "ed25519", "-out", "dkim.pem"]);
    openssl(&["pkey", "-in", "dkim.pem", "-pubout", "-out", "dkim.pub"]);
    // Results files for report, compare and merge, from short real runs.
    let port = free_port();
    let _sink = sink_at(&format!("127.0.0.1:{port}"), dir);
    results_file(dir, port, "before.json", &[]);
    for name in [
        "after.json",
        "relay.json",
        "tmpfs.json",
        "disk.json",
        "old.json",
        "new.json",
        "a.json",
        "b.json",
        "a1.json",
        "a2.json",
        "a3.json",
        "a4.json",
        "b1.json",
        "b2.json",
        "b3.json",
        "b4.json",
    ] {
        std::fs::copy(dir.join("before.json"), dir.join(name)).expect("copy a results file");
    }
    for i in 0..2 {
        let shard = format!("{i}/2");
        let json = format!("agent-{i}.json");
        results_file(dir, port, &json, &["--shard", &shard, "--run-id", "2513"]);
    }
    labs_installed("mtas.json").then(|| {
        mailbench()
            .args([
                "relay",
                "--lab",
                "postfix,exim",
                "-n",
                "20",
                "-c",
                "2",
                "-q",
            ])
            .args(["--json", "mtas.json"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the two-MTA comparison")
    })
}

/// A fresh directory for one example under `base`, with a copy of every fixture file
/// (so that an example writing a file another one reads cannot disturb it), less the
/// files the example itself says it writes.
fn example_dir(base: &Path, n: usize, ex: &Example) -> PathBuf {
    let dir = base.join(format!("example-{n}"));
    std::fs::create_dir_all(&dir).expect("create an example's directory");
    for e in std::fs::read_dir(base)
        .expect("read the fixtures")
        .flatten()
    {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::copy(e.path(), dir.join(e.file_name()));
        }
    }
    for f in named_outputs(&ex.text) {
        let _ = std::fs::remove_file(dir.join(f));
    }
    dir
}

/// Whether the lab servers an example starts are installed (CI installs them all, and a
/// missing one fails there; elsewhere the example is skipped with the reason printed).
fn labs_installed(text: &str) -> bool {
    let unpacked = || {
        std::path::Path::new("/opt/mailbench/mtas/sendmail/.mailbench-packages").exists() || {
            assert!(
                std::env::var_os("CI").is_none(),
                "the lab MTAs are not unpacked; CI must run scripts/install-mtas.sh"
            );
            eprintln!("SKIP: run scripts/install-mtas.sh for the Exim, OpenSMTPD, Sendmail labs");
            false
        }
    };
    let word = |w: &str| text.contains(w);
    (!(word("--lab") || word(" lab ") || word("mtas.json")) || require("postfix").is_some())
        && (!word("dovecot") || require("dovecot").is_some())
        && (!word("--mta-dkim-key") || require("opendkim").is_some())
        && (!(word("exim") || word("opensmtpd") || word("sendmail") || word("mtas.json"))
            || unpacked())
}

/// The outcome of one example, or None when it passed: run again, once, for longer when
/// the first run was interrupted before its lab had started.
fn run_example(ex: &Example, bin: &Path, dir: &Path) -> Option<String> {
    match run_example_for(ex, bin, dir, RUN_FOR) {
        Some(failure) if failure.contains(LAB_STILL_STARTING) => {
            eprintln!(
                "  the lab was still starting at {RUN_FOR:?}; again for {RUN_FOR_SLOW_LAB:?}"
            );
            run_example_for(ex, bin, dir, RUN_FOR_SLOW_LAB)
        }
        outcome => outcome,
    }
}

/// One run of an example, interrupted after `run_for`.
fn run_example_for(ex: &Example, bin: &Path, dir: &Path, run_for: Duration) -> Option<String> {
    let _sink = send_target(&ex.text).map(|t| sink_at(&t, dir));
    let cmd = ex.text.replacen("mailbench", &bin.to_string_lossy(), 1);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {cmd}"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the example");
    let pid = child.id();
    let started = Instant::now();
    let mut interrupted = false;
    // Drain the pipes on threads so a chatty example never blocks on them.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if !interrupted && started.elapsed() >= run_for {
            let _ = Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status();
            interrupted = true;
        }
        if started.elapsed() >= run_for + WIND_DOWN {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let (out, err) = (
        out_t.join().unwrap_or_default(),
        err_t.join().unwrap_or_default(),
    );
    let said = || {
        format!(
            "{} ({}), {:.1} s{}\nstdout:\n{}\nstderr:\n{}",
            ex.text,
            ex.from,
            started.elapsed().as_secs_f64(),
            if interrupted { ", interrupted" } else { "" },
            tail(&out),
            tail(&err)
        )
    };
    eprintln!(
        "  {:.1} s, {}: {}",
        started.elapsed().as_secs_f64(),
        match (&status, interrupted) {
            (None, _) => "never stopped".to_string(),
            (Some(s), true) => format!("{s} after SIGINT"),
            (Some(s), false) => s.to_string(),
        },
        ex.text
    );
    let Some(status) = status else {
        return Some(format!(
            "did not stop within {WIND_DOWN:?} of SIGINT: {}",
            said()
        ));
    };
    if err.contains("panicked") {
        return Some(format!("panicked: {}", said()));
    }
    match status.code() {
        Some(1) => return Some(format!("exit 1 (bad usage or input): {}", said())),
        None => return Some(format!("killed by a signal ({status}): {}", said())),
        Some(_) => {}
    }
    let cut_short = CUT_SHORT
        .iter()
        .find(|(t, _)| *t == ex.text)
        .is_some_and(|(_, why)| interrupted && err.contains(why));
    for f in named_outputs(&ex.text) {
        if !dir.join(&f).exists() && !cut_short {
            return Some(format!("{f} not written: {}", said()));
        }
    }
    let left = lab_leftovers(pid);
    if !left.is_empty() {
        return Some(format!("left its lab behind: {left:?}: {}", said()));
    }
    None
}

/// The last lines of an output, enough to see why.
fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// What a lab of process `pid` left: its directories (`mailbench-lab-PID-…` in the temp
/// directory and /dev/shm) and processes working in them.
fn lab_leftovers(pid: u32) -> Vec<String> {
    let tag = format!("mailbench-lab-{pid}-");
    let mut left = Vec::new();
    for d in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&tag) {
                    left.push(e.path().display().to_string());
                }
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            if cwd.to_string_lossy().contains(&tag) || String::from_utf8_lossy(&cmd).contains(&tag)
            {
                left.push(format!(
                    "process {} ({})",
                    e.file_name().to_string_lossy(),
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
            }
        }
    }
    left
}

#[test]
fn every_help_and_readme_example_runs() {
    let helps = all_helps();
    let mut bad = Vec::new();
    let mut examples = Vec::new();
    for (path, help) in &helps {
        let name = std::iter::once("mailbench")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        examples.extend(help_examples(&name, help, &mut bad));
    }
    examples.extend(readme_examples());
    // The list of outside examples names only examples that exist.
    for (text, _) in OUTSIDE {
        assert!(
            examples.iter().any(|e| e.text == *text),
            "OUTSIDE lists an example no help or README has: {text}"
        );
    }
    for (text, _) in CUT_SHORT {
        assert!(
            examples.iter().any(|e| e.text == *text),
            "CUT_SHORT lists an example no help or README has: {text}"
        );
    }
    let mut seen = BTreeSet::new();
    let todo: Vec<Example> = examples
        .into_iter()
        .filter(|e| seen.insert(e.text.clone()))
        .filter(|e| !OUTSIDE.iter().any(|(t, _)| *t == e.text))
        .filter(|e| labs_installed(&e.text))
        .collect();
    assert!(
        todo.len() > 40 || std::env::var_os("CI").is_none(),
        "too few examples found: {todo:#?}"
    );
    let dir = TempDir::new("examples");
    let mtas = Arc::new(Mutex::new(fixtures(&dir.0)));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_mailbench"));
    let queue = Arc::new(Mutex::new(todo));
    let busy: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen_n: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, busy, failures) = (queue.clone(), busy.clone(), failures.clone());
            let seen_n = seen_n.clone();
            let (bin, dir, mtas) = (bin.clone(), dir.0.clone(), mtas.clone());
            std::thread::spawn(move || {
                loop {
                    // The next example whose addresses no running example holds.
                    let next = {
                        let mut q = queue.lock().expect("queue");
                        if q.is_empty() {
                            return;
                        }
                        let mut b = busy.lock().expect("busy");
                        q.iter()
                            .position(|e| resources(&e.text).is_disjoint(&b))
                            .map(|i| {
                                let e = q.remove(i);
                                b.extend(resources(&e.text));
                                e
                            })
                    };
                    let Some(ex) = next else {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    if ex.text.contains("mtas.json") && !ex.text.contains("--json mtas.json") {
                        let mut made = mtas.lock().expect("mtas");
                        if let Some(mut child) = made.take() {
                            let status = child.wait().expect("wait for the comparison");
                            assert!(status.success(), "making mtas.json: {status}");
                        }
                    }
                    let n = seen_n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let here = example_dir(&dir, n, &ex);
                    if let Some(f) = run_example(&ex, &bin, &here) {
                        failures.lock().expect("failures").push(f);
                    }
                    let mut b = busy.lock().expect("busy");
                    for r in resources(&ex.text) {
                        b.remove(&r);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker");
    }
    if let Some(mut child) = mtas.lock().expect("mtas").take() {
        let _ = child.wait();
    }
    eprintln!("examples ran in {:.0} s", started.elapsed().as_secs_f64());
    bad.extend(failures.lock().expect("failures").drain(..));
    assert!(
        bad.is_empty(),
        "{} failures:\n\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}

/// The threshold keys a help text shows: its "Summary keys" lists and the quoted
/// expressions of its --threshold help and examples.
fn shown_keys(help: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    // Quoted expressions anywhere: 'p99(total)<500ms', 'lost==0'.
    for (i, part) in help.split('\'').enumerate() {
        if i % 2 == 1 && ["<", ">", "=="].iter().any(|op| part.contains(op)) {
            let left = part.split(['<', '>', '=']).next().unwrap_or_default();
            if !left.is_empty() && !left.contains(' ') && !left.contains(':') {
                keys.insert(left.to_string());
            }
        }
    }
    // "Summary keys: a, b, c (note)." and "Summary keys as relay's (a, b, ...)".
    let flat = help.replace('\n', " ");
    for (_, rest) in flat
        .match_indices("Summary keys")
        .map(|(i, _)| ((), &flat[i..]))
    {
        let end = [rest.find(". "), rest.find(';')]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(rest.len());
        let list = &rest["Summary keys".len()..end];
        for piece in list.split(',') {
            // The word before any note in parentheses, or the first inside them.
            let piece = piece.trim().trim_start_matches(':').trim();
            let is_key = |w: &str| {
                !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            };
            let word = match piece.split_once('(') {
                Some((before, _)) if is_key(before.trim()) => before.trim(),
                Some((_, inside)) => inside.trim(),
                None => piece,
            };
            let word = word.trim_end_matches([')', '.']).trim();
            if !word.is_empty()
                && word != "..."
                && word
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                keys.insert(word.to_string());
            }
        }
    }
    // Latencies written as p95(e2e) in the prose.
    for w in flat.split(|c: char| c.is_whitespace() || c == ',') {
        let w = w.trim_matches(|c: char| c == '(' || c == ')' || c == '.' || c == '\'');
        if let Some((f, m)) = w.split_once('(')
            && ["p50", "p90", "p95", "p99", "p999", "max", "mean", "min"].contains(&f)
            && !m.is_empty()
            && m.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '0' || c == '2')
        {
            keys.insert(format!("{f}({m})"));
        }
    }
    keys
}

/// Arguments that make each command with --threshold stop right after its flags are
/// checked (an empty user list, an unreachable target, a 1 ms run).
fn threshold_probe(path: &[String], port: &'static str) -> Option<Vec<&'static str>> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    Some(match p.as_slice() {
        ["send"] => vec!["send", "127.0.0.1:1"],
        ["relay"] => vec!["relay", "--target", "127.0.0.1:1", "-n", "1"],
        ["sink"] => vec!["sink", "--listen", port, "-z", "1ms", "-q"],
        ["dns"] => vec!["dns", "--listen", port, "-z", "1ms", "-q", "--domains", "1"],
        ["mailbox", "populate"] => {
            vec![
                "mailbox",
                "populate",
                "--lmtp",
                "127.0.0.1:1",
                "--users-file",
                "/dev/null",
            ]
        }
        ["mailbox", "pop3"] => {
            vec![
                "mailbox",
                "pop3",
                "--target",
                "127.0.0.1:1",
                "--users-file",
                "/dev/null",
            ]
        }
        ["mailbox", "imap"] => {
            vec![
                "mailbox",
                "imap",
                "--target",
                "127.0.0.1:1",
                "--users-file",
                "/dev/null",
            ]
        }
        ["mailbox", "profile"] => {
            vec![
                "mailbox",
                "profile",
                "--imap",
                "127.0.0.1:1",
                "--users-file",
                "/dev/null",
            ]
        }
        ["mailbox", "arrival"] => vec![
            "mailbox",
            "arrival",
            "--smtp",
            "127.0.0.1:1",
            "--imap",
            "127.0.0.1:1",
            "--users-file",
            "/dev/null",
        ],
        _ => return None,
    })
}

#[test]
fn every_threshold_key_a_help_shows_is_accepted() {
    let mut bad = Vec::new();
    let port: &'static str = format!("127.0.0.1:{}", free_port()).leak();
    for (path, help) in all_helps() {
        if !help.contains("--threshold") {
            continue;
        }
        let Some(probe) = threshold_probe(&path, port) else {
            bad.push(format!(
                "{path:?} takes --threshold: add it to threshold_probe so its keys are checked"
            ));
            continue;
        };
        // The keys the help shows, and the examples its refusal of a bad key suggests.
        let mut keys = shown_keys(&help);
        let mut args = probe.clone();
        args.extend(["--threshold", "no_such_key<1"]);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(err.contains("no summary key"), "{}", describe(&args, &out));
        let suggested = err
            .split("examples:")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        keys.extend(shown_keys(&suggested));
        assert!(!keys.is_empty(), "{path:?}: no keys found in its help");
        for key in &keys {
            let expr = format!("{key}<1");
            let mut args = probe.clone();
            args.extend(["--threshold", &expr]);
            let out = run(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("bad --threshold") {
                bad.push(format!("{path:?} shows {key} but refuses it: {err}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The profile help's scenario file, run as its example runs it (an IMAP and an LMTP
/// server, no POP3): its users need no POP3 server, so none is asked for. Before, every
/// profile without --pop3 stopped with "no pop3 server".
#[test]
fn profile_help_scenario_needs_no_pop3() {
    let help = String::from_utf8_lossy(&run(&["mailbox", "profile", "--help"]).stdout).to_string();
    let toml: String = help
        .lines()
        .skip_while(|l| !l.starts_with("A scenario file:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    assert!(toml.contains("[[user]]"), "no scenario file in:\n{help}");
    let dir = TempDir::new("profile-toml");
    let scenario = dir.0.join("my-users.toml");
    std::fs::write(&scenario, &toml).expect("write scenario");
    let users = dir.0.join("users.txt");
    std::fs::write(
        &users,
        "user1@store.test secret1\nuser2@store.test secret2\n",
    )
    .expect("write users");
    // Nothing listens on these ports: the run gets past the servers its scenario needs, and
    // stops at the first one it cannot reach if an action was due within the second.
    let (imap, lmtp) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let (s, u) = (scenario.to_string_lossy(), users.to_string_lossy());
    let args = [
        "mailbox",
        "profile",
        "--imap",
        &imap,
        "--lmtp",
        &lmtp,
        "--users-file",
        &u,
        "--scenario",
        &s,
        "--virtual-users",
        "2",
        "-z",
        "1s",
        "-q",
    ];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("pop3"), "{}", describe(&args, &out));
    assert!(
        out.status.code() != Some(1) || err.contains("reachable"),
        "expected a run, or the one line of a server it could not reach: {}",
        describe(&args, &out)
    );
    // A POP3 preset does need one, and says so in one line before running.
    crate::util::refused_in_one_line(
        &[
            "mailbox",
            "profile",
            "--imap",
            &imap,
            "--lmtp",
            &lmtp,
            "--users-file",
            &u,
            "--scenario",
            "rabid",
        ],
        "--scenario rabid: its users need a pop3 server; give --pop3 HOST:PORT",
    );
}

/// `--threads` is listed and taken only where connections run: report, compare, merge and
/// doctor neither list it nor take it (one line), and both `mailbench --threads N send …`
/// (bench/scale_out.py's form) and `send … --threads N` still run.
#[test]
fn threads_only_where_connections_run() {
    for (cmd, rest) in [
        ("report", vec!["x.json"]),
        ("compare", vec!["x.json", "y.json"]),
        ("merge", vec!["x.json", "-o", "y.json"]),
        ("doctor", vec![]),
    ] {
        let help = String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).to_string();
        assert!(
            !help.contains("--threads"),
            "{cmd} --help lists --threads:\n{help}"
        );
        let before = [vec!["--threads", "2", cmd], rest.clone()].concat();
        crate::util::refused_in_one_line(&before, "--threads");
        let after = [vec![cmd, "--threads", "2"], rest].concat();
        crate::util::refused_in_one_line(&after, "--threads");
    }
    for cmd in [
        vec!["send"],
        vec!["sink"],
        vec!["relay"],
        vec!["mailbox", "imap"],
    ] {
        let mut args = cmd.clone();
        args.push("--help");
        let help = String::from_utf8_lossy(&run(&args).stdout).to_string();
        assert!(help.contains("--threads"), "{cmd:?} --help lacks --threads");
    }
    let dir = TempDir::new("threads");
    let port = free_port();
    let _sink = sink_at(&format!("127.0.0.1:{port}"), &dir.0);
    let target = format!("127.0.0.1:{port}");
    for args in [
        vec!["--threads", "2", "send", &target, "-n", "50", "-q"],
        vec!["send", &target, "-n", "50", "-q", "--threads", "2"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    }
}

/// An LMTP run prints its greeting step as `lhlo` (the results file keeps the key `ehlo`,
/// so that LMTP files from before still compare and merge).
#[test]
fn lmtp_runs_print_lhlo() {
    let dir = TempDir::new("lhlo");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = mailbench()
        .args(["sink", "--lmtp", "-q", "--listen", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start an LMTP sink");
    let _sink = Proc(child);
    assert!(wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(&addr).is_ok()
    }));
    let json = dir.0.join("lmtp.json");
    let j = json.to_string_lossy();
    let args = ["send", &addr, "--lmtp", "-n", "20", "-q", "--json", &j];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |name: &str| {
        text.lines()
            .any(|l| l.trim_start().starts_with(&format!("{name} ")))
    };
    assert!(row("lhlo") && !row("ehlo"), "{}", describe(&args, &out));
    let r = crate::util::results(&json);
    assert!(
        r["latency"]["ehlo"]["count"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "the results key stays ehlo: {}",
        r["latency"]
    );
}

/// The option help of `--flag` in a help text (words joined by spaces): its first 150
/// characters, enough for the default it states.
fn option_help(help: &str, flag: &str) -> String {
    let from = help.find(flag).map_or("", |i| &help[i + flag.len()..]);
    from.chars().take(150).collect()
}

/// Issue 25 item 20's wording: what the tool and `mailbox` say they do, each mailbox
/// command's `-c`/`-n` defaults (as the run uses them), POP3's and IMAP's TLS words and
/// ports, `--per-conn` not offered where it is refused, and a mailbox user list's errors
/// without the sink's flags.
#[test]
fn help_texts_say_what_the_commands_do() {
    let help = |args: &[&str]| {
        let mut a = args.to_vec();
        a.push("--help");
        // Words joined by single spaces, whatever clap's wrapping.
        String::from_utf8_lossy(&run(&a).stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let top = help(&[]);
    let about = top.split("Usage:").next().unwrap_or_default();
    for word in [
        "IMAP", "POP3", "profile", "arrival", "DNS", "report", "compare", "merge",
    ] {
        assert!(
            about.contains(word),
            "the tool's description lacks {word}: {about}"
        );
    }
    let mailbox = help(&["mailbox"]);
    let about = mailbox.split("Usage:").next().unwrap_or_default();
    for word in ["IMAP", "POP3", "populate", "profile", "arrival"] {
        assert!(
            about.contains(word),
            "mailbox's description lacks {word}: {about}"
        );
    }
    use mailbench::cli::mailbox::{ARRIVAL_DEFAULTS, IMAP_DEFAULTS, POP3_DEFAULTS};
    for (cmd, d) in [
        ("pop3", POP3_DEFAULTS),
        ("imap", IMAP_DEFAULTS),
        ("arrival", ARRIVAL_DEFAULTS),
    ] {
        let h = help(&["mailbox", cmd]);
        let c = option_help(&h, "--concurrency <N>");
        assert!(
            c.contains(&format!("[default: {}]", d.concurrency)),
            "{cmd} -c: {c}"
        );
        let n = option_help(&h, "--messages <N>");
        assert!(n.contains(&format!(": {}]", d.messages)), "{cmd} -n: {n}");
    }
    let pop3 = help(&["mailbox", "pop3"]);
    let imap = help(&["mailbox", "imap"]);
    assert!(
        pop3.contains("POP3 STLS") && pop3.contains("POP3S (995)"),
        "{pop3}"
    );
    assert!(
        imap.contains("STARTTLS after CAPABILITY") && imap.contains("IMAPS (993)"),
        "{imap}"
    );
    assert!(
        !pop3.contains("--per-conn"),
        "pop3 lists --per-conn, which it refuses"
    );
    assert!(imap.contains("--per-conn"), "imap lost --per-conn");
    crate::util::refused_in_one_line(
        &[
            "mailbox",
            "pop3",
            "--target",
            "127.0.0.1:1",
            "--users-file",
            "/dev/null",
            "--per-conn",
            "2",
        ],
        "--per-conn: a POP3 session holds its mailbox until QUIT",
    );
    let dir = TempDir::new("users-flags");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@store.test secret dr\n").expect("write users");
    let u = users.to_string_lossy();
    let args = [
        "mailbox",
        "pop3",
        "--target",
        "127.0.0.1:1",
        "--users-file",
        &u,
    ];
    crate::util::refused_in_one_line(&args, "\"dr\" after the password; write 'address password'");
    crate::util::refused_in_one_line(
        &[
            "mailbox",
            "imap",
            "--target",
            "127.0.0.1:1",
            "--users-file",
            "/dev/null",
        ],
        "has no users; write one 'address password' per line",
    );
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("[flags]") && !err.contains("flags are") && !err.contains("after the flags"),
        "{}",
        describe(&args, &out)
    );
}

/// Issue 40: every comparison page and `compare`'s source linked docs/compare.md, which
/// did not exist. Every `docs/….md` the sources, the README and the docs name exists, and
/// docs/compare.md explains every verdict `compare` prints.
#[test]
fn issue_40_every_doc_the_sources_name_exists_and_compare_md_has_every_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts: Vec<(PathBuf, String)> = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(dir).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "md") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
            }
        }
    }
    walk(&root.join("src"), &mut texts);
    walk(&root.join("crates"), &mut texts);
    walk(&root.join("docs"), &mut texts);
    let readme = root.join("README.md");
    texts.push((
        readme.clone(),
        std::fs::read_to_string(&readme).expect("README"),
    ));
    let mut named = 0;
    for (file, text) in &texts {
        for (i, _) in text.match_indices("docs/") {
            let tail = &text[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/_.-".contains(c)))
                .unwrap_or(tail.len());
            let Some(path) = tail[..end].strip_suffix('.').or(Some(&tail[..end])) else {
                continue;
            };
            if !path.ends_with(".md") {
                continue;
            }
            named += 1;
            assert!(
                root.join(path).exists(),
                "{} names {path}, which does not exist",
                file.display()
            );
        }
    }
    assert!(named > 3, "only {named} docs named");
    let compare = std::fs::read_to_string(root.join("docs/compare.md")).expect("compare.md");
    for verdict in [
        "faster",
        "slower",
        "better",
        "worse",
        "within noise",
        "within resolution",
        "too few rounds",
        "single runs",
    ] {
        assert!(
            compare.contains(&format!("**{verdict}"))
                || compare.contains(&format!("/ {verdict}**")),
            "docs/compare.md does not explain the verdict {verdict:?}"
        );
    }
}
