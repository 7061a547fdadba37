//! DKIM verification at the sink (`--dkim-verify`): every accepted message's signatures are
//! checked against the one public key given — as its DNS record (`v=DKIM1; k=…; p=…`) or as
//! a PEM public key — with Stalwart's mail-auth, and counted as passed, failed or unsigned.
//! The key stands in for DNS: no query is ever made, whatever d= and s= the signature names.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use mail_auth::common::parse::TxtRecordParser;
use mail_auth::common::verify::DomainKey;
use mail_auth::hickory_resolver::config::{ResolverConfig, ResolverOpts};
use mail_auth::{
    AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt,
};
use rustls_pki_types::SubjectPublicKeyInfoDer;
use rustls_pki_types::pem::PemObject;

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the raw key follows.
const ED25519_SPKI: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Checks signatures against one key and counts the outcomes.
pub struct Verifier {
    auth: MessageAuthenticator,
    key: OneKey,
    /// Messages with a signature that verified.
    pub pass: AtomicU64,
    /// Messages whose signatures all failed (wrong key, altered content, bad tags).
    pub fail: AtomicU64,
    /// Messages without a signature.
    pub unsigned: AtomicU64,
    nanos: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

/// The key record, answered for every `._domainkey` name asked.
struct OneKey(Txt);

impl ResolverCache<Box<str>, Txt> for OneKey {
    fn get<Q>(&self, _name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        Some(self.0.clone())
    }

    fn remove<Q>(&self, _name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        None
    }

    fn insert(&self, _key: Box<str>, _value: Txt, _valid_until: std::time::Instant) {}
}

impl Verifier {
    /// A verifier for the key in `text`: a DKIM DNS record or a PEM public key. `source`
    /// names it in errors.
    pub fn new(text: &[u8], source: &str) -> Result<Verifier, String> {
        let record = record_of(text).map_err(|why| format!("--dkim-verify {source}: {why}"))?;
        let key = DomainKey::parse(record.as_bytes())
            .map_err(|e| format!("--dkim-verify {source}: not a DKIM key record ({e})"))?;
        let auth = MessageAuthenticator::new(ResolverConfig::default(), ResolverOpts::default())
            .map_err(|e| format!("--dkim-verify: cannot set up the verifier: {e}"))?;
        Ok(Verifier {
            auth,
            key: OneKey(Txt::from(key)),
            pass: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            unsigned: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            first_failure: Mutex::new(None),
        })
    }

    /// Verifies one message and counts the outcome.
    pub async fn check(&self, message: &[u8]) {
        let t0 = crate::stats::cpu::thread_ns();
        let outcome = match AuthenticatedMessage::parse(message) {
            None => Err("the message does not parse".to_string()),
            Some(m) => {
                let out = self
                    .auth
                    .verify_dkim(Parameters::new(&m).with_txt_cache(&self.key))
                    .await;
                if out.is_empty() {
                    Ok(false)
                } else if out.iter().any(|o| *o.result() == DkimResult::Pass) {
                    Ok(true)
                } else {
                    Err(format!("{:?}", out[0].result()))
                }
            }
        };
        self.nanos.fetch_add(
            crate::stats::cpu::thread_ns().saturating_sub(t0),
            Ordering::Relaxed,
        );
        match outcome {
            Ok(true) => self.pass.fetch_add(1, Ordering::Relaxed),
            Ok(false) => self.unsigned.fetch_add(1, Ordering::Relaxed),
            Err(why) => {
                let mut first = self.first_failure.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(why);
                self.fail.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// Starts counting anew.
    pub fn reset(&self) {
        for c in [&self.pass, &self.fail, &self.unsigned, &self.nanos] {
            c.store(0, Ordering::Relaxed);
        }
        *self.first_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The counts for the results file (`extra.dkim_verify`).
    pub fn report(&self) -> serde_json::Value {
        let (pass, fail, unsigned) = (
            self.pass.load(Ordering::Relaxed),
            self.fail.load(Ordering::Relaxed),
            self.unsigned.load(Ordering::Relaxed),
        );
        let n = (pass + fail + unsigned).max(1);
        serde_json::json!({
            "pass": pass,
            "fail": fail,
            "unsigned": unsigned,
            "verify_cpu_us_mean": self.nanos.load(Ordering::Relaxed) as f64 / n as f64 / 1000.0,
            "first_failure": *self.first_failure.lock().unwrap_or_else(|p| p.into_inner()),
        })
    }
}

/// The DNS record of a key given as a record or as a PEM public key (also what the test
/// DNS server publishes for `--dkim-txt`).
pub fn record_of(text: &[u8]) -> Result<String, String> {
    let s = String::from_utf8_lossy(text);
    if s.contains("p=") && !s.contains("-----BEGIN") {
        // A record as published, possibly quoted in zone-file chunks.
        return Ok(s.replace(['"', '\n', '\r'], "").trim().to_string());
    }
    let spki = SubjectPublicKeyInfoDer::from_pem_slice(text).map_err(|e| {
        format!("neither a DKIM record (v=DKIM1; k=…; p=…) nor a PEM public key ({e}); make one with `openssl pkey -in KEY -pubout`")
    })?;
    let der = spki.as_ref();
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(match der.strip_prefix(&ED25519_SPKI[..]) {
        Some(raw) => format!("v=DKIM1; k=ed25519; p={}", b64.encode(raw)),
        None => format!("v=DKIM1; k=rsa; p={}", b64.encode(der)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::dkim::Signer;

    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIDT2fFR+apY40c+JVK/XYnTUMfmv+vbF7jk9Ddl1+L3n
-----END PRIVATE KEY-----
";
    /// `openssl pkey -in KEY -pubout` of the key above.
    const PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAVGSi3z4XmusAda4+FQfEohGm1idfqp6dVtGRzEhy3gQ=
-----END PUBLIC KEY-----
";
    /// Another key's public half.
    const OTHER: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAv8E1Q4YYLFYefH7JVbf649V2HMTaYQFffnD8VfBZ9WQ=
-----END PUBLIC KEY-----
";

    fn signed() -> Vec<u8> {
        let msg = b"From: a@example.org\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nbody\r\n";
        let s = Signer::new(KEY.as_bytes(), "example.org", "sel", "test").expect("key");
        // Split inside a header and inside the body, as the generator's parts may be.
        let mut out = s
            .sign(&[&msg[..25], &msg[25..60], &msg[60..]])
            .expect("signed")
            .into_bytes();
        out.extend_from_slice(msg);
        out
    }

    #[tokio::test]
    async fn a_signature_passes_with_its_key_and_fails_with_another() {
        let good = Verifier::new(PUBLIC.as_bytes(), "pub.pem").expect("verifier");
        good.check(&signed()).await;
        good.check(b"From: a@example.org\r\n\r\nunsigned\r\n").await;
        let r = good.report();
        assert_eq!(
            (
                r["pass"].as_u64(),
                r["fail"].as_u64(),
                r["unsigned"].as_u64()
            ),
            (Some(1), Some(0), Some(1)),
            "{r}"
        );
        let bad = Verifier::new(OTHER.as_bytes(), "other.pem").expect("verifier");
        bad.check(&signed()).await;
        let r = bad.report();
        assert_eq!(r["fail"], 1, "{r}");
        assert!(
            r["first_failure"].as_str().is_some_and(|s| !s.is_empty()),
            "{r}"
        );
    }

    #[tokio::test]
    async fn an_altered_body_fails_and_the_dns_record_form_works_too() {
        let b64 = PUBLIC.lines().nth(1).expect("line");
        // The record of the same key: its raw 32 bytes after the 12-byte SPKI prefix.
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("b64");
        let record = format!(
            "\"v=DKIM1; k=ed25519; \"\n\"p={}\"",
            base64::engine::general_purpose::STANDARD.encode(&der[12..])
        );
        let v = Verifier::new(record.as_bytes(), "record.txt").expect("verifier");
        let mut altered = signed();
        altered.extend_from_slice(b"one more line\r\n");
        v.check(&signed()).await;
        v.check(&altered).await;
        let r = v.report();
        assert_eq!(
            (r["pass"].as_u64(), r["fail"].as_u64()),
            (Some(1), Some(1)),
            "{r}"
        );
    }

    #[test]
    fn input_that_is_no_key_is_one_clear_error() {
        let Err(e) = Verifier::new(b"hello", "x.pem") else {
            panic!("no key");
        };
        assert!(
            e.starts_with("--dkim-verify x.pem: neither a DKIM record"),
            "{e}"
        );
    }
}
