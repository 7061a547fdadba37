//! The `mailbench` binary: parse the command line and hand over to `mailbench::cli`.

fn main() -> std::process::ExitCode {
    match mailbench::cli::parse() {
        Ok(cli) => mailbench::cli::run(cli),
        // --help and --version print and succeed; any other parse error is bad usage.
        Err(e) => {
            let _ = e.print();
            let code = if e.use_stderr() {
                mailbench::cli::EXIT_USAGE
            } else {
                mailbench::cli::EXIT_OK
            };
            std::process::ExitCode::from(code)
        }
    }
}
