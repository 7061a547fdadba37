//! Issue 9, measurement truth: each test puts a known value in (an injected delay, a known
//! count, a refused share) and checks the exact figure that comes out, against the cases
//! the issue reproduced. The known delays come from `mailbench sink`'s fault rules; real
//! peers (Postfix's smtp-sink, Python's mailbox module) check what they can.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::sink::Sink;
use crate::util::{TempDir, describe, mailbench, require, results, run, run_expect, smtp_sink};

/// A latency statistic of a results file, in ms.
fn ms(r: &serde_json::Value, metric: &str, stat: &str) -> f64 {
    r["latency"][metric][stat].as_f64().unwrap_or_else(|| {
        panic!(
            "no {stat} for {metric} in the results: {:#}",
            r["latency"][metric]
        )
    }) / 1000.0
}

fn count(r: &serde_json::Value, metric: &str) -> u64 {
    r["latency"][metric]["count"].as_u64().unwrap_or(0)
}

/// Runs `send` against `target` with `args` and returns its results (exit code checked).
fn send(target: &str, args: &[&str], code: i32) -> serde_json::Value {
    let dir = TempDir::new("truth-send");
    let json = dir.0.join("r.json").to_string_lossy().to_string();
    let all = [&["send", target, "-q", "--json", &json][..], args].concat();
    run_expect(&all, code);
    results(Path::new(&json))
}

/// Stops a sink and returns its results file.
fn sink_results(sink: Sink, json: &Path) -> serde_json::Value {
    let (code, out) = sink.stop();
    assert_eq!(code, Some(0), "{out}");
    results(json)
}

#[test]
fn issue_9_1_total_is_the_message_time_pipelined_or_not_open_or_closed_loop() {
    let sink = Sink::start(&["--rule", "data_end:delay=100ms"]);
    let target = sink.target();
    for mode in [
        &["-n", "10", "-c", "1"][..],
        &["-n", "10", "-c", "1", "--no-pipelining"],
        &["-n", "10", "-c", "1", "--chunking"],
        &["-n", "10", "-c", "1", "--rate", "5/s"],
    ] {
        let r = send(&target, mode, 0);
        let (total, data_end) = (ms(&r, "total", "p50_us"), ms(&r, "data_end", "p50_us"));
        assert!(
            (100.0..115.0).contains(&total),
            "{mode:?}: total p50 {total} ms for a 100 ms delay"
        );
        assert!(
            total - data_end < 5.0,
            "{mode:?}: total {total} ms against data_end {data_end} ms"
        );
        // Two delays would be 200 ms or more; a 2-core CI box running another test beside
        // this one has stalled a single message by 70 ms, so the bound sits below two delays
        // rather than just above one.
        assert!(
            ms(&r, "total", "max_us") < 190.0,
            "{mode:?}: no message took two delays: {:#}",
            r["latency"]["total"]
        );
    }
}

#[test]
fn issue_9_2_3_quit_is_timed_when_sent_and_never_charged_to_the_next_message() {
    let sink = Sink::start(&["--rule", "quit:delay=70ms"]);
    let target = sink.target();
    let r = send(&target, &["-n", "40", "-c", "4", "--per-conn", "2"], 0);
    assert_eq!(count(&r, "quit"), 20, "one QUIT per connection");
    let quit = ms(&r, "quit", "p50_us");
    assert!((70.0..80.0).contains(&quit), "quit p50 {quit} ms for 70 ms");
    assert!(
        ms(&r, "total", "p90_us") < 10.0,
        "the QUIT wait leaked into total: {:#}",
        r["latency"]["total"]
    );
    // Open loop: the QUIT goes out with the last message and its reply is read at once.
    let r = send(
        &target,
        &["--rate", "50/s", "-n", "100", "-c", "4", "--per-conn", "5"],
        0,
    );
    let quit = ms(&r, "quit", "p50_us");
    assert!(
        (70.0..80.0).contains(&quit),
        "open-loop quit p50 {quit} ms for 70 ms"
    );
    // And against Postfix's smtp-sink, which answers QUIT at once.
    let Some((_peer, port)) = smtp_sink(&[]) else {
        return;
    };
    let r = send(
        &format!("127.0.0.1:{port}"),
        &["--rate", "50/s", "-n", "200", "-c", "4", "--per-conn", "5"],
        0,
    );
    let quit = ms(&r, "quit", "p50_us");
    assert!(
        quit < 5.0,
        "smtp-sink answers QUIT at once, got p50 {quit} ms"
    );
}

#[test]
fn issue_9_4_starttls_and_the_tls_handshake_are_one_sample_each_per_connection() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let r = send(
        &target,
        &[
            "-n",
            "20",
            "-c",
            "2",
            "--per-conn",
            "5",
            "--tls",
            "starttls",
        ],
        0,
    );
    let conns = r["counters"]["tls_connections"].as_u64().expect("tls");
    assert_eq!(conns, 4, "{:#}", r["counters"]);
    assert_eq!(count(&r, "starttls"), conns, "{:#}", r["latency"]);
    assert_eq!(count(&r, "tls_handshake"), conns, "{:#}", r["latency"]);
}

#[test]
fn issue_9_8_9_the_sink_does_not_call_its_own_refusals_lost_and_follow_ons_are_no_errors() {
    let dir = TempDir::new("truth-refuse");
    let json = dir.0.join("sink.json");
    let sink = Sink::start(&["--rule", "rcpt:451:30%", "--json", &json.to_string_lossy()]);
    let target = sink.target();
    let r = send(&target, &["-n", "2000", "-c", "8"], 0);
    let rejected = r["summary"]["rejected"].as_u64().expect("rejected");
    assert!((450..750).contains(&rejected), "about 30 %: {rejected}");
    let rows = r["errors"].as_array().expect("error table");
    assert_eq!(rows.len(), 1, "only the RCPT refusals: {rows:#?}");
    assert_eq!(
        (
            &rows[0]["phase"],
            &rows[0]["code"],
            rows[0]["count"].as_u64()
        ),
        (&"rcpt".into(), &451.into(), Some(rejected)),
        "{rows:#?}"
    );
    assert!(
        rows[0]["sample"]
            .as_str()
            .is_some_and(|s| s.starts_with("451 4.3.0")),
        "the reason is shown: {rows:#?}"
    );
    crate::util::assert_threshold_keys(&r, &mailbench::send::THRESHOLDS, &[]);
    let s = sink_results(sink, &json);
    crate::util::assert_threshold_keys(&s, &mailbench::sink::THRESHOLDS, &[]);
    let s = &s["summary"];
    assert_eq!(s["refused"].as_u64(), Some(rejected), "{s:#}");
    assert_eq!(
        s["rejected"].as_u64(),
        Some(rejected),
        "no 554 follow-ons: {s:#}"
    );
    assert_eq!(s["lost"], 0, "{s:#}");
    assert!(s["missing"].as_u64() > Some(0), "{s:#}");
    // MAIL refused: the RCPT 503 and DATA 554 that follow are consequences.
    let sink = Sink::start(&["--rule", "mail:550"]);
    let r = send(&sink.target(), &["-n", "20"], 2);
    let rows = r["errors"].as_array().expect("error table");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        (&rows[0]["phase"], &rows[0]["count"]),
        (&"mail".into(), &20.into())
    );
}

#[test]
fn issue_9_10_scheduled_messages_that_never_started_are_counted() {
    // 2 connections at 50 ms a message carry 40/s; the schedule asks 200/s for 3 s.
    let sink = Sink::start(&["--rule", "data_end:delay=50ms"]);
    let target = sink.target();
    let args = [
        "--rate",
        "200/s",
        "-z",
        "3s",
        "-c",
        "2",
        "--grace",
        "1s",
        "--threshold",
        "unstarted==0",
    ];
    let r = send(&target, &args, 3);
    let s = &r["summary"];
    assert_eq!(s["intended"], 600, "{s:#}");
    let sent = s["sent"].as_u64().expect("sent");
    assert!(sent < 250, "40/s for about 4 s: {sent}");
    assert_eq!(s["unstarted"].as_u64(), Some(600 - sent), "{s:#}");
    assert_eq!(
        s["failed"].as_u64(),
        Some(s["rejected"].as_u64().unwrap_or(0) + s["errors"].as_u64().unwrap_or(0)),
        "messages cut off at the end are aborted, not failed: {s:#}"
    );
}

#[test]
fn issue_9_12_sizes_are_exact_and_no_probe_connection_is_made() {
    let dir = TempDir::new("truth-size");
    let json = dir.0.join("sink.json");
    let md = dir.0.join("md");
    let store = format!("maildir:{}", md.display());
    let sink = Sink::start(&["--store", &store, "--json", &json.to_string_lossy()]);
    let target = sink.target();
    let r = send(&target, &["-n", "40", "-c", "4", "--size", "10k"], 0);
    assert_eq!(r["summary"]["bytes"], 40 * 10240, "{:#}", r["summary"]);
    let s = sink_results(sink, &json);
    assert_eq!(s["summary"]["sessions"], 4, "no extra probe session");
    for e in std::fs::read_dir(md.join("new")).expect("maildir") {
        let len = e.expect("entry").metadata().expect("stat").len();
        assert_eq!(len, 10240, "a --size 10k message as stored");
    }
}

#[test]
fn issue_9_13_14_an_idle_run_raises_no_warning_and_a_late_one_does() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let r = send(&target, &["--rate", "50/s", "-n", "200"], 0);
    assert_eq!(
        r["self"]["warnings"],
        serde_json::json!([]),
        "{:#}",
        r["self"]
    );
    // A shared machine may stall a send or two past 20 ms; the warning starts above 1 %,
    // and an idle run stays under it.
    let late = r["counters"]["late_starts"].as_u64().expect("late");
    assert!(
        late * 100 <= 200,
        "expected at most 2 of 200 late, got {late}"
    );
    assert!(
        r["self"]["cpu_peak_pct"].as_f64() < Some(50.0),
        "{:#}",
        r["self"]
    );
    // 2 connections at 200 ms a message carry 10/s against 50/s asked: late, and said so.
    let slow = Sink::start(&["--rule", "data_end:delay=200ms"]);
    let r = send(
        &slow.target(),
        &["--rate", "50/s", "-n", "40", "-c", "2"],
        0,
    );
    let late = r["counters"]["late_starts"].as_u64().expect("late");
    assert!(late > 20, "{:#}", r["counters"]);
    let warnings = r["self"]["warnings"].to_string();
    assert!(
        warnings.contains("started more than 20 ms late"),
        "{warnings}"
    );
}

#[test]
fn issue_9_16_a_run_where_everything_failed_exits_2_and_says_why() {
    let dir = TempDir::new("truth-tls");
    let ca = crate::util::stranger_ca(&dir.0);
    let sink = Sink::start(&[]);
    let target = sink.target();
    let ca_s = ca.clone();
    let args = [
        "send", &target, "-n", "10", "-c", "2", "--tls", "starttls", "--tls-ca", &ca_s,
    ];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tls_handshake") && text.contains("invalid peer certificate"),
        "the error table names the phase and the reason:\n{text}"
    );
}

#[test]
fn issue_9_18_tls_percent_alone_means_starttls_on_that_share() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let r = send(
        &target,
        &[
            "-n",
            "200",
            "-c",
            "4",
            "--per-conn",
            "1",
            "--tls-percent",
            "30",
        ],
        0,
    );
    let tls = r["counters"]["tls_connections"].as_u64().expect("tls");
    assert!((30..=90).contains(&tls), "about 60 of 200: {tls}");
    let out = run(&["send", &target, "--tls", "none", "--tls-percent", "30"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn issue_9_19_the_results_say_whether_the_run_was_interrupted() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let r = send(&target, &["-n", "20"], 0);
    assert_eq!(r["interrupted"], false);
    let dir = TempDir::new("truth-int");
    let json = dir.0.join("r.json");
    let mut run = crate::util::Terminated(
        mailbench()
            .args([
                "send", &target, "--rate", "50/s", "-z", "60s", "-q", "--json",
            ])
            .arg(&json)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        run.stop(),
        Some(2),
        "an interrupted run exits 2 (partial results)"
    );
    assert_eq!(results(&json)["interrupted"], true);
}

#[test]
fn issue_9_21_mbox_storage_is_what_mbox_readers_expect() {
    let dir = TempDir::new("truth-mbox");
    let mbox = dir.0.join("mail.mbox");
    let store = format!("mbox:{}", mbox.display());
    let sink = Sink::start(&["--store", &store]);
    send(&sink.target(), &["-n", "5", "-c", "1"], 0);
    drop(sink);
    // Python's mailbox module reads it back: five messages, LF only, this year's date.
    let check = "import mailbox, sys, time\n\
        mb = mailbox.mbox(sys.argv[1])\n\
        msgs = list(mb)\n\
        assert len(msgs) == 5, len(msgs)\n\
        for m in msgs:\n\
        \x20   assert m['X-Mailbench-Trace'], m.keys()\n\
        \x20   year = int(m.get_from().split()[-1])\n\
        \x20   assert year == time.gmtime().tm_year, m.get_from()\n\
        raw = open(sys.argv[1], 'rb').read()\n\
        assert b'\\r' not in raw\n";
    let out = Command::new("python3")
        .args(["-c", check])
        .arg(&mbox)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn issue_9_23_a_closed_stdout_is_not_a_panic() {
    let sink = Sink::start(&[]);
    let target = sink.target();
    let mut child = mailbench()
        .args(["send", &target, "-n", "50", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take()); // `| head -0`: the reader is gone before anything is printed
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn issue_9_24_short_connections_do_not_grow_the_sink() {
    use std::io::{BufRead, BufReader, Write};
    let sink = Sink::start(&[]);
    let port = sink.port;
    let rss = || {
        std::fs::read_to_string(format!("/proc/{}/status", sink.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .expect("sink RSS")
    };
    // Greeting, QUIT, bye: the shortest SMTP session, from several threads.
    let sessions = |n: usize| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..n / 4 {
                        let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
                        let mut r = BufReader::new(&s);
                        let mut line = String::new();
                        r.read_line(&mut line).expect("greeting");
                        (&s).write_all(b"QUIT\r\n").expect("quit");
                        line.clear();
                        r.read_line(&mut line).expect("bye");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("client thread");
        }
    };
    sessions(10_000);
    let before = rss();
    sessions(50_000);
    let after = rss();
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 50,000 sessions"
    );
}

#[test]
fn issue_9_17_usage_errors_exit_1_and_bad_user_list_flags_are_named() {
    let dir = TempDir::new("truth-usage");
    for args in [
        &["send", "127.0.0.1:2525", "--size", "-5k"][..],
        &["send", "127.0.0.1:2525", "--rate", "-5/s"],
        &["send", "127.0.0.1:2525", "--no-such-flag"],
        &["send"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{}", describe(args, &out));
    }
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "a@example.test secret dz\n").expect("users");
    let u = users.to_string_lossy().to_string();
    let args = ["send", "127.0.0.1:2525", "--recipients", &u];
    let out = run_expect(&args, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 1") && err.contains("unknown flag 'z'"),
        "{err}"
    );
    // --help still succeeds.
    assert_eq!(run(&["send", "--help"]).status.code(), Some(0));
}

#[test]
fn issue_9_15_thresholds_may_only_name_what_the_command_measures() {
    for (expr, says) in [
        ("lost==0", "accepted"),
        ("p99_total<5", "msgs_per_sec"),
        ("p99(e2e)<1s", "total"),
    ] {
        let args = ["send", "127.0.0.1:2525", "--threshold", expr];
        let out = run_expect(&args, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{expr}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let out = run_expect(&["sink", "--threshold", "p99(total)<1s"], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("e2e"));
}

#[test]
fn issue_9_22_dsns_carry_date_and_message_id() {
    let Some(_) = require("python3") else {
        return;
    };
    let dir = TempDir::new("truth-dsn");
    let bounces = dir.0.join("bounces");
    let catcher = Sink::start(&["--store", &format!("maildir:{}", bounces.display())]);
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "b@example.test x b\n").expect("users");
    let to = catcher.target();
    let sink = Sink::start(&["--users", &users.to_string_lossy(), "--bounce-to", &to]);
    send(&sink.target(), &["-n", "1", "--to", "b@example.test"], 0);
    assert!(
        crate::util::wait_until(Duration::from_secs(10), || {
            std::fs::read_dir(bounces.join("new")).is_ok_and(|d| d.count() == 1)
        }),
        "the DSN arrives"
    );
    let check = "import email, email.utils, glob, sys\n\
        [p] = glob.glob(sys.argv[1] + '/new/*')\n\
        m = email.message_from_binary_file(open(p, 'rb'))\n\
        assert email.utils.parsedate_to_datetime(m['Date']), m['Date']\n\
        assert m['Message-ID'].startswith('<') and '@' in m['Message-ID'], m['Message-ID']\n\
        assert m.get_content_type() == 'multipart/report'\n";
    let out = Command::new("python3")
        .args(["-c", check])
        .arg(&bounces)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn issue_40_a_size_below_the_smallest_message_is_refused_naming_the_smallest_which_is_exact() {
    // `--size 0` was taken silently and sent 341-byte messages.
    let args = ["send", "127.0.0.1:9", "-n", "1", "--size", "0"];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let least: u64 = err
        .split_once("the smallest message mailbench can make is ")
        .and_then(|(_, r)| r.split_once(" bytes"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("the line names the smallest size: {err}"));
    let below = (least - 1).to_string();
    let out = run(&["send", "127.0.0.1:9", "-n", "1", "--size", &below]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{least} - 1 bytes cannot be made either"
    );
    // The smallest is honoured exactly, for every sequence number; a range below it
    // starts there.
    let dir = TempDir::new("truth-least");
    let json = dir.0.join("sink.json");
    let md = dir.0.join("md");
    let store = format!("maildir:{}", md.display());
    let sink = Sink::start(&["--store", &store, "--json", &json.to_string_lossy()]);
    let target = sink.target();
    let exact = least.to_string();
    send(&target, &["-n", "120", "-c", "4", "--size", &exact], 0);
    let r = send(&target, &["-n", "40", "-c", "4", "--size", "0-1k"], 0);
    assert_eq!(
        r["config"]["size"],
        serde_json::json!({"min": least, "max": 1024}),
        "the range as sent"
    );
    sink_results(sink, &json);
    let mut lens: Vec<u64> = std::fs::read_dir(md.join("new"))
        .expect("maildir")
        .map(|e| e.expect("entry").metadata().expect("stat").len())
        .collect();
    lens.sort_unstable();
    assert_eq!(lens.len(), 160);
    assert!(
        lens[..120].iter().all(|l| *l == least) && lens[120..].iter().all(|l| *l >= least),
        "expected 120 messages of exactly {least} bytes and 40 of at least that, got {lens:?}"
    );
}
