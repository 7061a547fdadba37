//! DKIM signing of every generated message (seed 003 compared an MTA that signs with one
//! that does not): the key is loaded once, each message is signed as it is built — its
//! headers and body hashed, the signature made — with Stalwart's mail-auth on ring. The
//! CPU time spent signing is counted (the thread's own clock, not the wall clock, which a
//! busy machine stretches), so that its cost per message is in the results.

use std::sync::atomic::{AtomicU64, Ordering};

use mail_auth::common::crypto::{Ed25519Key, RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{DkimSigner, Done};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;

/// The headers signed, when the message has them (RFC 6376 §5.4.1's recommendation).
const SIGNED: [&str; 6] = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
];

/// A loaded signing key of either algorithm DKIM allows.
enum Key {
    Rsa(DkimSigner<RsaKey<Sha256>, Done>),
    Ed25519(DkimSigner<Ed25519Key, Done>),
}

/// Signs messages with one key, for one domain and selector, and counts what that costs.
pub struct Signer {
    key: Key,
    /// Messages signed.
    signed: AtomicU64,
    /// CPU nanoseconds spent signing them.
    nanos: AtomicU64,
    /// Messages the signing library failed on.
    failed: AtomicU64,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("algorithm", &self.algorithm())
            .finish()
    }
}

/// What signing has cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignCost {
    /// Messages signed.
    pub signed: u64,
    /// CPU nanoseconds spent.
    pub nanos: u64,
    /// Messages left unsigned.
    pub failed: u64,
}

impl Signer {
    /// Loads a PEM private key (PKCS#8 RSA or Ed25519, or PKCS#1 RSA) from `pem`.
    /// `source` names it in errors.
    pub fn new(pem: &[u8], domain: &str, selector: &str, source: &str) -> Result<Signer, String> {
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
            format!("--dkim-key {source}: not a PEM private key ({e}); make one with `openssl genpkey -algorithm ed25519` or `-algorithm rsa`")
        })?;
        // OpenSSL writes Ed25519 keys as PKCS#8 v1 (no public key), which ring reads only as
        // "maybe unchecked".
        let key = match Ed25519Key::from_pkcs8_maybe_unchecked_der(der.secret_der()) {
            Ok(k) => Key::Ed25519(
                DkimSigner::from_key(k)
                    .domain(domain)
                    .selector(selector)
                    .headers(SIGNED),
            ),
            Err(_) => {
                let k = RsaKey::<Sha256>::from_key_der(der).map_err(|e| {
                    format!("--dkim-key {source}: neither an Ed25519 nor an RSA key ({e})")
                })?;
                Key::Rsa(
                    DkimSigner::from_key(k)
                        .domain(domain)
                        .selector(selector)
                        .headers(SIGNED),
                )
            }
        };
        Ok(Signer {
            key,
            signed: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// True for keys whose signature takes long enough (RSA: most of a millisecond) to
    /// hold up other connections on the same thread.
    pub fn is_slow(&self) -> bool {
        matches!(self.key, Key::Rsa(_))
    }

    /// `ed25519-sha256` or `rsa-sha256`.
    pub fn algorithm(&self) -> &'static str {
        match self.key {
            Key::Rsa(_) => "rsa-sha256",
            Key::Ed25519(_) => "ed25519-sha256",
        }
    }

    /// The DKIM-Signature header (with its CRLF) for the message made of `parts`, or
    /// nothing when the signing library fails (counted).
    pub fn sign(&self, parts: &[&[u8]]) -> Option<String> {
        let t0 = crate::stats::cpu::thread_ns();
        // The streaming signer takes the parts as they are (the body in two pieces, a
        // header split anywhere); `sign_chained` hashes only the last part's body.
        let sig = match &self.key {
            Key::Rsa(s) => {
                let mut st = s.sign_streaming();
                parts.iter().for_each(|p| st.write(p));
                st.finish()
            }
            Key::Ed25519(s) => {
                let mut st = s.sign_streaming();
                parts.iter().for_each(|p| st.write(p));
                st.finish()
            }
        };
        self.nanos.fetch_add(
            crate::stats::cpu::thread_ns().saturating_sub(t0),
            Ordering::Relaxed,
        );
        match sig {
            Ok(sig) => {
                self.signed.fetch_add(1, Ordering::Relaxed);
                Some(sig.to_header())
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The cost so far (a run subtracts what it found at its start).
    pub fn cost(&self) -> SignCost {
        SignCost {
            signed: self.signed.load(Ordering::Relaxed),
            nanos: self.nanos.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

impl SignCost {
    /// What was spent since `before`.
    pub fn since(&self, before: &SignCost) -> SignCost {
        SignCost {
            signed: self.signed - before.signed.min(self.signed),
            nanos: self.nanos.saturating_sub(before.nanos),
            failed: self.failed.saturating_sub(before.failed),
        }
    }

    /// Mean CPU microseconds per signed message.
    pub fn mean_us(&self) -> f64 {
        if self.signed == 0 {
            0.0
        } else {
            self.nanos as f64 / self.signed as f64 / 1000.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ed25519 key made by `openssl genpkey -algorithm ed25519`.
    pub(crate) const ED25519_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIDT2fFR+apY40c+JVK/XYnTUMfmv+vbF7jk9Ddl1+L3n
-----END PRIVATE KEY-----
";

    #[test]
    fn an_ed25519_key_signs_with_the_headers_asked_and_counts_the_cost() {
        let s = Signer::new(ED25519_PEM.as_bytes(), "example.org", "sel", "test").expect("key");
        assert_eq!(s.algorithm(), "ed25519-sha256");
        let msg: &[u8] = b"From: a@example.org\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nbody\r\n";
        let h = s.sign(&[&msg[..20], &msg[20..]]).expect("signed");
        assert!(h.starts_with("DKIM-Signature: "), "{h}");
        assert!(h.ends_with("\r\n"), "{h:?}");
        for tag in [
            "a=ed25519-sha256",
            "d=example.org",
            "s=sel",
            "h=",
            "From",
            "bh=",
        ] {
            assert!(h.contains(tag), "{tag} missing in {h}");
        }
        let c = s.cost();
        assert_eq!((c.signed, c.failed), (1, 0));
        assert!(c.nanos > 0 && c.mean_us() > 0.0);
        s.sign(&[msg]).expect("signed again");
        assert_eq!(s.cost().since(&c).signed, 1, "cost since a snapshot");
    }

    #[test]
    fn a_file_that_is_no_key_is_one_clear_error() {
        let e = Signer::new(b"hello", "d", "s", "k.pem").expect_err("no key");
        assert!(
            e.starts_with("--dkim-key k.pem: not a PEM private key"),
            "{e}"
        );
    }
}
