//! The process's exit codes, and which one each engine error means: shared by every
//! command, kept apart so that the commands need nothing from `cli`'s root.

use crate::mailbox::bench::MailboxError;

/// Exit code: the run completed and every threshold held.
pub const EXIT_OK: u8 = 0;
/// Exit code: bad usage or input; nothing was run.
pub const EXIT_USAGE: u8 = 1;
/// Exit code: the run could not be done or broke down.
pub const EXIT_FAILED: u8 = 2;
/// Exit code: the run completed but a threshold was breached.
pub const EXIT_THRESHOLD: u8 = 3;

/// The exit code of a mailbox error.
pub fn mailbox(e: MailboxError) -> (u8, String) {
    match e {
        MailboxError::Usage(e) => (EXIT_USAGE, e),
        MailboxError::Failed(e) => (EXIT_FAILED, e),
    }
}
