//! Issue 40: the README's Ed25519 example for the lab MTA's DKIM signing
//! (`openssl genpkey -algorithm ed25519`, `--mta-dkim-key`) made Debian 12's OpenDKIM
//! refuse every message ("451 4.7.0 resource unavailable": it signs with rsa-sha256
//! unless told, and took the key for RSA). Now the lab tells it ed25519-sha256: every
//! message is signed, verified by mailbench's sink and, on the messages Postfix's own
//! smtp-sink stored, by dkimpy (Debian's python3-dkim), a verifier no one here wrote. A
//! key OpenDKIM cannot sign with is refused in one line naming what works.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mailbench::lab::{DkimSigning, LabOptions, MtaLogging, QueueKind};

use crate::util::{TempDir, describe, free_port, require, results, run, wait_until};

/// The README's key pair: `openssl genpkey -algorithm ALG -out dkim.pem && openssl pkey
/// -in dkim.pem -pubout -out dkim.pub`.
fn key_pair(dir: &Path, alg: &str) -> (PathBuf, PathBuf) {
    let (key, public) = (
        dir.join(format!("{alg}.pem")),
        dir.join(format!("{alg}.pub")),
    );
    let ok = Command::new("openssl")
        .args(["genpkey", "-algorithm", alg, "-out"])
        .arg(&key)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .status()
            .is_ok_and(|s| s.success());
    assert!(ok, "openssl made the {alg} key pair");
    (key, public)
}

/// The DKIM key record of an Ed25519 public key: RFC 8463's `p=` is the raw 32-byte key
/// (the last 32 bytes of its DER SubjectPublicKeyInfo).
fn ed25519_record(public: &Path) -> String {
    use base64::Engine;
    let out = Command::new("openssl")
        .args(["pkey", "-pubin", "-outform", "DER", "-in"])
        .arg(public)
        .output()
        .expect("openssl pkey");
    let raw = &out.stdout[out.stdout.len().saturating_sub(32)..];
    format!(
        "v=DKIM1; k=ed25519; p={}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// dkimpy's verdict on each message file in `dir` against `record` for any selector:
/// (verified, failed).
fn dkimpy(dir: &Path, record: &str) -> (usize, usize) {
    let script = format!(
        "import dkim, os, sys
record = {record:?}.encode()
ok = bad = 0
for name in os.listdir(sys.argv[1]):
    msg = open(os.path.join(sys.argv[1], name), 'rb').read()
    if dkim.verify(msg, dnsfunc=lambda name, timeout=5: record):
        ok += 1
    else:
        bad += 1
print(ok, bad)
"
    );
    let out = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .arg(dir)
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut n = text.split_whitespace().filter_map(|w| w.parse().ok());
    match (n.next(), n.next()) {
        (Some(ok), Some(bad)) => (ok, bad),
        _ => panic!(
            "dkimpy said: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Issue 40: `relay --lab postfix --mta-dkim-key` with the README's Ed25519 key delivers
/// every message, each passing the sink's check (`--dkim-verify` with the README's
/// public key) — before, OpenDKIM refused all of them with 451.
#[test]
fn the_readmes_ed25519_key_signs_every_message_the_sink_verifies() {
    if require("opendkim").is_none() {
        return;
    }
    let dir = TempDir::new("ed25519-dkim");
    let (key, public) = key_pair(&dir.0, "ed25519");
    let json = dir.0.join("r.json");
    let (k, p, j) = (
        key.display().to_string(),
        public.display().to_string(),
        json.display().to_string(),
    );
    let args = [
        "relay",
        "--lab",
        "postfix",
        "-n",
        "50",
        "-c",
        "4",
        "--size",
        "2k",
        "--mta-dkim-key",
        &k,
        "--dkim-verify",
        &p,
        "-q",
        "--json",
        &j,
    ];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let r = results(&json);
    assert_eq!(r["summary"]["delivered"], 50, "{:#}", r["summary"]);
    let v = &r["extra"]["dkim_verify"];
    assert_eq!(
        (
            v["pass"].as_u64(),
            v["fail"].as_u64(),
            v["unsigned"].as_u64()
        ),
        (Some(50), Some(0), Some(0)),
        "{v:#}"
    );
}

/// Issue 40: the messages a lab Postfix signed with an Ed25519 key, as Postfix's own
/// smtp-sink stored them, pass dkimpy's verification against the key's DNS record, and
/// their signatures say a=ed25519-sha256.
#[test]
fn dkimpy_verifies_what_the_lab_signed_with_an_ed25519_key() {
    if require("opendkim").is_none() || require("smtp-sink").is_none() {
        return;
    }
    let dir = TempDir::new("ed25519-dkimpy");
    let (key, public) = key_pair(&dir.0, "ed25519");
    let dump = dir.0.join("dump");
    std::fs::create_dir_all(&dump).expect("mkdir");
    // smtp-sink writes as nobody.
    let _ = Command::new("chmod").arg("777").arg(&dump).status();
    let port = free_port();
    let _sink = crate::util::Proc(
        Command::new("smtp-sink")
            .args(["-u", "nobody", "-d"])
            .arg(format!("{}/%M.", dump.display()))
            .arg(format!("127.0.0.1:{port}"))
            .arg("100")
            .spawn()
            .expect("start smtp-sink"),
    );
    assert!(wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    let lab = mailbench::lab::postfix::KIND
        .start(&LabOptions {
            hops: 1,
            queue: QueueKind::Tmpfs,
            settings: Vec::new(),
            limits: Default::default(),
            relay: ([127, 0, 0, 1], port).into(),
            relay_lmtp: false,
            starttls: false,
            hold: false,
            dkim: Some(DkimSigning {
                key,
                domain: "example.org".into(),
                selector: "mailbench".into(),
            }),
            dns: None,
            lookup: None,
            logging: MtaLogging::On,
            between: None,
        })
        .expect("the lab starts (tests run as root)");
    let entry = lab.entry().to_string();
    let args = ["send", "-q", "-n", "10", "-c", "2", "--size", "3k", &entry];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let files = || std::fs::read_dir(&dump).map_or(0, |rd| rd.count());
    assert!(
        wait_until(Duration::from_secs(30), || files() == 10),
        "10 messages stored, got {}",
        files()
    );
    drop(lab);
    for f in std::fs::read_dir(&dump).expect("dump").flatten() {
        let text = std::fs::read_to_string(f.path()).unwrap_or_default();
        assert!(
            text.contains("a=ed25519-sha256;") && text.contains("d=example.org;"),
            "an Ed25519 signature: {text}"
        );
    }
    assert_eq!(dkimpy(&dump, &ed25519_record(&public)), (10, 0));
}

/// A key OpenDKIM cannot sign with (Ed448: `openssl genpkey -algorithm ed448`) is refused
/// before anything starts, in one line naming what works, exit 1.
#[test]
fn a_key_opendkim_cannot_sign_with_is_refused_in_one_line() {
    if require("opendkim").is_none() {
        return;
    }
    let dir = TempDir::new("ed448-dkim");
    let (key, _) = key_pair(&dir.0, "ed448");
    let k = key.display().to_string();
    let args = ["relay", "--lab", "postfix", "-n", "5", "--mta-dkim-key", &k];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [format!(
            "mailbench: --mta-dkim-key {k}: an Ed448 key, which DKIM does not define; OpenDKIM signs with an unencrypted PEM RSA key (openssl genrsa -out dkim.pem 2048) or Ed25519 key (openssl genpkey -algorithm ed25519 -out dkim.pem)"
        )]
    );
}
