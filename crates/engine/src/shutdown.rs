//! Ctrl-C and SIGTERM: the first stops new work and lets in-flight transactions finish
//! within the grace period; the second aborts them. Either way the results are written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The two stages of stopping a run.
#[derive(Clone, Default)]
pub struct Shutdown {
    /// Stop starting new work; drain.
    pub stop: CancellationToken,
    /// Stop waiting; abort what is in flight.
    pub abort: CancellationToken,
    /// Set when a signal (not a limit or the end of the run) caused the stop, so that the
    /// results file can say that the run was cut short.
    signalled: Arc<AtomicBool>,
}

impl Shutdown {
    /// Installs the signal handlers for a run, which finishes its transactions on the
    /// first signal.
    pub fn install() -> Shutdown {
        Shutdown::install_saying(
            "mailbench: stopping; finishing transactions in flight (signal again to abort)",
        )
    }

    /// Installs the signal handlers, printing `first` when the first signal arrives (what
    /// stopping means for this command).
    pub fn install_saying(first_notice: &'static str) -> Shutdown {
        let s = Shutdown::default();
        let (stop, abort, signalled) = (s.stop.clone(), s.abort.clone(), s.signalled.clone());
        tokio::spawn(async move {
            let Ok(mut term) = signal(SignalKind::terminate()) else {
                return;
            };
            let mut first = true;
            loop {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => if r.is_err() { return },
                    _ = term.recv() => {}
                }
                if first {
                    signalled.store(true, Ordering::Relaxed);
                    crate::run::live::say(first_notice);
                    stop.cancel();
                    first = false;
                } else {
                    abort.cancel();
                    return;
                }
            }
        });
        s
    }

    /// True when Ctrl-C or SIGTERM stopped the run.
    pub fn interrupted(&self) -> bool {
        self.signalled.load(Ordering::Relaxed)
    }
}

/// Rounds stop starting new ones at the first signal, and a comparison it reached is cut
/// short.
impl crate::run::rounds::Stop for Shutdown {
    fn stopping(&self) -> bool {
        self.stop.is_cancelled()
    }

    fn signalled(&self) -> bool {
        self.interrupted()
    }
}
