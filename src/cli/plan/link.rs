//! `--link`: a hop's network shape from its flag (`mta:delay=50ms:jitter=5ms:rate=1M`).

use std::time::Duration;

use crate::transport::shape::{Hop, LinkShape};
use crate::units;

/// `--link`: parses `HOP:delay=D[:jitter=D][:rate=SIZE]` (`mta:delay=50ms`, `sink:rate=1M`: 1 MiB a
/// second each way); at least one of delay and rate.
pub fn link(spec: &str) -> Result<LinkShape, String> {
    let bad = |why: &str| {
        format!(
            "--link {spec}: {why}; give HOP:delay=DURATION[:jitter=DURATION][:rate=SIZE] with HOP mta, sink or mta-mta, e.g. mta:delay=50ms"
        )
    };
    let mut parts = spec.split(':');
    let hop = match parts.next().unwrap_or_default() {
        "mta" => Hop::Mta,
        "sink" => Hop::Sink,
        "mta-mta" => Hop::MtaMta,
        other => return Err(bad(&format!("no hop {other:?}"))),
    };
    let mut shape = LinkShape {
        hop,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        rate_bytes_s: None,
    };
    for part in parts {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| bad(&format!("{part:?} is not KEY=VALUE")))?;
        match key {
            "delay" => shape.delay = latency(value).map_err(|e| bad(&e))?,
            "jitter" => shape.jitter = latency(value).map_err(|e| bad(&e))?,
            "rate" => {
                let r = units::size(value).map_err(|e| bad(&e))?;
                if r == 0 {
                    return Err(bad("a rate of 0 moves nothing"));
                }
                shape.rate_bytes_s = Some(r as u64);
            }
            other => return Err(bad(&format!("no setting {other:?}"))),
        }
    }
    if !shape.jitter.is_zero() && shape.delay.is_zero() {
        return Err(bad("a jitter varies a delay; give delay= too"));
    }
    if shape.jitter > shape.delay {
        return Err(bad("the jitter is larger than the delay"));
    }
    if shape.delay.is_zero() && shape.rate_bytes_s.is_none() {
        return Err(bad("nothing to shape"));
    }
    Ok(shape)
}

/// The longest delay or jitter a link takes: a slow satellite hop is 0.6 s each way.
const LONGEST: Duration = Duration::from_secs(10);

/// A link's delay or jitter: with its unit (a bare `50` would be 50 s, never what a
/// network delay means) and at most [`LONGEST`].
fn latency(value: &str) -> Result<Duration, String> {
    if !value
        .trim_end()
        .ends_with(|c: char| c.is_ascii_alphabetic())
    {
        return Err(format!("{value:?} has no unit; write e.g. 50ms or 1s"));
    }
    let d = units::duration(value)?;
    if d > LONGEST {
        return Err(format!(
            "{value} is longer than any network's delay ({}s at most); write e.g. 50ms",
            LONGEST.as_secs()
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_parsed_and_bad_ones_named() {
        let l = link("mta:delay=50ms:jitter=5ms:rate=1M").expect("parse");
        assert_eq!(
            l,
            LinkShape {
                hop: Hop::Mta,
                delay: Duration::from_millis(50),
                jitter: Duration::from_millis(5),
                rate_bytes_s: Some(1 << 20),
            }
        );
        assert_eq!(
            link("sink:rate=10k").map(|l| (l.hop, l.delay)),
            Ok((Hop::Sink, Duration::ZERO))
        );
        assert_eq!(
            link("mta-mta:delay=20ms").map(|l| (l.hop, l.delay)),
            Ok((Hop::MtaMta, Duration::from_millis(20)))
        );
        for (spec, why) in [
            ("mx:delay=5ms", "no hop \"mx\""),
            ("mta", "nothing to shape"),
            ("mta:delay", "is not KEY=VALUE"),
            ("mta:loss=1%", "no setting \"loss\""),
            ("mta:delay=5ms:jitter=10ms", "jitter is larger"),
            (
                "mta-mta:jitter=5ms",
                "a jitter varies a delay; give delay= too",
            ),
            ("mta:rate=0", "rate of 0"),
            ("mta:delay=50", "has no unit"),
            ("mta:delay=1h", "longer than any network's delay"),
        ] {
            let e = link(spec).expect_err(spec);
            assert!(
                e.starts_with(&format!("--link {spec}: ")) && e.contains(why),
                "{spec}: expected {why:?}, got {e}"
            );
        }
    }
}
