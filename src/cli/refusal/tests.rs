//! The refusals of each kind of mistake, checked on the real command tree.

use super::spelling::did_you_mean;
use super::{line, reason};

/// The line mailbench prints for `args` (after the program name), if clap refuses them.
fn refused(args: &[&str]) -> Option<String> {
    let argv: Vec<std::ffi::OsString> = std::iter::once("mailbench")
        .chain(args.iter().copied())
        .map(Into::into)
        .collect();
    let root = crate::cli::command();
    let e = root.clone().try_get_matches_from(&argv).err()?;
    line(&e, &root, &argv)
}

#[test]
fn each_kind_of_mistake_is_one_line_naming_the_input_and_the_fix() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["mailbox", "imap", "--target", "h:1", "--pipeline", "0"],
            "mailbench: --pipeline 0: must be 1..=1000 (commands in flight per session)",
        ),
        (
            &["mailbox", "imap", "--target", "h:1", "--login", "foo"],
            "mailbench: --login foo: not one of login, plain",
        ),
        (
            &["relay", "--lab", "postfx"],
            "mailbench: --lab postfx: not one of postfix, exim, opensmtpd, sendmail, qmail; \
             did you mean postfix?",
        ),
        (
            &["relay", "--bogus"],
            "mailbench relay: unknown option --bogus; see mailbench relay --help",
        ),
        (
            &["send", "--bogus"],
            "mailbench send: unknown option --bogus; see mailbench send --help",
        ),
        (
            &["send", "h:1", "--rat", "5/s"],
            "mailbench send: unknown option --rat; did you mean --rate? (see mailbench send --help)",
        ),
        (
            &["mailbox", "populate", "--fill", "3"],
            "mailbench mailbox populate: unknown option --fill; populate's messages per user \
             are --per-user N (--fill is how pop3, imap and profile fill a lab store first)",
        ),
        (
            &["send"],
            "mailbench send: missing <TARGET> (where to send); see mailbench send --help",
        ),
        (
            &["mailbox", "imap"],
            "mailbench mailbox imap: missing --target <HOST:PORT> (the IMAP server) or \
             --lab dovecot (start a disposable store for the run); see mailbench mailbox \
             imap --help",
        ),
        (
            &["relay"],
            "mailbench relay: missing --target <HOST:PORT> (the MTA under test) or --lab \
             postfix (start a disposable MTA for the run); see mailbench relay --help",
        ),
        (
            &["relay", "--target", "h:1", "--lab", "postfix"],
            "mailbench relay: --target cannot be used with --lab; drop one",
        ),
        (
            &["lab", "postfx"],
            "mailbench lab: unknown command postfx; did you mean postfix? (see mailbench lab --help)",
        ),
        (
            &["--threads", "x", "send", "h:1"],
            "mailbench: --threads x: must be a whole number (threads that run connections)",
        ),
        (
            &["send", "h:1", "--quiet=yes"],
            "mailbench: --quiet takes no value: write --quiet alone, without yes",
        ),
        (
            &["send", "h:1", "--threads", "2", "--threads", "3"],
            "mailbench send: --threads given twice; give it once",
        ),
        (
            &["help", "foo"],
            "mailbench: unknown command foo; the commands are send, relay, lab, mailbox, \
             doctor, sink, report, compare, merge, dns, completions, man",
        ),
        (
            &["dns", "--zone-file"],
            "mailbench: --zone-file needs a value: --zone-file <FILE> (a standard zone file to serve)",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(refused(args).as_deref(), Some(*want), "{args:?}");
    }
}

#[test]
fn help_and_version_stay_clap_s() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["send", "--help"],
        &[],
        &["mailbox"],
    ] {
        assert_eq!(refused(args), None, "{args:?}");
    }
}

/// Every command, given nothing, a flag it lacks, stray words or a bad number: one line
/// (or its help), no panic.
#[test]
fn every_command_refuses_in_one_line() {
    fn paths(c: &clap::Command, above: &[String], out: &mut Vec<Vec<String>>) {
        for s in c.get_subcommands() {
            let mut p = above.to_vec();
            p.push(s.get_name().to_string());
            out.push(p.clone());
            paths(s, &p, out);
        }
    }
    let mut all = Vec::new();
    paths(&crate::cli::command(), &[], &mut all);
    for p in all {
        for extra in [
            &[][..],
            &["--no-such-flag"],
            &["no-such-word", "x", "y"],
            &["--threads", "0"],
        ] {
            let args: Vec<&str> = p
                .iter()
                .map(String::as_str)
                .chain(extra.iter().copied())
                .collect();
            if let Some(l) = refused(&args) {
                assert_eq!(l.lines().count(), 1, "{args:?}: {l}");
                assert!(l.starts_with("mailbench"), "{args:?}: {l}");
            }
        }
    }
}

/// Issue 40: clap's own errors for a bad enum value or `--pipeline 0` were said to print
/// 3–4 lines. Every flag of every command that takes a value, given a value no enum
/// holds, a zero and a negative number: when clap refuses it, the refusal is one line
/// that names the flag (and, for an enum, lists its values).
#[test]
fn issue_40_every_flag_given_a_bad_value_is_one_line_naming_it() {
    fn walk(c: &clap::Command, above: &[String], out: &mut Vec<(Vec<String>, clap::Arg)>) {
        for a in c.get_arguments() {
            if a.get_long().is_some()
                && a.get_num_args().is_none_or(|n| n.takes_values())
                && a.get_action().takes_values()
            {
                out.push((above.to_vec(), a.clone()));
            }
        }
        for s in c.get_subcommands() {
            let mut p = above.to_vec();
            p.push(s.get_name().to_string());
            walk(s, &p, out);
        }
    }
    let mut root = crate::cli::command();
    root.build();
    let mut flags = Vec::new();
    walk(&root, &[], &mut flags);
    assert!(flags.len() > 100, "only {} flags found", flags.len());
    let mut refusals = 0;
    for (path, arg) in &flags {
        let long = format!("--{}", arg.get_long().unwrap_or_default());
        let enum_values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        for bad in ["no-such-value", "0", "-3"] {
            let value = format!("{long}={bad}");
            let args: Vec<&str> = path
                .iter()
                .map(String::as_str)
                .chain([value.as_str()])
                .collect();
            let Some(l) = refused(&args) else { continue };
            refusals += 1;
            assert_eq!(l.lines().count(), 1, "{args:?}: {l}");
            assert!(l.starts_with("mailbench"), "{args:?}: {l}");
            // A value the flag takes leaves the command's own complaint (a missing input).
            let missing = l.contains(": missing ") || l.contains(" needs ");
            assert!(
                missing || l.contains(&format!("{long} {bad}")),
                "{args:?}: {l}"
            );
            if !enum_values.is_empty() && bad == "no-such-value" {
                assert!(
                    l.contains(&format!(
                        "{long} no-such-value: not one of {}",
                        enum_values.join(", ")
                    )),
                    "{args:?}: expected the flag and its values, got {l}"
                );
            }
        }
    }
    assert!(
        refusals > 50,
        "only {refusals} refusals: the sweep tried nothing"
    );
    // Two missing inputs, one the other's alternative: named once.
    let l = refused(&["relay", "--compare-postconf", "k=1,2"]).expect("refused");
    assert_eq!(l.matches("--target").count(), 1, "{l}");
}

#[test]
fn did_you_mean_only_for_a_near_spelling() {
    assert_eq!(did_you_mean("--rat", "--rate"), "; did you mean --rate?");
    assert_eq!(did_you_mean("--raet", "--rate"), "; did you mean --rate?");
    assert_eq!(
        did_you_mean("--conections", "--connections"),
        "; did you mean --connections?"
    );
    assert_eq!(did_you_mean("--bogus", "--rounds"), "");
    assert_eq!(did_you_mean("--fill", "--fill-size"), "");
    assert_eq!(did_you_mean("--x", ""), "");
}

#[test]
fn value_parsers_complaints_say_what_the_value_must_be() {
    assert_eq!(reason("0 is not in 1..=1000"), "must be 1..=1000");
    assert_eq!(reason("0 is not in 1.."), "must be at least 1");
    assert_eq!(
        reason("invalid digit found in string"),
        "must be a whole number"
    );
    assert_eq!(reason("bad\nvalue"), "bad; value");
}
