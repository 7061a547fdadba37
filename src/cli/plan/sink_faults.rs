//! The sink's faults as flags and a TOML file give them, checked into a `FaultPlan`: one
//! reading for `sink` (`--rule`, `--greylist`, …) and for the sink a relay embeds
//! (`--sink-rule`, `--sink-greylist`, …), so that every fault the one takes the other
//! takes, and the errors name the flag the user typed.

use std::path::Path;

use serde::Deserialize;

use crate::sink::faults::{FaultPlan, parse_rule};
use crate::units;

/// The TOML rules file: the same things the flags set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rules: Vec<String>,
    greylist: Option<String>,
    tarpit: Option<String>,
    max_conns_per_ip: Option<u64>,
    max_msgs_per_conn: Option<u64>,
    rate_per_ip: Option<String>,
}

/// The fault flags of one command, as typed; `prefix` is what their names start with
/// after `--` (`""` for `sink`, `"sink-"` for `relay`).
pub struct FaultFlags<'a> {
    /// `--rule` (repeatable).
    pub rule: &'a [String],
    /// `--rules FILE`.
    pub rules: Option<&'a Path>,
    /// `--greylist`.
    pub greylist: Option<&'a str>,
    /// `--tarpit`.
    pub tarpit: Option<&'a str>,
    /// `--max-conns-per-ip`.
    pub max_conns_per_ip: Option<&'a str>,
    /// `--max-msgs-per-conn`.
    pub max_msgs_per_conn: Option<&'a str>,
    /// `--rate-per-ip`.
    pub rate_per_ip: Option<&'a str>,
    /// The flags' common prefix.
    pub prefix: &'static str,
}

/// The faults the flags and the rules file ask for (a flag wins over the file); the
/// users' BHM flags and passwords are the sink's own, left empty.
pub fn fault_plan(f: &FaultFlags) -> Result<FaultPlan, String> {
    let p = f.prefix;
    let file = match f.rules {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --{p}rules {}: {e}", path.display()))?;
            toml::from_str::<RulesFile>(&text)
                .map_err(|e| format!("--{p}rules {}: {}", path.display(), e.message()))?
        }
        None => RulesFile::default(),
    };
    let mut rules = Vec::new();
    for r in &file.rules {
        rules.push(parse_rule(&format!("the --{p}rules file's rule"), r)?);
    }
    for r in f.rule {
        rules.push(parse_rule(&format!("--{p}rule"), r)?);
    }
    // A value from the flag is named by the flag, one from the file by its key.
    let named = |key: &str, from_flag: bool| {
        if from_flag {
            format!("--{p}{}", key.replace('_', "-"))
        } else {
            format!("the --{p}rules file's {key}")
        }
    };
    let dur = |key: &str, flag: Option<&str>, file: &Option<String>| {
        flag.or(file.as_deref())
            .map(units::duration)
            .transpose()
            .map_err(|e| format!("{}: {e}", named(key, flag.is_some())))
    };
    let count = |key: &str, flag: Option<&str>| {
        flag.map(units::count)
            .transpose()
            .map_err(|e| format!("{}: {e}", named(key, true)))
    };
    Ok(FaultPlan {
        rules,
        tarpit: dur("tarpit", f.tarpit, &file.tarpit)?.unwrap_or_default(),
        greylist: match dur("greylist", f.greylist, &file.greylist)? {
            // Greylisting for no time defers nothing (and would turn off the 60 s of
            // `greylist@` addresses): a user who typed it meant some time or none.
            Some(t) if t.is_zero() => {
                return Err(format!(
                    "{} 0s: greylisting for no time defers nothing; give a time (e.g. 60s) or leave it out",
                    named("greylist", f.greylist.is_some())
                ));
            }
            t => t,
        },
        max_conns_per_ip: count("max_conns_per_ip", f.max_conns_per_ip)?.or(file.max_conns_per_ip),
        max_msgs_per_conn: count("max_msgs_per_conn", f.max_msgs_per_conn)?
            .or(file.max_msgs_per_conn),
        rate_per_ip: f
            .rate_per_ip
            .or(file.rate_per_ip.as_deref())
            .map(units::rate)
            .transpose()
            .map_err(|e| format!("{}: {e}", named("rate_per_ip", f.rate_per_ip.is_some())))?,
        ..FaultPlan::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags<'a>(greylist: Option<&'a str>, prefix: &'static str) -> FaultFlags<'a> {
        FaultFlags {
            rule: &[],
            rules: None,
            greylist,
            tarpit: None,
            max_conns_per_ip: None,
            max_msgs_per_conn: None,
            rate_per_ip: None,
            prefix,
        }
    }

    #[test]
    fn a_greylist_of_no_time_is_refused_naming_the_flag() {
        for (prefix, flag) in [("", "--greylist"), ("sink-", "--sink-greylist")] {
            let e = fault_plan(&flags(Some("0s"), prefix)).map(|p| p.greylist);
            assert_eq!(
                e,
                Err(format!(
                    "{flag} 0s: greylisting for no time defers nothing; give a time (e.g. 60s) or leave it out"
                ))
            );
        }
        let p = fault_plan(&flags(Some("1s"), "sink-")).map(|p| p.greylist);
        assert_eq!(p, Ok(Some(std::time::Duration::from_secs(1))));
    }
}
