//! `relay --lab … --compare-postconf KEY=V1,V2`: the seeds' "what did this tuning buy"
//! question answered on one machine with its noise taken into account. The two settings
//! run in alternating rounds (A B, B A, A B, …, so that a drift of the machine hits both
//! alike), each side's rounds are kept as one results document, and the run ends with
//! `compare`'s table.

use super::args::RelayArgs;
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::relay::{RelayError, RelayPlan};
use crate::report::compare::{self, Side};
use crate::shutdown::Shutdown;
use crate::stats::Results;

/// Rounds per setting when `--rounds` asks for fewer: the least a verdict needs.
const MIN_ROUNDS: u32 = compare::noise::MIN_ROUNDS as u32;

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

/// The plan with `key=value` set in the lab (replacing the key if --postconf set it).
fn with_setting(plan: &RelayPlan, key: &str, value: &str) -> RelayPlan {
    let mut p = plan.clone();
    if let Some((_, opts)) = &mut p.lab {
        opts.settings.retain(|(k, _)| k != key);
        opts.settings.push((key.to_string(), value.to_string()));
    }
    let setting = format!("{key}={value}");
    let postconf = &mut p.send.config_json["relay"]["postconf"];
    match postconf.as_array_mut() {
        Some(list) => {
            list.retain(|v| {
                !v.as_str()
                    .is_some_and(|s| s.starts_with(&format!("{key}=")))
            });
            list.push(setting.into());
        }
        None => *postconf = serde_json::json!([setting]),
    }
    p.keep_logs = None;
    p
}

/// Runs both settings in alternating rounds; writes `--json FILE` as `FILE-A.json` and
/// `FILE-B.json` (A = the first value); prints the compare table.
pub async fn relay(
    a: &RelayArgs,
    spec: &str,
    plan: RelayPlan,
    json: Option<std::path::PathBuf>,
) -> Result<u8, (u8, String)> {
    let (key, values) = parse(spec).map_err(|e| (EXIT_USAGE, e))?;
    let plans = [
        with_setting(&plan, &key, &values[0]),
        with_setting(&plan, &key, &values[1]),
    ];
    let rounds = a.load.rounds.max(MIN_ROUNDS);
    let shutdown = Shutdown::install();
    let mut done: [Vec<Results>; 2] = [Vec::new(), Vec::new()];
    'rounds: for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            crate::run::live::say(&format!(
                "mailbench relay: round {} of {rounds}, {key}={}",
                round + 1,
                values[side]
            ));
            let r = crate::relay::bench(plans[side].clone(), shutdown.clone())
                .await
                .map_err(|e| match e {
                    RelayError::Usage(e) => (EXIT_USAGE, e),
                    RelayError::Failed(e) => (EXIT_FAILED, e),
                })?;
            done[side].push(r);
            if shutdown.stop.is_cancelled() {
                break 'rounds;
            }
        }
    }
    let [first, second] = done;
    let combine = |v: Vec<Results>| {
        crate::report::rounds::combine(v).ok_or((EXIT_FAILED, "no round ran".to_string()))
    };
    let sides = [combine(first)?, combine(second)?];
    let labels = [
        format!("{key}={}", values[0]),
        format!("{key}={}", values[1]),
    ];
    if let Some(base) = json {
        let stem = base.with_extension("");
        for (r, tag) in sides.iter().zip(["A", "B"]) {
            let path = std::path::PathBuf::from(format!("{}-{tag}.json", stem.display()));
            r.write(&path).map_err(|e| (EXIT_FAILED, e))?;
            crate::report::print(&format!("  results    {}\n", path.display()));
        }
    }
    let docs: Vec<Side> = sides
        .iter()
        .zip(labels)
        .map(|(r, label)| {
            let doc = serde_json::to_value(r).map_err(|e| (EXIT_FAILED, e.to_string()))?;
            Ok(Side {
                label,
                docs: vec![doc],
            })
        })
        .collect::<Result<_, (u8, String)>>()?;
    let c = compare::compare(&docs, false).map_err(|e| (EXIT_FAILED, e))?;
    crate::report::print(&compare::render::render(&c, compare::render::Format::Text));
    Ok(EXIT_OK)
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
}
