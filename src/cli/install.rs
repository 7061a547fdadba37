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
        let mut out = Vec::new();
        page(cmd)
            .render(&mut out)
            .map_err(|e| (EXIT_FAILED, format!("cannot render the man page: {e}")))?;
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

/// One page per command, subcommands first (`mailbench-lab-postfix.1`), as
/// `clap_mangen::generate_to` names them, but with `page`'s stamp.
fn write_pages(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    fn each(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            each(sub, dir)?;
        }
        page(cmd).generate_to(dir).map(|_| ())
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
