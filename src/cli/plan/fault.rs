//! `relay --fault KIND@WHEN` → a [`FaultPlan`]: `crash`, `power-loss` or `disk-full`
//! (held full for [`DISK_FULL_HOLD`] unless `--fault-hold` says otherwise), after a count
//! of accepted messages (a bare number) or at a time after injection starts (a duration
//! with its unit, e.g. `3s`, `500ms`).

use std::time::Duration;

use crate::relay::fault::{FaultKind, FaultPlan, FaultWhen};

/// What `--fault` takes, for its messages.
const FORM: &str = "give KIND@WHEN: crash, power-loss or disk-full, @N after N accepted messages or @3s at a time, e.g. --fault crash@150";

/// How long `disk-full` keeps the disk full when `--fault-hold` does not say.
pub const DISK_FULL_HOLD: Duration = Duration::from_secs(2);

/// Parses `--fault`'s value; the error is one line naming the flag and the fix.
pub fn parse(s: &str) -> Result<FaultPlan, String> {
    let (kind, when) = s
        .split_once('@')
        .ok_or_else(|| format!("--fault {s:?}: {FORM}"))?;
    let kind = match kind.trim() {
        "crash" => FaultKind::Crash,
        "power-loss" => FaultKind::PowerLoss,
        "disk-full" => FaultKind::DiskFull {
            hold: DISK_FULL_HOLD,
        },
        other => return Err(format!("--fault {s:?}: no fault {other:?}; {FORM}")),
    };
    let when = when.trim();
    let when = match when.parse::<u64>() {
        Ok(0) => {
            return Err(format!(
                "--fault {s:?}: the count must be at least 1; {FORM}"
            ));
        }
        Ok(n) => FaultWhen::Accepted(n),
        Err(_) if when.starts_with(|c: char| c.is_ascii_digit()) => FaultWhen::After(
            crate::units::duration(when).map_err(|e| format!("--fault {s:?}: {e}"))?,
        ),
        Err(_) => return Err(format!("--fault {s:?}: {FORM}")),
    };
    Ok(FaultPlan { kind, when })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_times_and_bad_values() {
        assert_eq!(
            parse("crash@150"),
            Ok(FaultPlan {
                kind: FaultKind::Crash,
                when: FaultWhen::Accepted(150)
            })
        );
        assert_eq!(
            parse("power-loss@2.5s"),
            Ok(FaultPlan {
                kind: FaultKind::PowerLoss,
                when: FaultWhen::After(Duration::from_millis(2500))
            })
        );
        assert_eq!(
            parse("disk-full@40"),
            Ok(FaultPlan {
                kind: FaultKind::DiskFull {
                    hold: DISK_FULL_HOLD
                },
                when: FaultWhen::Accepted(40)
            })
        );
        assert_eq!(
            parse("disk-full@1s").map(|p| p.label()),
            Ok("disk-full@1s".into())
        );
        assert_eq!(
            parse("crash@150").map(|p| p.label()),
            Ok("crash@150".into())
        );
        for bad in ["crash", "melt@3", "crash@0", "crash@soon", "crash@3parsecs"] {
            let e = parse(bad).expect_err(bad);
            assert!(e.starts_with("--fault ") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
