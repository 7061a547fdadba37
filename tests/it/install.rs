//! Issue 31 (conventions): `scripts/install.sh` into a temporary prefix, then the installed
//! files read by the tools that use them: man-db's `man` renders every command's page,
//! bash completes with the installed script (`COMP_WORDS`, as readline calls it), fish
//! completes with its own, zsh parses its; `--version` names the commit git names, and
//! the build script says `unknown` (without failing) where there is no git checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{TempDir, mailbench};

/// The path of `program`; a missing one fails the test with what to install.
pub fn tool(program: &str, package: &str) -> PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{program} is not installed: apt-get install {package} (scripts/install-deps.sh --for-tests)"
    );
}

/// The repository's top directory.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `program args`, returns its stdout; fails the test with its output otherwise.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("start the program");
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Installs the test build into a fresh prefix; returns the temp dir and the prefix.
fn install() -> (TempDir, PathBuf) {
    let dir = TempDir::new("install");
    let prefix = dir.0.join("usr");
    stdout_of(
        Command::new(repo().join("scripts/install.sh"))
            .env("PREFIX", &prefix)
            .env("MAILBENCH_BIN", env!("CARGO_BIN_EXE_mailbench")),
    );
    (dir, prefix)
}

/// The names of the top-level commands, from the CLI definition itself.
fn command_names() -> Vec<String> {
    mailbench::cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

#[test]
fn installed_man_pages_render_with_man_and_name_every_command() {
    let man = tool("man", "man-db");
    let (_dir, prefix) = install();
    let names = command_names();
    assert!(names.len() >= 10, "{names:?}");
    // Justified text: runs of spaces made one, so phrases match.
    let render = |page: &str| {
        squeeze(&stdout_of(
            Command::new(&man)
                .env("MANPATH", prefix.join("share/man"))
                .env("MANWIDTH", "200")
                .env("MAN_KEEP_FORMATTING", "")
                .args(["-P", "cat", page]),
        ))
    };
    let top = render("mailbench");
    assert!(
        top.contains("mailbench - Benchmark suite for mail servers"),
        "{top}"
    );
    for name in &names {
        assert!(
            top.contains(&format!("mailbench-{name}(1)")),
            "the page does not name {name}:\n{top}"
        );
        // And each has a page of its own, as mailbench-relay(1).
        let page = render(&format!("mailbench-{name}"));
        assert!(page.contains("SYNOPSIS"), "mailbench-{name}(1):\n{page}");
    }
    let relay = render("mailbench-relay");
    assert!(relay.contains("--lab"), "{relay}");
    let postfix = render("mailbench-lab-postfix");
    assert!(postfix.contains("mailbench-lab-postfix"), "{postfix}");
}

/// `text` with every run of whitespace made one space.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The installed bash script, loaded as bash-completion would, completes as readline
/// would ask it: `COMP_WORDS`/`COMP_CWORD` set, the function `complete -p` names called.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let bash = tool("bash", "bash");
    let cword = words.len() - 1;
    let line = format!(
        "source {}; spec=$(complete -p mailbench); fn=${{spec##*-F }}; fn=${{fn%% *}}; \
         COMP_WORDS=({}); COMP_CWORD={cword}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; \
         COMP_POINT=${{#COMP_LINE}}; $fn mailbench \"{}\" \"{}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.join(" "),
        words[cword],
        words[cword - 1],
    );
    stdout_of(Command::new(bash).args(["--norc", "-c", &line]))
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn installed_completions_complete_commands_and_flags() {
    let (_dir, prefix) = install();
    let bash = prefix.join("share/bash-completion/completions/mailbench");
    assert_eq!(bash_complete(&bash, &["mailbench", "rel"]), ["relay"]);
    assert_eq!(
        bash_complete(&bash, &["mailbench", "re"]),
        ["relay", "report"]
    );
    assert_eq!(
        bash_complete(&bash, &["mailbench", "relay", "--la"]),
        ["--lab"]
    );
    assert_eq!(
        bash_complete(&bash, &["mailbench", "completions", "z"]),
        ["zsh"]
    );

    let fish = tool("fish", "fish");
    let script = prefix.join("share/fish/vendor_completions.d/mailbench.fish");
    let got = stdout_of(Command::new(&fish).args([
        "--no-config",
        "-c",
        &format!(
            "source {}; complete -C 'mailbench rel'; complete -C 'mailbench relay --la'",
            script.display()
        ),
    ]));
    let firsts: Vec<&str> = got.lines().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(firsts, ["relay", "--lab"], "{got}");

    let zsh = tool("zsh", "zsh");
    let script = prefix.join("share/zsh/site-functions/_mailbench");
    stdout_of(Command::new(zsh).arg("-n").arg(&script));
    let text = std::fs::read_to_string(&script).expect("zsh script");
    assert!(text.starts_with("#compdef mailbench"), "{text}");

    // Elvish and PowerShell have no standard directory: printed on demand.
    for shell in ["elvish", "powershell"] {
        let out = stdout_of(mailbench().args(["completions", shell]));
        assert!(out.contains("relay"), "{shell}: {out}");
    }
    let out = mailbench()
        .args(["completions", "tcsh"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn version_names_the_commit_git_names() {
    let git = tool("git", "git");
    let head =
        stdout_of(
            Command::new(&git)
                .arg("-C")
                .arg(repo())
                .args(["rev-parse", "--short", "HEAD"]),
        );
    // Dirty as build.rs counts it: the files the binary is built from.
    let dirty = !stdout_of(
        Command::new(&git)
            .arg("-C")
            .arg(repo())
            .args(["status", "--porcelain", "--untracked-files=no", "--"])
            .args(["src", "crates", "build.rs", "Cargo.toml", "Cargo.lock"]),
    )
    .trim()
    .is_empty();
    let want = format!(
        "mailbench {} (commit {}{})\n",
        env!("CARGO_PKG_VERSION"),
        head.trim(),
        if dirty { "-dirty" } else { "" }
    );
    assert_eq!(stdout_of(mailbench().arg("--version")), want);
    // On a command too (propagated).
    assert_eq!(
        stdout_of(mailbench().args(["relay", "--version"])),
        want.replace("mailbench", "mailbench-relay")
    );
}

/// A source tarball has no `.git`: the build script, compiled and run there as Cargo
/// would, says `unknown` and succeeds.
#[test]
fn version_without_git_is_unknown_not_a_failed_build() {
    let dir = TempDir::new("buildrs");
    let exe = dir.0.join("build-script");
    stdout_of(
        Command::new("rustc")
            .args(["--edition", "2024", "-O", "-o"])
            .arg(&exe)
            .arg(repo().join("build.rs")),
    );
    let src = dir.0.join("mailbench-0.1.0");
    std::fs::create_dir_all(&src).expect("mkdir");
    // Cargo hands a build script's rustc-env to the tests it runs: this process has
    // MAILBENCH_COMMIT, which the script would take as the builder's.
    let stamp = |given: Option<&str>| {
        let mut c = Command::new(&exe);
        c.current_dir(&src)
            .env("CARGO_MANIFEST_DIR", &src)
            .env("GIT_CEILING_DIRECTORIES", &dir.0)
            .env_remove("MAILBENCH_COMMIT");
        if let Some(g) = given {
            c.env("MAILBENCH_COMMIT", g);
        }
        stdout_of(&mut c)
    };
    let unknown = |why: &str| {
        let out = stamp(None);
        assert!(
            out.lines()
                .any(|l| l == "cargo:rustc-env=MAILBENCH_COMMIT=unknown"),
            "{why}: {out}"
        );
    };
    unknown("no git at all");
    // An image's build names the commit itself (the Dockerfile's build argument).
    let out = stamp(Some("feedbee"));
    assert!(
        out.lines()
            .any(|l| l == "cargo:rustc-env=MAILBENCH_COMMIT=feedbee"),
        "the builder's MAILBENCH_COMMIT: {out}"
    );
    // Unpacked inside a packager's own repository: not that repository's commit.
    let git = tool("git", "git");
    stdout_of(Command::new(&git).args(["init", "-q"]).arg(&dir.0));
    stdout_of(
        Command::new(&git)
            .arg("-C")
            .arg(&dir.0)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.test"])
            .args(["commit", "-q", "--allow-empty", "-m", "packaging"]),
    );
    let out = stdout_of(
        Command::new(&exe)
            .current_dir(&src)
            .env("CARGO_MANIFEST_DIR", &src)
            .env_remove("MAILBENCH_COMMIT"),
    );
    assert!(
        out.lines()
            .any(|l| l == "cargo:rustc-env=MAILBENCH_COMMIT=unknown"),
        "inside another repository: {out}"
    );
}

/// `text` as a terminal shows it: overstrikes (bold `X\bX`, underline `_\bX`) resolved.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{8}' {
            out.pop();
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every command page's name (`mailbench-mailbox-profile`) with the text clap shows after
/// its flags (examples, a scenario file, the rules' grammar).
fn pages_with_examples() -> Vec<(String, String)> {
    fn walk(c: &clap::Command, name: &str, out: &mut Vec<(String, String)>) {
        if let Some(after) = c.get_after_help() {
            out.push((name.to_string(), after.to_string()));
        }
        for s in c.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(s, &format!("{name}-{}", s.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(&mailbench::cli::command(), "mailbench", &mut out);
    out
}

/// Issue 40: the man pages reflowed the examples (`'er‐rors>1%'` hyphenated, a lone `\`,
/// the TOML sample run into a paragraph). Every line of every page's examples and notes,
/// rendered by man-db's `man` at its default width and by `groff -man -Tutf8` (no
/// preconv), is there as written: same characters (ASCII hyphens and quotes, `…` as
/// `…`), same indentation relative to the section.
#[test]
fn issue_40_man_pages_show_the_examples_verbatim() {
    let man = tool("man", "man-db");
    let groff = tool("groff", "groff");
    let dir = TempDir::new("man-verbatim");
    let out = mailbench()
        .args(["man", "--dir", &dir.0.to_string_lossy()])
        .output()
        .expect("run man");
    assert!(out.status.success(), "{out:?}");
    let pages = pages_with_examples();
    assert!(pages.len() >= 8, "pages with examples: {}", pages.len());
    for (name, after) in pages {
        let file = dir.0.join(format!("{name}.1"));
        for (how, rendered) in [
            (
                "man -l",
                stdout_of(
                    Command::new(&man)
                        .env_remove("MANWIDTH")
                        .env("COLUMNS", "80")
                        .args(["-l", "-P", "cat", &file.to_string_lossy()]),
                ),
            ),
            (
                "groff -man -Tutf8",
                stdout_of(Command::new(&groff).args(["-man", "-Tutf8", &file.to_string_lossy()])),
            ),
        ] {
            let rendered = plain(&rendered);
            let lines: Vec<&str> = rendered.lines().map(str::trim_end).collect();
            let mut indent = None;
            for want in after
                .lines()
                .filter(|l| !l.trim().is_empty() && *l != "Examples:")
            {
                let found = lines
                    .iter()
                    .find(|l| l.ends_with(want) && l[..l.len() - want.len()].trim().is_empty());
                let Some(found) = found else {
                    panic!(
                        "{name}.1 by {how}: the line {want:?} is not there as written:\n{rendered}"
                    );
                };
                let pad = found.len() - want.len();
                let first = *indent.get_or_insert(pad);
                assert_eq!(
                    first, pad,
                    "{name}.1 by {how}: {want:?} indented {pad}, the section's lines {first}"
                );
            }
        }
    }
}
