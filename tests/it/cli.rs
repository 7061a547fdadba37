//! Bad input gets one clear line and exit code 1, never a panic.

use crate::util::{describe, free_port, run, run_expect};

#[test]
fn bad_flags_give_one_line_and_exit_1() {
    let port = free_port().to_string();
    let target = format!("127.0.0.1:{port}");
    let cases: &[(&[&str], &str)] = &[
        (&["send", "127.0.0.1:0"], "invalid port"),
        (&["send", "::1"], "[::1]"),
        (&["send", &target, "--rate", "fast"], "--rate: invalid rate"),
        (
            &["relay", "--target", &target, "--link", "mx:delay=5ms"],
            "--link mx:delay=5ms: no hop",
        ),
        (
            &["relay", "--target", &target, "--link", "mta-mta:delay=5ms"],
            "--link mta-mta: shapes the way from one lab MTA to the next; give --lab with --hops 2",
        ),
        (
            &["relay", "--target", &target, "--link", "mta:delay=soon"],
            "--link mta:delay=soon: invalid duration",
        ),
        (
            &[
                "relay",
                "--target",
                &target,
                "--link",
                "sink:delay=5ms",
                "--link",
                "sink:rate=1M",
            ],
            "shaped twice",
        ),
        (&["send", &target, "--size", "12q"], "--size: invalid size"),
        (
            &["send", &target, "-z", "soon"],
            "--duration: invalid duration",
        ),
        (&["send", &target, "--to", "nobody"], "--to"),
        (
            &["send", &target, "--threshold", "p99(total)"],
            "--threshold",
        ),
        (
            &["send", &target, "--senders", "/nonexistent/users.txt"],
            "cannot read user list",
        ),
        (&["send", &target, "--auth", "senders"], "--senders"),
        (
            &[
                "send",
                &target,
                "--tls",
                "starttls",
                "--tls-ca",
                "/nonexistent.pem",
            ],
            "--tls-ca",
        ),
        (&["send", &target], "not reachable"),
        // Extra digits in -c once took all the machine's memory before connecting.
        (
            &["send", &target, "-n", "10", "-c", "999999999"],
            "at most 100000 connections per process",
        ),
        (
            &[
                "report",
                "/nonexistent/r.json",
                "--output",
                "/nonexistent/dir/r.html",
            ],
            "--output /nonexistent/dir/r.html: there is no folder /nonexistent/dir",
        ),
        (
            &["send", &target, "-n", "-5"],
            "-5 is a negative number where a value was expected",
        ),
        // Accepted without meaning before: nothing to fsync, no level to search at.
        (
            &["sink", "--fsync"],
            "--fsync: the sink stores nothing to make durable (--store discard)",
        ),
        (
            &["relay", "--lab", "postfix", "--find-max", "-c", "1,4"],
            "--find-max with a list of concurrency levels",
        ),
        // A fault rule's percentage names the flag it came with (relay's is not sink's).
        (
            &["relay", "--lab", "postfix", "--sink-rule", "rcpt:451:130%"],
            "bad --sink-rule \"rcpt:451:130%\"",
        ),
        (
            &["sink", "--listen", &target, "--rule", "rcpt:451:x%"],
            "bad --rule \"rcpt:451:x%\"",
        ),
        // Checked even when nothing is filled.
        (
            &["lab", "dovecot", "--fill", "0", "--fill-size", "2zz"],
            "--fill-size",
        ),
    ];
    for (args, needle) in cases {
        let out = run_expect(args, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needle),
            "expected {needle:?} in stderr\n{}",
            describe(args, &out)
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "one line expected\n{}",
            describe(args, &out)
        );
        assert!(!err.contains("panicked"), "{}", describe(args, &out));
    }
}

#[test]
fn help_has_examples() {
    let out = run(&["send", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Examples:") && text.contains("X-Mailbench-Trace"),
        "{text}"
    );
}

/// clap turns a literal `{n}` in help text into a line break; the user placeholder must
/// survive into `--help` as written.
#[test]
fn help_shows_the_user_placeholder() {
    let out = run(&["mailbox", "pop3", "--help"]);
    // Help wraps at the terminal's width: compare with the lines joined.
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("[default: user{num}@store.test]") && text.contains("secret{num}"),
        "expected the {{num}} placeholder in:\n{text}"
    );
}

/// Issue 40: `mailbox imap --help` promised the default mix's weights ("imaptest-like,
/// see below") and showed none; it shows them, as the run uses them.
#[test]
fn issue_40_the_imap_help_shows_the_default_mix() {
    let out = run(&["mailbox", "imap", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mix = "fetch=25,fetch_body=20,store=15,delete=5,expunge=5,append=4,copy=1,search=5,list=5,status=5,select=5,noop=5";
    assert!(
        text.contains(&format!("[default: {mix}]")),
        "expected the default mix {mix} in:\n{text}"
    );
}

/// Issue 31: `send --trace-io` drew clap's tip "a similar argument exists: '--grace'" (a
/// drain timeout); a flag of relay given to send or sink says where it belongs, in one line.
#[test]
fn issue_31_trace_io_on_send_or_sink_points_to_relay() {
    use crate::util::refused_in_one_line;
    for args in [
        &["send", "127.0.0.1:1", "--trace-io"][..],
        &["sink", "--listen", "127.0.0.1:0", "--trace-io"],
    ] {
        refused_in_one_line(args, "relay does: mailbench relay --lab postfix --trace-io");
        let out = crate::util::run(args);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("--grace"));
    }
    // Hidden: not offered by --help or completion.
    let help = crate::util::run(&["send", "--help"]);
    assert!(!String::from_utf8_lossy(&help.stdout).contains("--trace-io"));
}

/// Every kind of mistake clap catches (a number out of range or not a number, a value not
/// in the list, an unknown flag, command or word, a missing argument, a missing value, two
/// flags that exclude each other) is one line naming the input and the fix, exit 1; clap's
/// tips, usage lines and "For more information" are gone.
#[test]
fn clap_s_refusals_are_one_line_naming_the_input_and_the_fix() {
    use crate::util::refused_in_one_line;
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "mailbox",
                "imap",
                "--target",
                "127.0.0.1:1",
                "--pipeline",
                "0",
            ],
            "mailbench: --pipeline 0: must be 1..=1000 (commands in flight per session)",
        ),
        (
            &["send", "127.0.0.1:1", "--threads", "many"],
            "mailbench: --threads many: must be a whole number",
        ),
        (
            &[
                "mailbox",
                "imap",
                "--target",
                "127.0.0.1:1",
                "--login",
                "foo",
            ],
            "mailbench: --login foo: not one of login, plain",
        ),
        (
            &["relay", "--lab", "postfx"],
            "--lab postfx: not one of postfix, exim, opensmtpd, sendmail, qmail; did you mean postfix?",
        ),
        (
            &["send", "--bogus"],
            "mailbench send: unknown option --bogus; see mailbench send --help",
        ),
        (
            &["relay", "--bogus"],
            "mailbench relay: unknown option --bogus; see mailbench relay --help",
        ),
        (
            &["send", "127.0.0.1:1", "--rat", "5/s"],
            "did you mean --rate?",
        ),
        (
            &["mailbox", "populate", "--fill", "3"],
            "unknown option --fill; populate's messages per user are --per-user N",
        ),
        (
            &["send", "127.0.0.1:1", "--lab", "postfix"],
            "unknown option --lab (a flag of relay,",
        ),
        (
            &["lab", "postfx"],
            "mailbench lab: unknown command postfx; did you mean postfix?",
        ),
        (
            &["127.0.0.1:25"],
            "unknown command 127.0.0.1:25; the commands are send, relay,",
        ),
        (
            &["send", "127.0.0.1:1", "extra"],
            "unexpected argument extra: send takes one <TARGET> (where to send)",
        ),
        (
            &["send"],
            "mailbench send: missing <TARGET> (where to send)",
        ),
        (
            &["mailbox", "imap"],
            "missing --target <HOST:PORT> (the IMAP server) or --lab dovecot",
        ),
        (
            &["relay"],
            "mailbench relay: missing --target <HOST:PORT> (the MTA under test) or --lab \
             postfix (start a disposable MTA for the run)",
        ),
        (&["sink", "--key", "k.pem"], "missing --cert <FILE>"),
        (
            &["dns", "--zone-file"],
            "--zone-file needs a value: --zone-file <FILE>",
        ),
        (
            &["relay", "--target", "127.0.0.1:1", "--lab", "postfix"],
            "mailbench relay: --target cannot be used with --lab; drop one",
        ),
        (&["completions", "bsh"], "<SHELL> bsh: not one of bash,"),
        (
            &["send", "127.0.0.1:1", "--quiet=yes"],
            "mailbench: --quiet takes no value: write --quiet alone, without yes",
        ),
        (
            &["send", "127.0.0.1:1", "--rate", "1/s", "--rate", "2/s"],
            "mailbench send: --rate given twice; give it once",
        ),
        (
            &["help", "foo"],
            "mailbench: unknown command foo; the commands are send,",
        ),
        (
            &["--threads", "2"],
            "mailbench: which command? one of send, relay,",
        ),
    ];
    for (args, needle) in cases {
        refused_in_one_line(args, needle);
        let out = crate::util::run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        for clap_s in [
            "For more information",
            "Usage:",
            "tip:",
            "error:",
            "panicked",
        ] {
            assert!(!err.contains(clap_s), "{}", describe(args, &out));
        }
    }
}

/// Help and version print as clap prints them, on stdout, exit 0; a bare command shows
/// its help (on stderr, exit 1: nothing was run).
#[test]
fn help_and_version_are_clap_s_own() {
    for args in [
        &["--help"][..],
        &["send", "--help"],
        &["mailbox", "imap", "-h"],
        &["help", "relay"],
    ] {
        let out = run_expect(args, 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Usage: mailbench"),
            "{}",
            describe(args, &out)
        );
    }
    let out = run_expect(&["--version"], 0);
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with("mailbench ") && version.contains("(commit "),
        "{version}"
    );
    for args in [&[][..], &["mailbox"], &["lab"]] {
        let out = run_expect(args, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("Usage: mailbench") && err.contains("Commands:"),
            "{}",
            describe(args, &out)
        );
    }
}

/// A bad count, duration, rate or size names the flag it came from, not only the value
/// (`invalid duration "x"` alone left the user to find which of a command's durations).
#[test]
fn a_bad_value_names_its_flag() {
    use crate::util::refused_in_one_line;
    let cases: &[(&[&str], &str)] = &[
        (
            &["send", "127.0.0.1:1", "-c", "x"],
            "mailbench: --concurrency: invalid count \"x\"",
        ),
        (
            &["send", "127.0.0.1:1", "-n", "x"],
            "--messages: invalid count",
        ),
        (
            &["send", "127.0.0.1:1", "--grace", "x"],
            "--grace: invalid duration",
        ),
        (
            &["send", "127.0.0.1:1", "--attach", "x"],
            "--attach: invalid size",
        ),
        (
            &["send", "127.0.0.1:1", "--timeout", "x"],
            "--timeout: invalid duration",
        ),
        (
            &["send", "127.0.0.1:1", "--timeout", "0"],
            "--timeout 0: must be above zero",
        ),
        // A limit past the clock's range panicked every IMAP session (the newcomer's
        // find); a year is plenty.
        (
            &["send", "127.0.0.1:1", "--timeout", "10000000000000000000s"],
            "--timeout 10000000000000000000s: must be at most 365d",
        ),
        (
            &["send", "127.0.0.1:1", "--connect-timeout", "0s"],
            "--connect-timeout 0s: must be above zero",
        ),
        (
            &["send", "127.0.0.1:1", "--interval", "x"],
            "--interval: invalid duration",
        ),
        (&["sink", "--greylist", "x"], "--greylist: invalid duration"),
        (&["sink", "--max-size", "x"], "--max-size: invalid size"),
        (
            &["sink", "--exit-after-messages", "x"],
            "--exit-after-messages: invalid count",
        ),
        (
            &["dns", "--domains", "3", "-z", "x"],
            "--duration: invalid duration",
        ),
        (
            &["dns", "--domains", "3", "--zone-ttl", "x"],
            "--zone-ttl: invalid duration",
        ),
        (
            &["relay", "--lab", "postfix", "-c", "1,x"],
            "--concurrency: invalid count",
        ),
        (
            &["sink", "--listen", "nothost.invalid:25"],
            "--listen: cannot resolve target \"nothost.invalid:25\"",
        ),
        (
            &["relay", "--target", "nothost.invalid:25"],
            "check the host name, or give an IP address",
        ),
        (
            &["relay", "--lab", "postfix", "--drain-timeout", "x"],
            "--drain-timeout: invalid duration",
        ),
    ];
    for (args, needle) in cases {
        refused_in_one_line(args, needle);
    }
}

/// An output file in a folder that does not exist is refused before the run: it was found
/// only when the results were written, after the whole run (exit 2, the results lost).
#[test]
fn an_output_file_that_cannot_be_written_is_refused_before_the_run() {
    use crate::util::refused_in_one_line;
    // A listener that would see the run's first connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let target = listener.local_addr().expect("addr").to_string();
    let missing = "/tmp/mailbench-no-such-folder-7f3a/x.json";
    refused_in_one_line(
        &["send", &target, "-n", "1", "--json", missing],
        "--json /tmp/mailbench-no-such-folder-7f3a/x.json: there is no folder",
    );
    assert!(
        listener.accept().is_err(),
        "send connected before refusing --json"
    );
    refused_in_one_line(
        &["send", &target, "--csv", "/tmp"],
        "--csv /tmp is a folder",
    );
    refused_in_one_line(
        &[
            "sink",
            "--report",
            "/tmp/mailbench-no-such-folder-7f3a/r.html",
        ],
        "create it first (mkdir -p) or write elsewhere",
    );
}

/// Issue 40: `--server-stats` asks a lab store for its own statistics; with `--target` (a
/// server mailbench did not start) it was silently ignored. Refused in one line.
#[test]
fn issue_40_server_stats_without_a_lab_store_is_refused() {
    let dir = crate::util::TempDir::new("cli-server-stats");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@example.test secret\n").expect("write");
    let users = users.to_string_lossy().to_string();
    for cmd in ["pop3", "imap"] {
        crate::util::refused_in_one_line(
            &[
                "mailbox",
                cmd,
                "--target",
                "127.0.0.1:1",
                "--users-file",
                &users,
                "--server-stats",
            ],
            "mailbench: --server-stats: only for a lab store",
        );
    }
}
