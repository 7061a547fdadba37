//! Flags → validated plans, one planner per flag group: `load` (the shape), `message`,
//! `dkim`, `client` (TLS, the SMTP client, mailbox timeouts), `send` (the load groups put
//! together), `output`, `scale` (split runs), `dns` (zones and faults), `lab` (lab MTAs
//! and stores), `fault` (a relay's `--fault` on its lab MTA), `link` (a relay's `--link`, a hop's shape), `sink_faults` (the sink's
//! faults, read once for `sink` and for a relay's embedded sink), `fill` (filling a store) and `store` (where a mailbox workload runs and
//! as whom), with `config` putting their parts of the results' configuration record
//! together. Planners take typed defaults and name their own flags, so commands compose
//! them without building flag structs or rewording errors; nothing here runs anything.

pub mod client;
pub mod config;
pub mod dkim;
pub mod dns;
pub mod fault;
pub mod fill;
pub mod lab;
pub mod link;
pub mod load;
pub mod message;
pub mod output;
pub mod scale;
pub mod send;
pub mod sink_faults;
pub mod store;

/// Puts the flag's name before an error about its value (`units` and the other parsers
/// know the value, not the flag it came from): `--duration: invalid duration "soon"; …`.
pub fn flagged(flag: &'static str) -> impl Fn(String) -> String {
    move |e| format!("{flag}: {e}")
}

/// `--settle`, as `relay`'s sweeps and `mailbox profile`'s ramps both read it: a duration
/// above zero of each step kept out of the step's figures (seed 001's steady state per
/// step); `None` without the flag.
pub fn settle(spec: Option<&str>) -> Result<Option<std::time::Duration>, String> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let d = crate::units::duration(spec).map_err(flagged("--settle"))?;
    if d.is_zero() {
        return Err(format!(
            "--settle {spec}: give a time above zero (e.g. 5s), or leave --settle out"
        ));
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    /// `--settle` is one duration above zero; anything else is one line naming the flag.
    #[test]
    fn settle_is_a_duration_above_zero() {
        assert_eq!(super::settle(None), Ok(None));
        assert_eq!(
            super::settle(Some("1500ms")),
            Ok(Some(std::time::Duration::from_millis(1500)))
        );
        for bad in ["0s", "soon", "-1s"] {
            let e = super::settle(Some(bad)).expect_err(bad);
            assert!(e.starts_with("--settle"), "{bad}: {e}");
        }
    }

    /// The help of `--settle` in `command path`, as `--help` prints it.
    fn settle_help(path: &[&str]) -> String {
        let mut c = crate::cli::command();
        for name in path {
            c = c
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"))
                .clone();
        }
        c.get_arguments()
            .find(|a| a.get_id() == "settle")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_else(|| panic!("{path:?} has no --settle help"))
    }

    /// A newcomer's finding: `mailbox profile --settle`'s help opened with "Seed 001's
    /// steady state per step". It says plainly what it does, that the settle's actions
    /// still count in the run's totals, and what a bare number means: seconds, as for
    /// relay's --settle and --drain-timeout (`--settle 500` is 500 s, not 500 ms).
    #[test]
    fn settle_s_help_says_what_it_does_and_a_bare_number_is_seconds() {
        assert_eq!(
            super::settle(Some("500")),
            Ok(Some(std::time::Duration::from_secs(500)))
        );
        assert_eq!(
            crate::units::duration("500"),
            Ok(std::time::Duration::from_secs(500)),
            "--drain-timeout reads a bare number as seconds too"
        );
        let profile = settle_help(&["mailbox", "profile"]);
        assert_eq!(
            profile,
            "Leave the first DURATION of each ramp step (of the run, without --ramp-users) out \
             of that step's figures and capacity judgment, so a step is judged once its users \
             have settled in; the actions in it are shown apart (the step's `settle`) and still \
             count in the run's totals. A bare number is seconds (--settle 500 is 500 s, not ms, as with \
             relay's --settle and --drain-timeout). It must be shorter than a step"
        );
        let relay = settle_help(&["relay"]);
        assert!(
            relay.contains("A bare number is seconds"),
            "expected relay's --settle help to say a bare number is seconds, got {relay:?}"
        );
    }
}
