//! A DKIM-signing milter for a lab MTA, so that "what does signing cost this MTA" is one
//! flag: OpenDKIM from Debian's package with its own configuration, key and tables in the
//! lab instance's directory, on a free loopback port, running as nobody. The MTA hands it
//! every message before queueing (Postfix: `smtpd_milters`); it is started before the MTA
//! and stopped with it, and its process is observed with the MTA's.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::host::{self, io};
use super::{DkimSigning, LabError};

const OPENDKIM: &str = "/usr/sbin/opendkim";

/// Checks that OpenDKIM is installed; the error says how to fix it.
pub fn check() -> Result<(), String> {
    if Path::new(OPENDKIM).exists() {
        Ok(())
    } else {
        Err("--mta-dkim-key: OpenDKIM is not installed; run scripts/install-deps.sh (or apt-get install opendkim)".into())
    }
}

/// The kinds of key Debian 12's OpenDKIM (2.11.0~beta2, built with OpenSSL 3) signs with.
/// It reads the key as PEM or DER, but signs with one algorithm, `SignatureAlgorithm`
/// (rsa-sha256 unless told): given an Ed25519 key and no setting, it took the key for RSA,
/// failed, and answered every message `451 4.7.0 resource unavailable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA (PKCS#1 `BEGIN RSA PRIVATE KEY`, or PKCS#8): rsa-sha256.
    Rsa,
    /// Ed25519 (PKCS#8 `BEGIN PRIVATE KEY`, as `openssl genpkey -algorithm ed25519` writes
    /// it): ed25519-sha256 (RFC 8463).
    Ed25519,
}

impl KeyKind {
    /// OpenDKIM's `SignatureAlgorithm` for it.
    pub fn algorithm(self) -> &'static str {
        match self {
            KeyKind::Rsa => "rsa-sha256",
            KeyKind::Ed25519 => "ed25519-sha256",
        }
    }
}

/// What works, for the line that refuses another key.
const KEYS_THAT_WORK: &str = "OpenDKIM signs with an unencrypted PEM RSA key (openssl genrsa -out dkim.pem 2048) or Ed25519 key (openssl genpkey -algorithm ed25519 -out dkim.pem)";

/// The kind of the PEM private key `pem`, or why OpenDKIM cannot sign with it (one line,
/// naming what works; `file` names the key).
pub fn key_kind(pem: &[u8], file: &str) -> Result<KeyKind, String> {
    use base64::Engine;
    let text = String::from_utf8_lossy(pem);
    let refuse = |what: &str| format!("--mta-dkim-key {file}: {what}; {KEYS_THAT_WORK}");
    let Some(label) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
    else {
        return Err(refuse("not a PEM key"));
    };
    match label {
        "RSA PRIVATE KEY" => return Ok(KeyKind::Rsa),
        "PRIVATE KEY" => {}
        "ENCRYPTED PRIVATE KEY" => {
            return Err(refuse("an encrypted key, which OpenDKIM cannot read"));
        }
        other => {
            return Err(refuse(&format!(
                "a {other}, not a private key OpenDKIM reads"
            )));
        }
    }
    let body: String = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN "))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END "))
        .map(str::trim)
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| refuse("its PEM body is not base64"))?;
    // The algorithm's object identifier in the PKCS#8 structure, DER-encoded.
    let has = |oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
    if has(&[0x06, 0x03, 0x2b, 0x65, 0x70]) {
        Ok(KeyKind::Ed25519)
    } else if has(&[
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
    ]) {
        Ok(KeyKind::Rsa)
    } else if has(&[0x06, 0x03, 0x2b, 0x65, 0x71]) {
        Err(refuse("an Ed448 key, which DKIM does not define"))
    } else if has(&[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]) {
        Err(refuse(
            "an elliptic-curve (ECDSA) key, which DKIM does not define",
        ))
    } else {
        Err(refuse("a key of an algorithm OpenDKIM does not sign with"))
    }
}

/// A running OpenDKIM; stopped on drop.
#[derive(Debug)]
pub struct Milter {
    /// Where the MTA reaches it.
    pub addr: SocketAddr,
    /// Its pid file (the process observed as part of the system under test).
    pub pid_file: PathBuf,
}

impl Milter {
    /// Starts OpenDKIM signing every message with `s`, its files in `dir`.
    pub fn start(dir: &Path, s: &DkimSigning) -> Result<Milter, LabError> {
        check().map_err(LabError::Failed)?;
        let (uid, gid) = host::nobody()?;
        let key = dir.join("dkim.key");
        let pem = std::fs::read(&s.key).map_err(|e| {
            LabError::Setting(format!(
                "--mta-dkim-key {}: cannot read it: {e}",
                s.key.display()
            ))
        })?;
        let kind = key_kind(&pem, &s.key.display().to_string()).map_err(LabError::Setting)?;
        std::fs::write(&key, &pem).map_err(|e| io("write OpenDKIM's key", e))?;
        host::set_mode(&key, 0o600);
        host::chown(&key, uid, gid)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], host::free_port()?));
        let milter = Milter {
            addr,
            pid_file: dir.join("opendkim.pid"),
        };
        let d = dir.display();
        let write = |name: &str, text: String| {
            std::fs::write(dir.join(name), text).map_err(|e| io("write OpenDKIM's files", e))
        };
        // Every sender signed with the one key; messages from loopback are the lab's own
        // (InternalHosts' default), so OpenDKIM signs them.
        write(
            "keytable",
            format!("lab {}:{}:{}\n", s.domain, s.selector, key.display()),
        )?;
        write("signingtable", "* lab\n".into())?;
        write(
            "opendkim.conf",
            format!(
                "Syslog no
Mode s
Socket inet:{port}@127.0.0.1
PidFile {d}/opendkim.pid
UserID nobody:nogroup
KeyTable file:{d}/keytable
SigningTable refile:{d}/signingtable
Canonicalization relaxed/relaxed
SignatureAlgorithm {algorithm}
RequireSafeKeys false
Background yes
",
                port = addr.port(),
                algorithm = kind.algorithm()
            ),
        )?;
        let out = super::command::run(
            Command::new(OPENDKIM)
                .arg("-x")
                .arg(dir.join("opendkim.conf")),
            super::command::SETUP,
            "opendkim",
        )
        .map_err(|e| LabError::Failed(format!("lab: {e}")))?;
        if !out.status.success() {
            return Err(LabError::Setting(format!(
                "--mta-dkim-key: OpenDKIM refused to start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                drop(milter);
                return Err(LabError::Failed(
                    "lab: OpenDKIM started but does not listen".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(milter)
    }

    /// The MTA settings that hand every message to it (Postfix's names); a milter that
    /// fails makes the MTA answer 4xx instead of relaying unsigned mail.
    pub fn postfix_settings(&self) -> String {
        format!(
            "smtpd_milters = inet:{}\nmilter_default_action = tempfail\n",
            self.addr
        )
    }
}

impl Drop for Milter {
    fn drop(&mut self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            return;
        };
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PEM of `der`.
    fn pem(label: &str, der: &[u8]) -> Vec<u8> {
        use base64::Engine;
        let b = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN {label}-----\n{b}\n-----END {label}-----\n").into_bytes()
    }

    #[test]
    fn keys_are_told_apart_by_their_algorithm_and_others_refused_naming_what_works() {
        // `openssl genpkey -algorithm ed25519`'s PKCS#8 header, and ed448's.
        let ed25519 = [
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70,
        ];
        let ed448 = [
            0x30, 0x47, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x71,
        ];
        let rsa = [
            0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
        ];
        assert_eq!(
            key_kind(&pem("PRIVATE KEY", &ed25519), "k"),
            Ok(KeyKind::Ed25519)
        );
        assert_eq!(key_kind(&pem("PRIVATE KEY", &rsa), "k"), Ok(KeyKind::Rsa));
        assert_eq!(
            key_kind(&pem("RSA PRIVATE KEY", &[1]), "k"),
            Ok(KeyKind::Rsa)
        );
        assert_eq!(
            key_kind(&pem("PRIVATE KEY", &ed448), "k.pem"),
            Err(format!(
                "--mta-dkim-key k.pem: an Ed448 key, which DKIM does not define; {KEYS_THAT_WORK}"
            ))
        );
        for bad in [
            pem("ENCRYPTED PRIVATE KEY", &[1]),
            pem("OPENSSH PRIVATE KEY", &[1]),
            b"not pem".to_vec(),
        ] {
            let e = key_kind(&bad, "k").expect_err("refused");
            assert!(e.ends_with(KEYS_THAT_WORK) && !e.contains('\n'), "{e}");
        }
    }
}
