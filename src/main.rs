//! The `mailbench` binary: parse the command line and hand over to `mailbench::cli`.

fn main() -> std::process::ExitCode {
    // A command line that cannot run was already answered (help, version, or the mistake
    // in one line); its exit code comes back as the error.
    match mailbench::cli::parse() {
        Ok(cli) => mailbench::cli::run(cli),
        Err(code) => code,
    }
}
