//! Integration tests against real servers, in one test binary.
//!
//! - `cli`:  bad input, help, exit codes (no server needed)
//! - `send`: `mailbench send` against Postfix's smtp-sink (counts, dump contents, open-loop
//!   rate, thresholds, SIGTERM)

mod cli;
mod send;
mod util;
