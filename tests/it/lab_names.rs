//! Issue 41: labs are asked what they can do, never who they are. No lab's name (as a
//! string, `"qmail"`) and no reach into one lab's own file (`lab::dovecot::`) appears in
//! the sources (`src/`, `crates/`) outside that lab's file and the registry
//! (crates/engine/src/lab/mod.rs), apart from the
//! exceptions listed here with why. Unit tests (`#[cfg(test)]` onwards) are not read:
//! they use lab names as results data (a run called "postfix"), never to branch.

use std::path::{Path, PathBuf};

/// Every lab in the registry, by the name its file has.
const LABS: &[&str] = &[
    "postfix",
    "exim",
    "opensmtpd",
    "sendmail",
    "qmail",
    "dovecot",
    "cyrus",
];

/// (file, what it names, why it may).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "crates/engine/src/relay/maillog.rs",
        "\"postfix\"",
        "the parser of Postfix's log syntax finds Postfix's own syslog tag in a line; which \
         parser runs is the descriptor's `log`",
    ),
    (
        "src/cli/args/profile.rs",
        "\"postfix\"",
        "`mailbox arrival --mta postfix` is a user-facing value kept as it was (the path \
         through the lab MTA that delivers over LMTP)",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_lab_is_named_outside_its_own_file_and_the_registry() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    let mut found = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .expect("under the crate")
            .to_string_lossy()
            .into_owned();
        // A `tests.rs` is a unit-test module: it passes `--lab postfix` as a user would.
        if rel == "crates/engine/src/lab/mod.rs" || rel.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for lab in LABS {
            if rel == format!("crates/engine/src/lab/{lab}.rs") {
                continue;
            }
            for token in [format!("\"{lab}\""), format!("lab::{lab}::")] {
                if EXCEPTIONS.iter().any(|(f, t, _)| *f == rel && *t == token) {
                    continue;
                }
                for (n, line) in code.lines().enumerate() {
                    if line.contains(&token) {
                        found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "expected no lab named outside its file and the registry (ask Mta::features, \
         Mta::having or the registry instead); found:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_exception_is_still_needed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, token, why) in EXCEPTIONS {
        let text = std::fs::read_to_string(root.join(file)).expect("read source");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        assert!(
            code.contains(token),
            "expected {file} to still name {token} ({why}); drop the exception"
        );
    }
}
