//! Parsers for the units people write, on the command line and in rules files: durations
//! `30s` `5m`, sizes `1k` `25KiB` `0-10k`, rates `500/s` `12000/min`, counts `10k`. Each
//! error names the value and shows a valid form.

use std::time::Duration;

/// `30s`, `5m`, `250ms`, `1h30m`; a bare number means seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(t)
        .map_err(|_| format!("invalid duration {s:?}; use e.g. 30s, 5m, 250ms"))
}

/// A duration or a range of them, `200ms` or `50ms-200ms`: (minimum, maximum).
pub fn duration_range(s: &str) -> Result<(Duration, Duration), String> {
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (duration(a)?, duration(b)?),
        None => {
            let x = duration(s)?;
            (x, x)
        }
    };
    if lo > hi {
        return Err(format!("{s:?}: the range's minimum is above its maximum"));
    }
    Ok((lo, hi))
}

/// `1000`, `1k`, `25KiB`, `1m`, `10kB`: k, K, KiB = 1024; M, MiB = 1024²; kB = 1000,
/// MB = 1000².
pub fn size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim() {
        "" | "b" | "B" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1024.0,
        "kB" | "KB" => 1000.0,
        "m" | "M" | "MiB" | "Mi" => 1024.0 * 1024.0,
        "MB" => 1e6,
        _ => return Err(format!("invalid size {s:?}; use e.g. 512, 25k, 25KiB, 1M")),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}; use e.g. 512, 25k, 25KiB, 1M"))?;
    Ok((n * mult).round() as usize)
}

/// A size or an inclusive range `MIN-MAX`.
pub fn size_range(s: &str) -> Result<(usize, usize), String> {
    match s.split_once('-') {
        Some((a, b)) => {
            let (lo, hi) = (size(a)?, size(b)?);
            if lo > hi {
                return Err(format!(
                    "invalid size range {s:?}: the minimum is above the maximum"
                ));
            }
            Ok((lo, hi))
        }
        None => size(s).map(|n| (n, n)),
    }
}

/// Messages per second from `500/s`, `12000/min`, `100/h` or a bare number (per second).
pub fn rate(s: &str) -> Result<f64, String> {
    let bad = || format!("invalid rate {s:?}; use e.g. 500/s, 12000/min, 100/h");
    let t = s.trim();
    let (num, per) = t.split_once('/').unwrap_or((t, "s"));
    let n: f64 = count_f(num).ok_or_else(bad)?;
    let secs = match per.trim() {
        "s" | "sec" | "second" => 1.0,
        "m" | "min" | "minute" => 60.0,
        "h" | "hour" => 3600.0,
        _ => return Err(bad()),
    };
    let r = n / secs;
    if !(r.is_finite() && r > 0.0) {
        return Err(format!("invalid rate {s:?}: it must be above zero"));
    }
    Ok(r)
}

fn count_f(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1e3),
        'm' | 'M' => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    num.parse::<f64>().ok().map(|n| n * mult)
}

/// A count: `10000`, `10k`, `1M` (decimal multiples).
pub fn count(s: &str) -> Result<u64, String> {
    count_f(s)
        .filter(|n| *n >= 0.0 && n.fract() == 0.0)
        .map(|n| n as u64)
        .ok_or_else(|| format!("invalid count {s:?}; use e.g. 1000 or 10k"))
}

/// `N` or `MIN-MAX` (counts).
pub fn count_range(s: &str) -> Result<(u64, u64), String> {
    match s.split_once('-') {
        Some((a, b)) => {
            let (lo, hi) = (count(a)?, count(b)?);
            if lo > hi || lo == 0 {
                return Err(format!(
                    "invalid range {s:?}: write MIN-MAX with 0 < MIN <= MAX"
                ));
            }
            Ok((lo, hi))
        }
        None => count(s).map(|n| (n, n)),
    }
}

/// A percentage 0–100.
pub fn percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%');
    t.parse::<f64>()
        .ok()
        .filter(|p| (0.0..=100.0).contains(p))
        .ok_or_else(|| format!("invalid percentage {s:?}; use a number from 0 to 100"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(size("25k"), Ok(25 * 1024));
        assert_eq!(size("25KiB"), Ok(25 * 1024));
        assert_eq!(size("10kB"), Ok(10_000));
        assert_eq!(size("1M"), Ok(1 << 20));
        assert_eq!(size_range("0-10k"), Ok((0, 10 * 1024)));
        let ms = Duration::from_millis;
        assert_eq!(duration_range("50ms-200ms"), Ok((ms(50), ms(200))));
        assert_eq!(duration_range("200ms"), Ok((ms(200), ms(200))));
        assert!(duration_range("2s-1s").is_err_and(|e| e.contains("minimum is above")));
        assert_eq!(rate("500/s"), Ok(500.0));
        assert_eq!(rate("12000/min"), Ok(200.0));
        assert_eq!(rate("1k"), Ok(1000.0));
        assert_eq!(count("10k"), Ok(10_000));
        assert_eq!(count_range("5-10"), Ok((5, 10)));
        assert_eq!(percent("25%"), Ok(25.0));
    }

    #[test]
    fn bad_units_are_named() {
        for (f, v) in [
            (duration as fn(&str) -> Result<Duration, String>, "soon"),
            (duration, "-1"),
        ] {
            assert!(f(v).unwrap_err().contains(v));
        }
        assert!(size("12q").unwrap_err().contains("12q"));
        assert!(size_range("10k-1k").is_err());
        assert!(rate("0/s").is_err());
        assert!(rate("5/fortnight").is_err());
        assert!(count("1.5").is_err());
        assert!(count_range("0-5").is_err());
        assert!(percent("101").is_err());
    }
}
