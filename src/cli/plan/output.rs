//! The output flags every command shares, validated: where the results go and what they
//! must satisfy (for the output stage), and how the run shows itself (for the engine).

use crate::cli::args::OutputArgs;
use crate::report::Outputs;
use crate::report::threshold::Threshold;
use crate::run::Progress;
use crate::stats::summary::Vocabulary;

/// How long `/metrics` stays up after the run (`--prometheus-hold`), once set.
static METRICS_HOLD: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// After the run: keeps serving the final `/metrics` for `--prometheus-hold`, or until
/// Ctrl-C or SIGTERM, on a runtime of its own (the run's is gone).
pub fn hold_metrics() {
    let Some(hold) = METRICS_HOLD.get().copied().filter(|h| !h.is_zero()) else {
        return;
    };
    crate::run::live::say(&format!(
        "mailbench: serving the final /metrics for {} (Ctrl-C ends it)",
        humantime::format_duration(hold)
    ));
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        tokio::select! {
            _ = tokio::time::sleep(hold) => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    });
}

/// What the output stage does with a finished run's results.
#[derive(Debug, Clone, Default)]
pub struct OutputPlan {
    /// The files to write.
    pub files: Outputs,
    /// The thresholds to check.
    pub thresholds: Vec<Threshold>,
}

/// The output plan and the run's progress from their flags; `vocabulary` is what the
/// command's thresholds may name.
pub fn plan(
    o: &OutputArgs,
    postal_csv: Option<std::path::PathBuf>,
    vocabulary: &Vocabulary,
) -> Result<(OutputPlan, Progress), String> {
    let interval = crate::units::duration(&o.interval).map_err(super::flagged("--interval"))?;
    if interval < std::time::Duration::from_millis(100) {
        return Err("--interval must be at least 100ms".into());
    }
    if let Some(addr) = &o.prometheus {
        let addr: std::net::SocketAddr = addr.parse().map_err(|_| {
            format!(
                "--prometheus {addr}: give an address and port to listen on, e.g. 127.0.0.1:9464"
            )
        })?;
        let hold = crate::units::duration(&o.prometheus_hold)
            .map_err(super::flagged("--prometheus-hold"))?;
        if hold > std::time::Duration::from_secs(3600) {
            return Err("--prometheus-hold: at most 1h".into());
        }
        crate::run::exporter::serve(addr)?;
        let _ = METRICS_HOLD.set(hold);
    }
    let thresholds = o
        .threshold
        .iter()
        .map(|t| Threshold::parse(t, vocabulary))
        .collect::<Result<Vec<_>, _>>()?;
    for (flag, path) in [
        ("--json", &o.json),
        ("--csv", &o.csv),
        ("--postal-csv", &postal_csv),
        ("--report", &o.report),
    ] {
        if let Some(path) = path {
            writable(flag, path)?;
        }
    }
    let files = Outputs {
        json: o.json.clone(),
        csv: o.csv.clone(),
        postal_csv,
        report: o.report.clone(),
    };
    Ok((
        OutputPlan { files, thresholds },
        Progress {
            interval,
            quiet: o.quiet,
        },
    ))
}

/// Refuses an output file that could not be written at the end of the run: before, a
/// missing folder cost the whole run (exit 2 after it, the results lost).
pub fn writable(flag: &str, path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "{flag} {shown} is a folder; give a file name in it"
        ));
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !folder.is_dir() {
        return Err(format!(
            "{flag} {shown}: there is no folder {}; create it first (mkdir -p) or write elsewhere",
            folder.display()
        ));
    }
    Ok(())
}

/// Every command's threshold vocabulary, checked here where all the commands are in view.
#[cfg(test)]
mod tests {
    /// Issue 25 item 20: the examples an error suggests are accepted by that command (they
    /// were send's for all, and the sink refused 'p99(total)', pop3 'msgs_per_sec').
    #[test]
    fn every_vocabularys_examples_parse_in_it() {
        for v in [
            crate::send::THRESHOLDS,
            crate::relay::THRESHOLDS,
            crate::sink::THRESHOLDS,
            crate::dns::THRESHOLDS,
            crate::mailbox::POP3_THRESHOLDS,
            crate::mailbox::IMAP_THRESHOLDS,
            crate::mailbox::profile::THRESHOLDS,
        ] {
            let ex = crate::report::threshold::examples(&v);
            let all: Vec<&str> = ex.split(", ").map(|e| e.trim_matches('\'')).collect();
            assert_eq!(all.len(), 3, "{ex}");
            for e in all {
                if let Err(why) = crate::report::threshold::Threshold::parse(e, &v) {
                    panic!("{e} suggested but refused: {why}");
                }
            }
        }
    }

    /// Issue 25 item 20: `errors<1%` is a share of `sent`; a command without one (pop3,
    /// imap, sink, dns) refuses it instead of reading 0 % whatever happened.
    #[test]
    fn a_share_needs_a_base_the_command_reports() {
        assert!(
            crate::report::threshold::Threshold::parse("errors<1%", &crate::send::THRESHOLDS)
                .is_ok()
        );
        assert!(
            crate::report::threshold::Threshold::parse(
                "sut_cpu<25%",
                &crate::mailbox::profile::THRESHOLDS
            )
            .is_ok()
        );
        for v in [
            crate::mailbox::POP3_THRESHOLDS,
            crate::mailbox::IMAP_THRESHOLDS,
            crate::sink::THRESHOLDS,
            crate::dns::THRESHOLDS,
        ] {
            let key = if v.keys().any(|k| k == "errors") {
                "errors"
            } else {
                "refused"
            };
            let err = crate::report::threshold::Threshold::parse(&format!("{key}<1%"), &v)
                .expect_err(key);
            assert!(err.contains("reports no \"sent\""), "{err}");
        }
    }
}
