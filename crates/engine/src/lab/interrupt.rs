//! A lab start that a signal cuts short: the first Ctrl-C or SIGTERM during a lab's start
//! (seconds: an MTA's start script, its greeting, one instance after another) stops the
//! start where it is, stops and removes what it had started, and says so as
//! [`LabError::Interrupted`] — no run follows, so nothing is measured and no results file
//! is written. The start runs on one blocking thread; its waits ([`check`]) look at the
//! signal that thread was given, so no start function has to carry it.

use std::cell::RefCell;

use tokio_util::sync::CancellationToken;

use super::{LabError, LabOptions, Mta, MtaLab};

thread_local! {
    /// The signal that cuts short the start this thread runs.
    static CUT: RefCell<Option<CancellationToken>> = const { RefCell::new(None) };
}

/// Runs `start` on this thread with `stop` as the signal that cuts it short.
fn within<T>(stop: CancellationToken, start: impl FnOnce() -> T) -> T {
    CUT.with(|c| *c.borrow_mut() = Some(stop));
    let r = start();
    CUT.with(|c| *c.borrow_mut() = None);
    r
}

/// `Err(Interrupted)` once the signal came for the start this thread runs; called where
/// a start waits (for a greeting, before the next instance).
pub fn check() -> Result<(), LabError> {
    let cut = CUT.with(|c| c.borrow().as_ref().is_some_and(|t| t.is_cancelled()));
    if cut {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Starts `mta` off the async runtime (it waits for the MTA); `stop` cancelled during the
/// start cuts it short, and a lab that finished starting as the signal came is stopped and
/// removed too: either way the error is [`LabError::Interrupted`].
pub async fn start_mta(
    mta: Mta,
    opts: LabOptions,
    stop: &CancellationToken,
) -> Result<Box<dyn MtaLab>, LabError> {
    let token = stop.clone();
    tokio::task::spawn_blocking(move || match within(token.clone(), || mta.start(&opts)) {
        Ok(lab) if token.is_cancelled() => {
            drop(lab);
            Err(LabError::Interrupted)
        }
        other => other,
    })
    .await
    .map_err(|e| LabError::Failed(format!("lab: its start failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_thread_given_the_signal_sees_it() {
        let stop = CancellationToken::new();
        assert!(check().is_ok(), "no start on this thread");
        within(stop.clone(), || {
            assert!(check().is_ok());
            stop.cancel();
            assert!(matches!(check(), Err(LabError::Interrupted)));
            let other = std::thread::spawn(|| check().is_ok());
            assert!(
                other.join().unwrap_or(false),
                "another thread runs no start"
            );
        });
        assert!(check().is_ok(), "the start is over");
    }
}
