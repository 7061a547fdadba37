//! The test DNS's zones and fault rules from their flags: `dns`'s, and the relay's
//! `--dns-domains`/`--dns-rule`.

use std::net::IpAddr;

use crate::cli::args::ZoneArgs;
use crate::dns::faults::{Faults, parse_rule};
use crate::dns::spec::{Synthetic, expand_domains};

/// The synthetic zones of `domains` over `addresses`, with `z`'s details.
pub fn synthetic(domains: &str, addresses: Vec<IpAddr>, z: &ZoneArgs) -> Result<Synthetic, String> {
    let ttl = crate::units::duration(&z.zone_ttl)
        .map_err(super::flagged("--zone-ttl"))?
        .as_secs();
    let ttl = u32::try_from(ttl).map_err(|_| format!("--zone-ttl {}: too long", z.zone_ttl))?;
    let dkim = z
        .dkim_txt
        .as_deref()
        .map(|p| {
            let text = std::fs::read(p)
                .map_err(|e| format!("--dkim-txt {}: cannot read it: {e}", p.display()))?;
            crate::sink::dkim::record_of(&text)
                .map(|r| (z.dkim_txt_selector.clone(), r))
                .map_err(|why| format!("--dkim-txt {}: {why}", p.display()))
        })
        .transpose()?;
    Ok(Synthetic {
        domains: expand_domains(domains)?,
        mx_per_domain: z.mx_per_domain,
        addresses,
        dkim,
        ttl,
        no_mx: z.no_mx,
    })
}

/// Parses the values of `flag` (`relay --dns-rule`, `dns --rule`).
pub fn faults(flag: &str, rules: &[String]) -> Result<Faults, String> {
    Ok(Faults {
        rules: rules
            .iter()
            .map(|r| parse_rule(flag, r))
            .collect::<Result<_, _>>()?,
    })
}
