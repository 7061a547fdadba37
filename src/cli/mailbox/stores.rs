//! `mailbox profile --lab dovecot,cyrus` and `--compare-store-conf KEY=A,B[,…]`: seed 001's
//! "which store (or setting) carries more users". Every variant runs the same profile
//! with one seed, so the same users do the same actions at the same times on each; the
//! rounds engine (`run::rounds::rotate`) runs them in rotating order, each on a fresh lab;
//! then one results file holds every variant (`extra.sides`, which `report` draws on one
//! chart) and `compare`'s table puts capacity, response and the store's resources side by
//! side with their % change and noise verdict.

use super::profile::profile_plan;
use crate::cli::args::ProfileArgs;
use crate::cli::exit::{self, EXIT_USAGE};
use crate::cli::vary;
use crate::lab::Store;
use crate::run::rounds::{self, Turn};
use crate::shutdown::Shutdown;

/// One variant compared: its label and its flags (one store, one setting).
struct Variant {
    label: String,
    args: ProfileArgs,
}

/// `KEY=A,B[,…]` → the store setting and its values.
fn parse(spec: &str) -> Result<(String, Vec<String>), String> {
    vary::setting_values("--compare-store-conf", spec, "process_limit=1000,5")
}

/// The variants the flags ask for, each with one store and the shared seed, and without
/// the outputs (written once, for all of them).
fn variants(a: &ProfileArgs, seed: u64) -> Result<Vec<Variant>, String> {
    let mut base = a.clone();
    base.seed = Some(seed);
    base.out.json = None;
    base.out.csv = None;
    base.out.report = None;
    base.compare_store_conf = None;
    let with = |label: String, f: &dyn Fn(&mut ProfileArgs)| {
        let mut args = base.clone();
        f(&mut args);
        Variant { label, args }
    };
    let out: Vec<Variant> = match &a.compare_store_conf {
        Some(spec) => {
            if a.server.lab.len() != 1 {
                return Err(format!(
                    "--compare-store-conf compares settings of one store: give one --lab ({})",
                    Store::names()
                ));
            }
            let (key, values) = parse(spec)?;
            values
                .iter()
                .map(|v| {
                    with(format!("{key}={v}"), &|x| {
                        x.server.store.store_conf.push(format!("{key}={v}"));
                    })
                })
                .collect()
        }
        None => {
            let mut seen = Vec::new();
            for s in &a.server.lab {
                if seen.contains(s) {
                    return Err(format!("--lab names {} twice", s.name()));
                }
                seen.push(*s);
            }
            seen.iter()
                .map(|s| with(s.name().to_string(), &|x| x.server.lab = vec![*s]))
                .collect()
        }
    };
    // Every variant's flags are checked before the first round starts.
    for v in &out {
        profile_plan(&v.args, |_| None).map_err(|e| format!("{}: {e}", v.label))?;
    }
    Ok(out)
}

/// Runs the comparison; prints the table and writes `--json` as one file of all sides.
pub(super) async fn compare(a: ProfileArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    if a.out.csv.is_some() || a.out.report.is_some() {
        return Err(usage(
            "--csv and --report take one run; a comparison writes --json FILE (every store in it), and `mailbench report FILE` draws them on one chart".into(),
        ));
    }
    let seed = a.seed.unwrap_or_else(|| fastrand::u64(..));
    let variants = variants(&a, seed).map_err(usage)?;
    let rounds_n = match a.rounds {
        Some(0) => return Err(usage("--rounds must be at least 1".into())),
        Some(n) => n,
        None => crate::report::compare::noise::MIN_ROUNDS as u32,
    };
    crate::report::print(&format!(
        "mailbench mailbox profile: {} compared, {rounds_n} round{} each, seed {seed}\n",
        variants
            .iter()
            .map(|v| v.label.as_str())
            .collect::<Vec<_>>()
            .join(" vs "),
        if rounds_n == 1 { "" } else { "s" }
    ));
    let shutdown = Shutdown::install();
    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    let turn = |t: Turn| {
        let args = variants[t.side].args.clone();
        let shutdown = shutdown.clone();
        // Every round's store log, beside the comparison's results file.
        let logs = a
            .out
            .json
            .as_deref()
            .map(|j| rounds::round_logs(j, &variants[t.side].label, t.round));
        async move {
            let mut p = profile_plan(&args, |_| None).map_err(|e| (EXIT_USAGE, e))?;
            crate::cli::lab::clean_before_store(&p.setup);
            crate::cli::lab::keep_store_logs(&mut p.setup, logs.as_deref());
            crate::mailbox::bench::workload(p.work, p.setup, p.fill, p.sut_pids, shutdown)
                .await
                .map_err(exit::mailbox)
        }
    };
    let ran = rounds::rotate(
        "mailbox profile",
        &labels,
        rounds_n,
        &shutdown,
        crate::report::rounds::combine,
        turn,
    )
    .await
    .map_err(|e| e.or(|why| (exit::EXIT_FAILED, why)))?;
    if let Some(path) = &a.out.json {
        vary::write_sides(&labels, &ran, path)?;
    }
    vary::table(&labels, &ran)?;
    Ok(vary::finish(&ran))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_and_two_to_eight_different_values_or_one_clear_line() {
        assert_eq!(
            parse("process_limit=1000,5,50"),
            Ok((
                "process_limit".into(),
                vec!["1000".into(), "5".into(), "50".into()]
            ))
        );
        for bad in ["x=1", "x=1,1", "=1,2", "x", "x=1,2,2"] {
            let e = parse(bad).expect_err(bad);
            assert!(
                e.starts_with(&format!("--compare-store-conf {bad}:")),
                "{e}"
            );
        }
    }
}
