//! Bad input gets one clear line and exit code 1, never a panic.

use crate::util::{describe, free_port, run, run_expect};

#[test]
fn bad_flags_give_one_line_and_exit_1() {
    let port = free_port().to_string();
    let target = format!("127.0.0.1:{port}");
    let cases: &[(&[&str], &str)] = &[
        (&["send", "127.0.0.1:0"], "invalid port"),
        (&["send", "::1"], "[::1]"),
        (&["send", &target, "--rate", "fast"], "invalid rate"),
        (&["send", &target, "--size", "12q"], "invalid size"),
        (&["send", &target, "-z", "soon"], "invalid duration"),
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
