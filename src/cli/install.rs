//! `mailbench completions SHELL` and `mailbench man`: the shell completion scripts and man
//! pages a package installs (scripts/install.sh runs both), generated from the same clap
//! definitions as `--help` (`cli::command`, `--threads` included), so they list exactly
//! the commands and flags this binary takes.

use std::io::Write;

use super::args::{CompletionsArgs, ManArgs};
use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// Runs `completions`: the script on stdout.
pub fn completions(a: &CompletionsArgs) -> Result<u8, (u8, String)> {
    let mut cmd = super::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "mailbench", &mut out);
    emit(&out)
}

/// Runs `man`: the page of `mailbench` on stdout, or every command's page into `--dir`.
pub fn man(a: &ManArgs) -> Result<u8, (u8, String)> {
    let cmd = super::command();
    let Some(dir) = &a.dir else {
        let out =
            render(cmd).map_err(|e| (EXIT_FAILED, format!("cannot render the man page: {e}")))?;
        return emit(&out);
    };
    let cannot = |e: std::io::Error| {
        (
            EXIT_USAGE,
            format!(
                "--dir {}: cannot write the man pages there: {e}",
                dir.display()
            ),
        )
    };
    std::fs::create_dir_all(dir).map_err(cannot)?;
    write_pages(cmd, dir).map_err(cannot)?;
    Ok(EXIT_OK)
}

/// The page of `cmd`, stamped with the version (commit included) and no date, so that
/// the same source renders the same bytes (reproducible packages).
fn page(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd).source(format!("mailbench {}", super::args::VERSION))
}

/// The page of `cmd` as roff. clap_mangen sets the text after the flags (`after_help`:
/// the examples, a scenario file, the rules' grammar) as one filled paragraph, so man
/// reflowed the examples, hyphenated `'errors>1%'` and left a continuation `\` alone on
/// a line (issue 40); here that text is its own section in no-fill mode, so every line
/// renders as written, before VERSION.
fn render(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let after = cmd.get_after_help().map(|h| h.to_string());
    let mut out = Vec::new();
    page(cmd.after_help(None::<&str>)).render(&mut out)?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if let Some(after) = after {
        let at = text.find("\n.SH VERSION").map_or(text.len(), |i| i + 1);
        text.insert_str(at, &verbatim_section(&after));
    }
    Ok(ascii(&text).into_bytes())
}

/// `page` with every character beyond ASCII as a groff escape (`…` is `\[u2026]`): groff
/// reads its input as Latin-1 unless run through preconv, as `man` does and
/// `groff -man -Tutf8` does not.
fn ascii(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out += &format!("\\[u{:04X}]", u32::from(c));
        }
    }
    out
}

/// `text` as a man page section shown line for line: EXAMPLES when it starts with
/// "Examples:" (that line then being the heading), NOTES otherwise.
fn verbatim_section(text: &str) -> String {
    let (title, body) = match text.strip_prefix("Examples:\n") {
        Some(rest) => ("EXAMPLES", rest),
        None => ("NOTES", text),
    };
    let mut out = format!(".SH {title}\n.nf\n");
    for line in body.lines() {
        out += &roff_line(line);
        out.push('\n');
    }
    out += ".fi\n";
    out
}

/// One line of text as roff prints it unchanged: a backslash, a hyphen (else a
/// typographic hyphen or minus) and a quote escaped, and a line that would read as a
/// request (a leading `.` or `'`) guarded.
fn roff_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    if line.starts_with(['.', '\'']) {
        out.push_str("\\&");
    }
    for c in line.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '\'' => out.push_str("\\(aq"),
            '`' => out.push_str("\\(ga"),
            '~' => out.push_str("\\(ti"),
            '^' => out.push_str("\\(ha"),
            c => out.push(c),
        }
    }
    out
}

/// One page per command, subcommands first (`mailbench-lab-postfix.1`), named as
/// `clap_mangen::generate_to` names them, rendered by `render`.
fn write_pages(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    fn each(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            each(sub, dir)?;
        }
        let name = page(cmd.clone()).get_filename();
        std::fs::write(dir.join(name), render(cmd)?)
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    // Built once at the top, so subcommands carry their full names (mailbench-relay).
    cmd.build();
    each(cmd, dir)
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) is not a failure.
fn emit(bytes: &[u8]) -> Result<u8, (u8, String)> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(EXIT_OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(EXIT_OK),
        Err(e) => Err((EXIT_FAILED, format!("cannot write to stdout: {e}"))),
    }
}
