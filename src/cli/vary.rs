//! Relay benchmarks that vary one thing and compare: `--compare-postconf KEY=V1,V2` (the
//! seeds' "what did this tuning buy") and `--lab postfix,exim,…` (the seeds' "which MTA is
//! faster for this traffic"), answered on one machine with its noise taken into account.
//! The engine's rounds (`run::rounds::rotate`) run the variants in rotating order, each
//! round on a fresh lab, and keep each variant's whole rounds as one results document;
//! here the variants are planned, their documents written, and `compare`'s table printed.

use std::path::{Path, PathBuf};

use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::lab::Mta;
use crate::relay::{RelayError, RelayPlan};
use crate::report::compare::{self, Side};
use crate::run::rounds::{self, Compared, Turn};
use crate::shutdown::Shutdown;
use crate::stats::Results;

/// Rounds per variant when `--rounds` asks for fewer: the least a verdict needs.
const MIN_ROUNDS: u32 = compare::noise::MIN_ROUNDS as u32;

/// One thing compared: its label and its plan.
struct Variant {
    label: String,
    plan: RelayPlan,
}

/// The most values one setting is compared at: each takes at least four rounds on a
/// fresh lab, and the seeds' sweeps have four (destination concurrency 10, 50, 100, 1000).
pub(crate) const MAX_VALUES: usize = 8;

/// `KEY=V1,V2[,…]` → the key and its values (2 to [`MAX_VALUES`], all different): what
/// `--compare-postconf` and `--compare-store-conf` take. The error line names the flag and
/// the spec, says what is wrong with it, and shows `example`.
pub(crate) fn setting_values(
    flag: &str,
    spec: &str,
    example: &str,
) -> Result<(String, Vec<String>), String> {
    let refuse = |wrong: String| {
        format!(
            "{flag} {spec}: {wrong}; give a setting and 2 to {MAX_VALUES} different values, e.g. {example}"
        )
    };
    let (key, values) = spec
        .split_once('=')
        .ok_or_else(|| refuse("no '=' between the setting and its values".into()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(refuse("no setting before '='".into()));
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(refuse("an empty value".into()));
    }
    if let Some(v) = values
        .iter()
        .enumerate()
        .find_map(|(i, v)| values[..i].contains(v).then_some(v))
    {
        return Err(refuse(format!("the value {v} is given twice")));
    }
    match values.len() {
        1 => Err(refuse(format!("only one value ({})", values[0]))),
        n if n > MAX_VALUES => Err(refuse(format!("{n} values"))),
        _ => Ok((key.to_string(), values)),
    }
}

/// `--compare-postconf KEY=V1,V2[,…]` → the main.cf key and its values.
fn parse(spec: &str) -> Result<(String, Vec<String>), String> {
    setting_values("--compare-postconf", spec, "default_process_limit=100,20")
}

/// Every `--compare-postconf` → every combination of their values (the first key's
/// outermost), each as its `(key, value)` pairs: one key's values alone, or the grid of
/// seed 004's sweeps over two settings. At most [`MAX_VALUES`] combinations, keys distinct.
fn grid(specs: &[String]) -> Result<Vec<Vec<(String, String)>>, String> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for spec in specs {
        let (key, values) = parse(spec)?;
        if combos[0].iter().any(|(k, _)| *k == key) {
            return Err(format!(
                "--compare-postconf {spec}: {key} is compared twice; give each setting once with all its values"
            ));
        }
        combos = combos
            .iter()
            .flat_map(|c| {
                let key = &key;
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((key.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    if combos.len() > MAX_VALUES {
        return Err(format!(
            "--compare-postconf {}: {} combinations; at most {MAX_VALUES} (each runs at least 4 rounds on a fresh lab): compare fewer values",
            specs.join(" --compare-postconf "),
            combos.len()
        ));
    }
    Ok(combos)
}

/// Refuses `--compare-postconf` before any lab starts: its syntax, and a key the lab MTA
/// does not know when it can tell ahead (else the first round's lab would refuse it,
/// naming `--mta-conf`, the flag the user did not type).
pub(crate) fn check_settings(specs: &[String], mta: Option<Mta>) -> Result<(), String> {
    let combos = grid(specs)?;
    let Some(mta) = mta else {
        return Ok(());
    };
    let keys: Vec<&str> = combos[0].iter().map(|(k, _)| k.as_str()).collect();
    match mta.unknown_setting(&keys) {
        Some(k) => Err(format!(
            "--compare-postconf {k}: the {} lab has no such setting; check its spelling in the MTA's documentation",
            mta.name()
        )),
        None => Ok(()),
    }
}

/// The tag of the `i`th value's results file: `A`, `B`, … as written before there were
/// more than two.
fn tag(i: usize) -> char {
    char::from(b'A' + (i % 26) as u8)
}

/// Runs the variants in the engine's rotating rounds, each turn a relay benchmark on the
/// variant's plan. With `logs` (the results file), each variant's lab logs of each round
/// are kept as `FILE.LABEL.roundN.maillog.I` and named in its round.
async fn run(
    variants: &[Variant],
    rounds: u32,
    logs: Option<&Path>,
) -> Result<Compared<Results>, (u8, String)> {
    let shutdown = Shutdown::install();
    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    let turn = |t: Turn| {
        let v = &variants[t.side];
        let mut plan = v.plan.clone();
        plan.keep_logs = logs.map(|b| rounds::round_logs(b, &v.label, t.round));
        let shutdown = shutdown.clone();
        async move {
            crate::relay::bench(plan, shutdown)
                .await
                .map_err(|e| match e {
                    RelayError::Usage(e) => (EXIT_USAGE, e),
                    RelayError::Failed(e) => (EXIT_FAILED, e),
                })
        }
    };
    rounds::rotate(
        "relay",
        &labels,
        rounds,
        &shutdown,
        crate::report::rounds::combine,
        turn,
    )
    .await
    .map_err(|e| e.or(|why| (EXIT_FAILED, why)))
}

/// The end of a comparison: the interruption said (after the table, where it is seen),
/// and the exit code (an interrupted comparison is not a finished one: 2).
pub(crate) fn finish(ran: &Compared<Results>) -> u8 {
    if let Some(line) = &ran.said {
        crate::report::print(&format!("{line}\n"));
    }
    if ran.interrupted {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// Prints `compare`'s table of the variants (the first is the baseline); none when no
/// round was completed by every variant (cut-short runs are not compared).
pub(crate) fn table(labels: &[String], ran: &Compared<Results>) -> Result<(), (u8, String)> {
    if !ran.compared {
        return Ok(());
    }
    let docs: Vec<Side> = ran
        .ran(labels)
        .map(|(label, r)| Side::of(label.clone(), r).map_err(|e| (EXIT_FAILED, e)))
        .collect::<Result<_, _>>()?;
    let c = compare::compare(&docs, false).map_err(|e| (EXIT_FAILED, e))?;
    crate::report::print(&compare::render::render(&c, compare::render::Format::Text));
    Ok(())
}

/// `--compare-postconf`: every value (every combination) in rotating rounds; writes `--json FILE` as
/// `FILE-A.json`, `FILE-B.json`, … (A = the first value); prints the compare table, the
/// first value the baseline.
pub async fn settings(
    specs: &[String],
    rounds: u32,
    plan: RelayPlan,
    json: Option<PathBuf>,
) -> Result<u8, (u8, String)> {
    let variants: Vec<Variant> = grid(specs)
        .map_err(|e| (EXIT_USAGE, e))?
        .iter()
        .map(|combo| Variant {
            label: combo
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            plan: combo
                .iter()
                .fold(plan.clone(), |p, (k, v)| p.with_setting(k, v)),
        })
        .collect();
    let ran = run(&variants, rounds.max(MIN_ROUNDS), json.as_deref()).await?;
    if let Some(base) = json {
        let stem = base.with_extension("");
        for (i, r) in ran.sides.iter().enumerate() {
            // A setting that never ran (a signal came first) has no file.
            let Some(r) = r else { continue };
            let path = PathBuf::from(format!("{}-{}.json", stem.display(), tag(i)));
            let mut r = r.clone();
            ran.mark(&mut r);
            r.write(&path).map_err(|e| (EXIT_FAILED, e))?;
            crate::report::print(&format!("  results    {}\n", path.display()));
        }
    }
    let labels: Vec<String> = variants.into_iter().map(|v| v.label).collect();
    table(&labels, &ran)?;
    Ok(finish(&ran))
}

/// `--lab postfix,exim,…`: the same workload on each MTA in rotating rounds; writes one
/// results file (the first MTA's document, with every MTA's under `extra.sides`, which
/// `compare` and `report` read as one side each); prints the compare table.
pub async fn mtas(
    mtas: &[Mta],
    rounds: u32,
    plan: RelayPlan,
    json: Option<PathBuf>,
) -> Result<u8, (u8, String)> {
    let variants: Vec<Variant> = mtas
        .iter()
        .map(|m| Variant {
            label: m.name().to_string(),
            plan: plan.on_mta(*m),
        })
        .collect();
    // Four rounds unless --rounds asks for another number (two or three give the table
    // without verdicts).
    let rounds = if rounds > 1 { rounds } else { MIN_ROUNDS };
    let ran = run(&variants, rounds, json.as_deref()).await?;
    let labels: Vec<String> = variants.into_iter().map(|v| v.label).collect();
    if let Some(path) = json {
        write_sides(&labels, &ran, &path)?;
    }
    table(&labels, &ran)?;
    Ok(finish(&ran))
}

/// Writes the compared variants as one results file: the first's document, with every
/// variant's under `extra.sides` (what `compare` and `report` read as one side each).
/// A variant that never ran (a signal came first) is not among them but named in
/// `extra.never_ran`.
pub(crate) fn write_sides(
    labels: &[String],
    ran: &Compared<Results>,
    path: &Path,
) -> Result<(), (u8, String)> {
    let Some((_, first)) = ran.ran(labels).next() else {
        return Ok(());
    };
    let mut all = first.clone();
    ran.mark(&mut all);
    let list: Vec<serde_json::Value> = ran
        .ran(labels)
        .map(|(label, r)| serde_json::json!({"label": label, "results": r}))
        .collect();
    all.extra.insert("sides".into(), list.into());
    // A variant a signal kept from running is named, so the file says what was planned.
    let never = ran.never_ran(labels);
    if !never.is_empty() {
        all.extra
            .insert("never_ran".into(), serde_json::json!(never));
    }
    all.write(path).map_err(|e| (EXIT_FAILED, e))?;
    crate::report::print(&format!("  results    {}\n", path.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_settings_make_every_combination_the_first_outermost_at_most_eight() {
        let specs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let labels = |g: Vec<Vec<(String, String)>>| {
            g.iter()
                .map(|c| {
                    c.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            grid(&specs(&["a=1,2", "b=x,y,z"])).map(labels),
            Ok(specs(&[
                "a=1 b=x", "a=1 b=y", "a=1 b=z", "a=2 b=x", "a=2 b=y", "a=2 b=z"
            ]))
        );
        assert_eq!(
            grid(&specs(&["a=1,2"])).map(labels),
            Ok(specs(&["a=1", "a=2"]))
        );
        let e = grid(&specs(&["a=1,2,3", "b=x,y,z"])).expect_err("9 combinations");
        assert!(e.contains(": 9 combinations; at most 8"), "{e}");
        let e = grid(&specs(&["a=1,2", "a=3,4"])).expect_err("a twice");
        assert!(
            e.starts_with("--compare-postconf a=3,4: a is compared twice"),
            "{e}"
        );
    }

    #[test]
    fn a_setting_and_two_to_eight_different_values_or_one_clear_line() {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse("default_process_limit=100,20"),
            Ok(("default_process_limit".to_string(), owned(&["100", "20"])))
        );
        assert_eq!(
            parse("d=10, 50,100,1000"),
            Ok(("d".to_string(), owned(&["10", "50", "100", "1000"])))
        );
        for (bad, why) in [
            ("x=1", "only one value (1)"),
            ("x=1,1", "the value 1 is given twice"),
            ("=1,2", "no setting before '='"),
            ("x", "no '=' between the setting and its values"),
            ("x=1,2,1", "the value 1 is given twice"),
            ("x=1,,2", "an empty value"),
            ("x=", "an empty value"),
            ("x=1,2,3,4,5,6,7,8,9", "9 values"),
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(
                e.starts_with(&format!(
                    "--compare-postconf {bad}: {why}; give a setting and 2 to 8"
                )),
                "for {bad} expected the reason {why:?}, got {e}"
            );
        }
    }
}
