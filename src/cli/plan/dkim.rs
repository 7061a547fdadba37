//! DKIM keys from files: the signer of `send`/`relay --dkim-key` and the verifier of
//! `--dkim-verify` (sink, and the relay's embedded sink).

use std::path::Path;
use std::sync::Arc;

use crate::cli::args::DkimArgs;
use crate::message::dkim::Signer;

/// The signer of `--dkim-key`, if given, and its part of the configuration record;
/// `from` (`--from`) gives the signing domain when `--dkim-domain` does not.
pub fn signer(a: &DkimArgs, from: &str) -> Result<Option<(Signer, serde_json::Value)>, String> {
    let Some(key) = &a.dkim_key else {
        return Ok(None);
    };
    let domain = match &a.dkim_domain {
        Some(d) => d.clone(),
        None => match from.rsplit_once('@') {
            Some((_, d)) if !d.contains('{') => d.to_string(),
            _ => {
                return Err(
                    "--dkim-key: give --dkim-domain (the domain of --from is not fixed)".into(),
                );
            }
        },
    };
    let pem = std::fs::read(key)
        .map_err(|e| format!("--dkim-key {}: cannot read it: {e}", key.display()))?;
    let signer = Signer::new(&pem, &domain, &a.dkim_selector, &key.display().to_string())?;
    let json = serde_json::json!({
        "algorithm": signer.algorithm(),
        "domain": domain,
        "selector": a.dkim_selector,
    });
    Ok(Some((signer, json)))
}

/// The DKIM verifier of `--dkim-verify FILE` (sink, and the relay's embedded sink).
pub fn verifier(path: &Path) -> Result<Arc<crate::sink::dkim::Verifier>, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("--dkim-verify {}: cannot read it: {e}", path.display()))?;
    crate::sink::dkim::Verifier::new(&text, &path.display().to_string()).map(Arc::new)
}
