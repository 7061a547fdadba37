//! Relay benchmarks that vary one thing and compare: `--compare-postconf KEY=V1,V2` (the
//! seeds' "what did this tuning buy") and `--lab postfix,exim,…` (the seeds' "which MTA is
//! faster for this traffic"), answered on one machine with its noise taken into account.
//! The variants run in rounds whose order rotates (A B, B A, … for two; A B C, B C A,
//! C A B, … for more), so that a drift of the machine hits all alike, each on a fresh
//! lab; each variant's rounds are kept as one results document, and the run ends with
//! `compare`'s table.

use std::path::{Path, PathBuf};

use super::args::RelayArgs;
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::lab::Mta;
use crate::relay::{RelayError, RelayPlan};
use crate::report::compare::{self, Side};
use crate::shutdown::Shutdown;
use crate::stats::Results;

/// Rounds per variant when `--rounds` asks for fewer: the least a verdict needs.
const MIN_ROUNDS: u32 = compare::noise::MIN_ROUNDS as u32;

/// One thing compared: its label and its plan.
struct Variant {
    label: String,
    plan: RelayPlan,
}

/// `KEY=V1,V2` → the key and its two values.
fn parse(spec: &str) -> Result<(String, [String; 2]), String> {
    let bad = || {
        format!(
            "--compare-postconf {spec}: give a main.cf key and two values, e.g. default_process_limit=100,20"
        )
    };
    let (key, values) = spec.split_once('=').ok_or_else(bad)?;
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    match (key.trim(), values.as_slice()) {
        (k, [a, b]) if !k.is_empty() && !a.is_empty() && !b.is_empty() && a != b => {
            Ok((k.to_string(), [a.to_string(), b.to_string()]))
        }
        _ => Err(bad()),
    }
}

/// The plan with `key=value` set in the lab (replacing the key if --mta-conf set it).
fn with_setting(plan: &RelayPlan, key: &str, value: &str) -> RelayPlan {
    let mut p = plan.clone();
    if let Some((_, opts)) = &mut p.lab {
        opts.settings.retain(|(k, _)| k != key);
        opts.settings.push((key.to_string(), value.to_string()));
    }
    let setting = format!("{key}={value}");
    let conf = &mut p.send.config_json["relay"]["mta_conf"];
    match conf.as_array_mut() {
        Some(list) => {
            list.retain(|v| {
                !v.as_str()
                    .is_some_and(|s| s.starts_with(&format!("{key}=")))
            });
            list.push(setting.into());
        }
        None => *conf = serde_json::json!([setting]),
    }
    p
}

/// The plan on another lab MTA.
fn on_mta(plan: &RelayPlan, mta: Mta) -> RelayPlan {
    let mut p = plan.clone();
    if let Some((m, _)) = &mut p.lab {
        *m = mta;
    }
    p
}

/// The order of round `round` (0-based) over `n` variants: rotated by one each round.
fn order(round: u32, n: usize) -> Vec<usize> {
    (0..n).map(|i| (i + round as usize) % n).collect()
}

/// What the rounds of a comparison gave: each variant's rounds combined (only the rounds
/// every variant completed), and what was left out.
struct Ran {
    /// Per variant, its complete rounds as one document.
    sides: Vec<Results>,
    /// A signal cut the comparison short.
    interrupted: bool,
    /// At least one round was completed by every variant (else nothing is compared).
    compared: bool,
    /// The rounds left out of the comparison (`extra.dropped_rounds`): each variant's
    /// round that a signal cut short, and the others' of that round, so that every
    /// variant is compared over the same whole rounds.
    dropped: Vec<serde_json::Value>,
    /// One line for the screen about the interruption, when there was one.
    said: Option<String>,
}

/// Runs every variant `rounds` times in rotating order; each variant's rounds combined.
/// Stops after the round a first signal interrupts, keeping what was measured; a round
/// that not every variant completed whole is left out of the comparison (and named), so
/// that a cut-short run is never compared as if it were whole. With `logs` (the results
/// file), each variant's lab logs of each round are kept as
/// `FILE.LABEL.roundN.maillog.I` and named in its round.
async fn run(variants: &[Variant], rounds: u32, logs: Option<&Path>) -> Result<Ran, (u8, String)> {
    let shutdown = Shutdown::install();
    let mut done: Vec<Vec<Results>> = variants.iter().map(|_| Vec::new()).collect();
    let mut cut_in = None;
    'rounds: for round in 0..rounds {
        for side in order(round, variants.len()) {
            crate::run::live::say(&format!(
                "mailbench relay: round {} of {rounds}, {}",
                round + 1,
                variants[side].label
            ));
            let mut plan = variants[side].plan.clone();
            plan.keep_logs =
                logs.map(|b| super::finish::round_logs(b, &variants[side].label, round + 1));
            let r = crate::relay::bench(plan, shutdown.clone())
                .await
                .map_err(|e| match e {
                    RelayError::Usage(e) => (EXIT_USAGE, e),
                    RelayError::Failed(e) => (EXIT_FAILED, e),
                })?;
            done[side].push(r);
            if shutdown.stop.is_cancelled() {
                cut_in = Some((round, side));
                break 'rounds;
            }
        }
    }
    // A round is whole when every variant completed it: all rounds before the one a
    // signal cut short.
    let whole = match cut_in {
        Some((round, _)) => round as usize,
        None => done.iter().map(Vec::len).min().unwrap_or(0),
    };
    let mut dropped = Vec::new();
    for (side, rs) in done.iter_mut().enumerate() {
        let keep = if whole == 0 { rs.len() } else { whole };
        for (i, r) in rs.drain(keep..).enumerate() {
            dropped.push(serde_json::json!({
                "label": variants[side].label,
                "round": keep + i + 1,
                "interrupted": r.interrupted,
                "duration_s": r.duration_s,
                "mta_logs": r.extra.get("mta_logs"),
            }));
        }
    }
    let said = cut_in.map(|(round, side)| {
        let why = format!(
            "mailbench relay: interrupted in round {} of {rounds} ({}):",
            round + 1,
            variants[side].label
        );
        match whole {
            0 => format!(
                "{why} no round was completed by every variant, so nothing is compared; the results keep the cut-short runs, marked interrupted"
            ),
            n => format!(
                "{why} {} left out, each variant compared over its {n} whole round{}",
                match dropped.len() {
                    1 => "that round is".to_string(),
                    k => format!("the {k} runs of unfinished rounds are"),
                },
                if n == 1 { "" } else { "s" }
            ),
        }
    });
    let sides = done
        .into_iter()
        .map(|v| {
            crate::report::rounds::combine(v).ok_or((
                EXIT_FAILED,
                "interrupted before every variant had run once; nothing to compare".into(),
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Ran {
        interrupted: shutdown.interrupted() || cut_in.is_some(),
        compared: whole > 0,
        sides,
        dropped,
        said,
    })
}

/// Marks a comparison's results document as cut short, when it was, with what was left
/// out of it.
fn mark(r: &mut Results, ran: &Ran) {
    if ran.interrupted {
        r.interrupted = true;
    }
    if !ran.dropped.is_empty() {
        r.extra
            .insert("dropped_rounds".into(), ran.dropped.clone().into());
    }
}

/// The end of a comparison: the interruption said (after the table, where it is seen),
/// and the exit code (an interrupted comparison is not a finished one: 2).
fn finish(ran: &Ran) -> u8 {
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
fn table(labels: &[String], ran: &Ran) -> Result<(), (u8, String)> {
    if !ran.compared {
        return Ok(());
    }
    let docs: Vec<Side> = ran
        .sides
        .iter()
        .zip(labels)
        .map(|(r, label)| Side::of(label.clone(), r).map_err(|e| (EXIT_FAILED, e)))
        .collect::<Result<_, _>>()?;
    let c = compare::compare(&docs, false).map_err(|e| (EXIT_FAILED, e))?;
    crate::report::print(&compare::render::render(&c, compare::render::Format::Text));
    Ok(())
}

/// `--compare-postconf`: both settings in alternating rounds; writes `--json FILE` as
/// `FILE-A.json` and `FILE-B.json` (A = the first value); prints the compare table.
pub async fn settings(
    a: &RelayArgs,
    spec: &str,
    plan: RelayPlan,
    json: Option<PathBuf>,
) -> Result<u8, (u8, String)> {
    let (key, values) = parse(spec).map_err(|e| (EXIT_USAGE, e))?;
    let variants: Vec<Variant> = values
        .iter()
        .map(|v| Variant {
            label: format!("{key}={v}"),
            plan: with_setting(&plan, &key, v),
        })
        .collect();
    let ran = run(&variants, a.load.rounds.max(MIN_ROUNDS), json.as_deref()).await?;
    if let Some(base) = json {
        let stem = base.with_extension("");
        for (r, tag) in ran.sides.iter().zip(["A", "B"]) {
            let path = PathBuf::from(format!("{}-{tag}.json", stem.display()));
            let mut r = r.clone();
            mark(&mut r, &ran);
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
    a: &RelayArgs,
    mtas: &[Mta],
    plan: RelayPlan,
    json: Option<PathBuf>,
) -> Result<u8, (u8, String)> {
    let variants: Vec<Variant> = mtas
        .iter()
        .map(|m| Variant {
            label: m.name().to_string(),
            plan: on_mta(&plan, *m),
        })
        .collect();
    // Four rounds unless --rounds asks for another number (two or three give the table
    // without verdicts).
    let rounds = if a.load.rounds > 1 {
        a.load.rounds
    } else {
        MIN_ROUNDS
    };
    let ran = run(&variants, rounds, json.as_deref()).await?;
    let labels: Vec<String> = variants.into_iter().map(|v| v.label).collect();
    if let Some(path) = json {
        let mut all = ran.sides[0].clone();
        mark(&mut all, &ran);
        let list: Vec<serde_json::Value> = labels
            .iter()
            .zip(&ran.sides)
            .map(|(label, r)| serde_json::json!({"label": label, "results": r}))
            .collect();
        all.extra.insert("sides".into(), list.into());
        all.write(&path).map_err(|e| (EXIT_FAILED, e))?;
        crate::report::print(&format!("  results    {}\n", path.display()));
    }
    table(&labels, &ran)?;
    Ok(finish(&ran))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_and_two_different_values_or_one_clear_line() {
        assert_eq!(
            parse("default_process_limit=100,20"),
            Ok((
                "default_process_limit".to_string(),
                ["100".to_string(), "20".to_string()]
            ))
        );
        for bad in ["x=1", "x=1,1", "=1,2", "x", "x=1,2,3"] {
            let e = parse(bad).expect_err(bad);
            assert!(e.starts_with(&format!("--compare-postconf {bad}:")), "{e}");
        }
    }

    #[test]
    fn every_variant_takes_every_place_in_turn() {
        let two: Vec<Vec<usize>> = (0..4).map(|r| order(r, 2)).collect();
        assert_eq!(two, [[0, 1], [1, 0], [0, 1], [1, 0]]);
        let four: Vec<Vec<usize>> = (0..4).map(|r| order(r, 4)).collect();
        for place in 0..4 {
            let mut firsts: Vec<usize> = four.iter().map(|o| o[place]).collect();
            firsts.sort_unstable();
            assert_eq!(firsts, [0, 1, 2, 3], "place {place}: {four:?}");
        }
    }
}
