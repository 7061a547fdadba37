//! Issue 26: `mailbench dns` answers as an authoritative server must — the same zone files
//! (and the synthetic zones, written out as the equivalent files) served by NSD, Debian's
//! package unpacked by `scripts/install-deps.sh --for-tests`, and both asked the same
//! questions by dig (BIND's client): every record type an MTA asks for, CNAME chains,
//! referrals, wildcards, empty non-terminals, negative answers, truncation, EDNS (DO,
//! version 1), over UDP and TCP, with RD set and clear. The replies are compared section by
//! section; the differences the RFCs allow are listed in [`allowed`] with their reason.
//! Every question goes to mailbench twice, so that a reply from its cache is checked too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{TempDir, Terminated, free_port, mailbench, require};

/// A mail administrator's zone: every case of RFC 1034 §4.3.2 and every record an MTA
/// asks for, written with the master-file features of RFC 1035 §5.1.
const EXAMPLE: &str = r#"$ORIGIN example.
$TTL 3600
@   IN  SOA ns1.example. hostmaster.example. (
            2024010101 ; serial
            7200       ; refresh
            900        ; retry
            1209600    ; expire
            300 )      ; negative TTL: 300 < 3600
@       NS      ns1
@       NS      ns2.example.
ns1     A       192.0.2.53
ns2     A       192.0.2.54
@       MX      10 mx1
@       MX      20 mx2.example.
mx1     A       192.0.2.10
        AAAA    2001:db8::10
mx2 600 IN A    192.0.2.11
@       TXT     "v=spf1 mx ip4:192.0.2.0/24 -all"
sel1._domainkey IN TXT ( "v=DKIM1; k=rsa; "
        "p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAv6Zw0nS5u2mWq5H7ZyG2m8g3c0a6JfB3r1Qz"
        "Yt9d6hYpP1eJ3vF0q2oYl5m7xX8kR4sT1uW9bC3dE6fG0hI2jK4lM6nO8pQ0rS2tU4vW6xY8zA0bC2dE4"
        "fG6hI8jK0lM2nO4pQ6rS8tU0vW2xY4zA6bC8dE0fG2hI4jK6lM8nO0pQ2rS4tU6vW8xY0zA2bC4dE6fG8"
        "hI0jK2lM4nO6pQ8rS0tU2vW4xY6zA8bC0dE2fG4hI6jK8lM0nO2pQ4rS6tU8vW0xY2zA4bC6dE8fG0hI2"
        "jK4lM6nO8pQ0rS2tU4vW6xY8zA0bC2dE4fG6hI8jK0lM2nO4pQ6rS8tU0vW2xY4zA6bC8dE0fG2hI4jK6"
        "lM8nO0pQ2rS4tU6vW8xY0zA2bC4dE6QIDAQAB" )
ed._domainkey 300 IN TXT "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
_dmarc  TXT     "v=DMARC1; p=reject; rua=mailto:dmarc@example; ruf=mailto:forensic@example"
_mta-sts TXT    "v=STSv1; id=20240101T000000;"
mta-sts A       192.0.2.20
_smtp._tls TXT  "v=TLSRPTv1; rua=mailto:tls-reports@example"
_25._tcp.mx1 TLSA 3 1 1 0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef
_submission._tcp SRV 0 1 587 mx1
_imaps._tcp SRV 0 1 993 mx2.example.
@       CAA     0 issue "letsencrypt.org"
@       CAA     0 iodef "mailto:ca@example"
nullmx  MX      0 .
nullmx  TXT     "v=spf1 -all"
www     CNAME   @
alias   CNAME   mx1
chain   CNAME   alias
dangling CNAME  nowhere
outside CNAME   mail.elsewhere.net.
cross   CNAME   mx.second.test.
*.wild  TXT     "wildcard text"
*.wild  MX      10 mx1
exists.wild A   192.0.2.30
a.ent.wild A    192.0.2.31
*.cn    CNAME   mx1
child   NS      ns.child
child   NS      ns.elsewhere.net.
ns.child A      192.0.2.40
esc     TXT     "semi;colon" "quote\"d" "dec\065\066" plain\032word
multi   TXT     "one" "two" "three"
case    TXT     "MiXeD CaSe"
oneline TXT ( "in parentheses" ) ; and the next record is still read
after   A       192.0.2.60
big     TXT     "big one 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
big     TXT     "big two 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
big     TXT     "big three 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
"#;

/// A second zone, for a CNAME chain that crosses zones of the same server.
const SECOND: &str = "$ORIGIN second.test.\n$TTL 300\n@ SOA ns.second.test. h.second.test. 7 3600 600 86400 60\n@ NS ns\nns A 192.0.2.70\nmx A 192.0.2.71\n@ MX 5 mx\n";

/// The reverse zone of 192.0.2.0/24.
const REVERSE: &str = "$ORIGIN 2.0.192.in-addr.arpa.\n$TTL 86400\n@ SOA ns1.example. hostmaster.example. 1 3600 600 86400 3600\n@ NS ns1.example.\n10 PTR mx1.example.\n11 PTR mx2.example.\n";

/// One question and how it is sent.
#[derive(Debug, Clone)]
struct Question {
    name: String,
    qtype: &'static str,
    tcp: bool,
    /// EDNS (version, DO), or none.
    edns: Option<(u8, bool)>,
    rd: bool,
}

impl Question {
    /// dig's options for this question.
    fn dig_args(&self) -> Vec<String> {
        let mut a = vec![self.name.clone(), self.qtype.to_string()];
        a.push(if self.tcp { "+tcp" } else { "+notcp" }.into());
        a.push(if self.rd { "+rec" } else { "+norec" }.into());
        match self.edns {
            None => a.push("+noedns".into()),
            Some((v, dnssec_ok)) => {
                a.push(format!("+edns={v}"));
                a.push(if dnssec_ok { "+dnssec" } else { "+nodnssec" }.into());
            }
        }
        a.extend(["+nocookie", "+noadflag", "+ignore", "+noednsneg"].map(String::from));
        a
    }
}

impl std::fmt::Display for Question {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dig {}", self.dig_args().join(" "))
    }
}

/// A reply as dig prints it, section by section.
#[derive(Debug, Clone, Default, PartialEq)]
struct Reply {
    status: String,
    flags: Vec<String>,
    /// dig's EDNS line (version, flags, payload size), if the reply had an OPT.
    edns: Option<String>,
    answer: Vec<String>,
    authority: Vec<String>,
    additional: Vec<String>,
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "    status {} flags {:?} edns {:?}",
            self.status, self.flags, self.edns
        )?;
        for (s, rs) in [
            ("answer", &self.answer),
            ("authority", &self.authority),
            ("additional", &self.additional),
        ] {
            for r in rs {
                writeln!(f, "    {s}: {r}")?;
            }
        }
        Ok(())
    }
}

/// Parses dig's output for several queries, one reply each.
fn parse(out: &str) -> Vec<Reply> {
    let mut replies = Vec::new();
    let mut section = "";
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix(";; ->>HEADER<<- ") {
            let status = rest
                .split("status: ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .unwrap_or("")
                .to_string();
            replies.push(Reply {
                status,
                ..Reply::default()
            });
            section = "";
            continue;
        }
        let Some(r) = replies.last_mut() else {
            continue;
        };
        if let Some(rest) = line.strip_prefix(";; flags: ") {
            let flags = rest.split(';').next().unwrap_or("");
            r.flags = flags.split_whitespace().map(String::from).collect();
        } else if let Some(rest) = line.strip_prefix("; EDNS: ") {
            r.edns = Some(rest.to_string());
        } else if line.starts_with(";; ANSWER SECTION") {
            section = "answer";
        } else if line.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
        } else if line.starts_with(";; ADDITIONAL SECTION") {
            section = "additional";
        } else if line.starts_with(';') || line.trim().is_empty() {
            if line.starts_with(";;") {
                section = "";
            }
        } else {
            let rr = line.split_whitespace().collect::<Vec<_>>().join(" ");
            match section {
                "answer" => r.answer.push(rr),
                "authority" => r.authority.push(rr),
                "additional" => r.additional.push(rr),
                _ => {}
            }
        }
    }
    replies
}

/// dig's replies from 127.0.0.1:`port` to `qs`, in order (one dig process for all).
fn ask(port: u16, qs: &[Question]) -> Vec<Reply> {
    let dig = require("dig").expect("dig: run scripts/install-deps.sh --for-tests");
    let mut cmd = Command::new(dig);
    cmd.args(["@127.0.0.1", "-p", &port.to_string(), "+tries=1", "+time=3"]);
    for q in qs {
        cmd.args(q.dig_args());
    }
    let out = cmd.output().expect("run dig");
    let replies = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        replies.len(),
        qs.len(),
        "one reply per question from port {port}; dig said:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    replies
}

/// The differences between NSD's reply and mailbench's that the RFCs allow, each with its
/// reason; applied to NSD's reply before the comparison. Nothing else may differ.
fn allowed(nsd: &Reply, mb: &Reply) -> Reply {
    let mut n = nsd.clone();
    // 1. NSD adds its zone's NS RRset to the authority section of positive answers, and
    //    the addresses of those name servers to the additional section. RFC 2181 §6.1 and
    //    RFC 1034 §4.3.2 make it optional ("may be added"); mailbench answers minimally,
    //    as BIND does with minimal-responses. Allowed only when mailbench's authority is
    //    empty, the answer is positive, and every extra record is that NS set or an
    //    address of one of its names.
    if !n.answer.is_empty() && mb.authority.is_empty() && n.status == "NOERROR" {
        let ns: Vec<String> = n
            .authority
            .iter()
            .filter(|r| r.split(' ').nth(3) == Some("NS"))
            .cloned()
            .collect();
        if !ns.is_empty() && ns.len() == n.authority.len() {
            let hosts: Vec<String> = ns
                .iter()
                .filter_map(|r| r.split(' ').nth(4).map(str::to_string))
                .collect();
            n.authority.clear();
            n.additional.retain(|r| {
                let owner = r.split(' ').next().unwrap_or("");
                let t = r.split(' ').nth(3).unwrap_or("");
                !(hosts.iter().any(|h| h == owner)
                    && matches!(t, "A" | "AAAA")
                    && !mb.additional.contains(r))
            });
        }
    }
    n
}

/// Compares the two replies section by section; the error shows the question and both.
fn compare(q: &Question, nsd: &Reply, mb: &Reply) -> Result<(), String> {
    let n = allowed(nsd, mb);
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    // The order of records within a section carries no meaning (RFC 2181 §5), except
    // that a CNAME chain is read from its start: the answer's order is compared as is.
    let same = n.status == mb.status
        && n.flags == mb.flags
        && n.edns == mb.edns
        && n.answer == mb.answer
        && sorted(&n.authority) == sorted(&mb.authority)
        && sorted(&n.additional) == sorted(&mb.additional);
    if same {
        Ok(())
    } else {
        Err(format!("{q}\n  nsd:\n{nsd}  mailbench:\n{mb}"))
    }
}

/// NSD's binary: unpacked by install-deps.sh, or the system's.
fn nsd_binary() -> PathBuf {
    let unpacked = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/nsd/usr/sbin/nsd");
    [unpacked, PathBuf::from("/usr/sbin/nsd")]
        .into_iter()
        .find(|p| p.exists())
        .expect("NSD: run scripts/install-deps.sh --for-tests (it unpacks Debian's nsd into target/peers)")
}

/// NSD serving `zones` (apex, file) on a free port of 127.0.0.1, in the foreground.
fn start_nsd(dir: &Path, zones: &[(&str, PathBuf)]) -> (Terminated, u16) {
    let port = free_port();
    let d = dir.display();
    let mut conf = format!(
        "server:\n  server-count: 1\n  username: \"\"\n  database: \"\"\n  zonelistfile: \"\"\n  \
         ip-address: 127.0.0.1@{port}\n  pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  \
         logfile: \"{d}/nsd.log\"\n  hide-version: yes\n  rrl-ratelimit: 0\n  zonesdir: \"{d}\"\n\
         remote-control:\n  control-enable: no\n"
    );
    for (apex, file) in zones {
        conf.push_str(&format!(
            "zone:\n  name: {apex}\n  zonefile: {}\n",
            file.display()
        ));
    }
    let path = dir.join("nsd.conf");
    std::fs::write(&path, conf).expect("write nsd.conf");
    let child = Command::new(nsd_binary())
        .args(["-d", "-c"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nsd");
    let nsd = Terminated(child);
    wait_ready(port, zones[0].0, &dir.join("nsd.log"));
    (nsd, port)
}

/// `mailbench dns` with `args`, and its port.
fn start_mailbench(args: &[&str]) -> (Terminated, u16) {
    let mut child = mailbench()
        .args(["dns", "-q", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailbench dns");
    let mut reader = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("dns says where it serves");
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("mailbench dns did not start: {line}"));
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    (Terminated(child), port)
}

/// Waits until the server on `port` answers `apex`'s SOA.
fn wait_ready(port: u16, apex: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let dig = require("dig").expect("dig");
    while Instant::now() < deadline {
        let out = Command::new(&dig)
            .args([
                "@127.0.0.1",
                "-p",
                &port.to_string(),
                "+short",
                "+tries=1",
                "+time=1",
                apex,
                "SOA",
            ])
            .output()
            .expect("dig");
        if !out.stdout.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "no answer on port {port} within 20 s; log: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Every (name, type) asked in three ways: UDP with EDNS and RD clear, TCP without EDNS
/// and RD set, UDP with EDNS and DO and RD set.
fn variants(pairs: &[(&str, &'static str)]) -> Vec<Question> {
    let mut qs = Vec::new();
    for (name, qtype) in pairs {
        for (tcp, edns, rd) in [
            (false, Some((0, false)), false),
            (true, None, true),
            (false, Some((0, true)), true),
        ] {
            qs.push(Question {
                name: name.to_string(),
                qtype,
                tcp,
                edns,
                rd,
            });
        }
    }
    qs
}

/// Asks both servers `qs` (mailbench twice) and returns every mismatch.
fn differences(nsd: u16, mb: u16, qs: &[Question]) -> Vec<String> {
    let from_nsd = ask(nsd, qs);
    let mut bad = Vec::new();
    for round in 0..2 {
        let from_mb = ask(mb, qs);
        for ((q, n), m) in qs.iter().zip(&from_nsd).zip(&from_mb) {
            if let Err(e) = compare(q, n, m) {
                bad.push(format!("(round {round}) {e}"));
            }
        }
    }
    bad
}

#[test]
fn a_mail_zone_file_is_answered_as_nsd_answers_it() {
    let dir = TempDir::new("dns-nsd");
    let mut zones = Vec::new();
    for (apex, text) in [
        ("example", EXAMPLE),
        ("second.test", SECOND),
        ("2.0.192.in-addr.arpa", REVERSE),
    ] {
        let path = dir.0.join(format!("{apex}.zone"));
        std::fs::write(&path, text).expect("write zone");
        zones.push((apex, path));
    }
    let (_nsd, nsd_port) = start_nsd(&dir.0, &zones);
    let mut args = Vec::new();
    for (_, p) in &zones {
        args.push("--zone-file".to_string());
        args.push(p.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_mb, mb_port) = start_mailbench(&args);
    let mut qs = variants(&[
        // What an MTA asks: MX and the exchangers' addresses, a null MX, SPF, DKIM, DMARC,
        // MTA-STS, TLS-RPT, DANE, SRV, CAA, PTR.
        ("example", "MX"),
        ("mx1.example", "A"),
        ("mx1.example", "AAAA"),
        ("mx2.example", "A"),
        ("nullmx.example", "MX"),
        ("nullmx.example", "TXT"),
        ("example", "TXT"),
        ("sel1._domainkey.example", "TXT"),
        ("ed._domainkey.example", "TXT"),
        ("_dmarc.example", "TXT"),
        ("_mta-sts.example", "TXT"),
        ("mta-sts.example", "A"),
        ("_smtp._tls.example", "TXT"),
        ("_25._tcp.mx1.example", "TLSA"),
        ("_submission._tcp.example", "SRV"),
        ("_imaps._tcp.example", "SRV"),
        ("example", "CAA"),
        ("10.2.0.192.in-addr.arpa", "PTR"),
        ("example", "NS"),
        ("example", "SOA"),
        // CNAMEs: to the apex, a chain, dangling, out of our zones, across our zones.
        ("www.example", "MX"),
        ("alias.example", "A"),
        ("alias.example", "CNAME"),
        ("chain.example", "AAAA"),
        ("dangling.example", "A"),
        ("outside.example", "A"),
        ("cross.example", "MX"),
        // Wildcards, and the names they must not match.
        ("anything.wild.example", "TXT"),
        ("deeper.name.wild.example", "MX"),
        ("anything.wild.example", "A"),
        ("exists.wild.example", "TXT"),
        ("ent.wild.example", "TXT"),
        ("b.ent.wild.example", "TXT"),
        ("x.cn.example", "A"),
        // Delegation: at, below, and the glue's own name.
        ("child.example", "A"),
        ("www.child.example", "MX"),
        ("ns.child.example", "A"),
        // Empty non-terminals and names that do not exist.
        ("_domainkey.example", "TXT"),
        ("_tcp.example", "SRV"),
        ("nope._domainkey.example", "TXT"),
        ("nope.example", "MX"),
        ("mx1.example", "TXT"),
        ("9.2.0.192.in-addr.arpa", "PTR"),
        // Master-file reading: escapes, several strings, case, one-line parentheses.
        ("esc.example", "TXT"),
        ("multi.example", "TXT"),
        ("case.example", "TXT"),
        ("oneline.example", "TXT"),
        ("after.example", "A"),
        // Not ours.
        ("elsewhere.net", "A"),
    ]);
    // A reply bigger than 512 bytes without EDNS (truncated over UDP, whole over TCP and
    // with EDNS), and an EDNS version mailbench does not speak.
    for (tcp, edns) in [(false, None), (true, None), (false, Some((0, false)))] {
        qs.push(Question {
            name: "big.example".into(),
            qtype: "TXT",
            tcp,
            edns,
            rd: false,
        });
    }
    for tcp in [false, true] {
        qs.push(Question {
            name: "example".into(),
            qtype: "MX",
            tcp,
            edns: Some((1, false)),
            rd: false,
        });
    }
    assert!(qs.len() >= 100, "{} questions", qs.len());
    let bad = differences(nsd_port, mb_port, &qs);
    assert!(
        bad.is_empty(),
        "{} of {} answers differ from NSD's:\n{}",
        bad.len(),
        2 * qs.len(),
        bad.join("\n")
    );
}

#[test]
fn the_synthetic_zones_are_answered_as_nsd_answers_their_zone_files() {
    let dir = TempDir::new("dns-nsd-synth");
    // A DKIM record longer than one TXT string (255 bytes).
    let key = format!("v=DKIM1; k=rsa; p={}", "MIIBIjAN".repeat(50));
    let dkim = dir.0.join("dkim.txt");
    std::fs::write(&dkim, &key).expect("write");
    let dkim = dkim.display().to_string();
    let (_mb, mb_port) = start_mailbench(&[
        "--domains",
        "3",
        "--mx-address",
        "127.0.2.1,::1",
        "--mx-per-domain",
        "2",
        "--dkim-txt",
        &dkim,
        "--zone-ttl",
        "120s",
    ]);
    // The same zones written by hand as `--help` describes them: per domain dK, an SOA
    // (negative TTL the record TTL), NS ns.dK, MX 10 mx1 and 20 mx2, mxJ's address the
    // (K + J - 1) mod 2-th given, an SPF TXT, the DKIM key at mailbench._domainkey in
    // 255-byte strings; reverse zones with a PTR to the first host given each address.
    let chunks: Vec<String> = key
        .as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect();
    let addrs = ["A 127.0.2.1", "AAAA ::1"];
    let mut zones = Vec::new();
    for k in 0..3 {
        let apex = format!("d{k}.example.test");
        let text = format!(
            "$ORIGIN {apex}.\n$TTL 120\n@ SOA ns hostmaster 1 3600 600 86400 120\n@ NS ns\n\
             @ MX 10 mx1\n@ MX 20 mx2\nmx1 {}\nmx2 {}\n\
             @ TXT \"v=spf1 ip4:127.0.0.0/8 ip6:::1/128 -all\"\nmailbench._domainkey TXT {}\n",
            addrs[k % 2],
            addrs[(k + 1) % 2],
            chunks.join(" ")
        );
        zones.push((apex, text));
    }
    let v6 = "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa".to_string();
    zones.push((
        "2.0.127.in-addr.arpa".into(),
        "$ORIGIN 2.0.127.in-addr.arpa.\n$TTL 120\n@ SOA ns hostmaster 1 3600 600 86400 120\n1 PTR mx1.d0.example.test.\n".into(),
    ));
    zones.push((
        v6.clone(),
        format!("$ORIGIN {v6}.\n$TTL 120\n@ SOA ns hostmaster 1 3600 600 86400 120\n1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0 PTR mx2.d0.example.test.\n"),
    ));
    let mut files = Vec::new();
    for (apex, text) in &zones {
        let path = dir.0.join(format!("{apex}.zone"));
        std::fs::write(&path, text).expect("write zone");
        files.push((apex.as_str(), path));
    }
    let (_nsd, nsd_port) = start_nsd(&dir.0, &files);
    let v6ptr = format!("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.{v6}");
    let qs = variants(&[
        ("d1.example.test", "MX"),
        ("d2.example.test", "MX"),
        ("mx1.d1.example.test", "A"),
        ("mx1.d1.example.test", "AAAA"),
        ("mx2.d1.example.test", "AAAA"),
        ("d0.example.test", "TXT"),
        ("mailbench._domainkey.d2.example.test", "TXT"),
        ("_domainkey.d2.example.test", "TXT"),
        ("other._domainkey.d2.example.test", "TXT"),
        ("d0.example.test", "NS"),
        ("d0.example.test", "SOA"),
        ("nope.d1.example.test", "A"),
        ("1.2.0.127.in-addr.arpa", "PTR"),
        (&v6ptr, "PTR"),
        ("9.2.0.127.in-addr.arpa", "PTR"),
        ("example.test", "MX"),
    ]);
    let bad = differences(nsd_port, mb_port, &qs);
    assert!(
        bad.is_empty(),
        "{} of {} answers differ from NSD's:\n{}",
        bad.len(),
        2 * qs.len(),
        bad.join("\n")
    );
}
