//! Issue 14, `mailbench dns` and DNS in the relay benchmark: dig (BIND's client) resolves
//! MX, A, AAAA, TXT and PTR against the test server over UDP, TCP and IPv6 and gets what
//! the spec says, REFUSED outside its zones; fault rules show with their share and delay;
//! a lab Postfix resolves 50 domains through it from its chroot (never the machine's
//! resolver), and a SERVFAIL window defers mail that is delivered once it is lifted.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::lab_relay as relay;
use crate::util::{
    TempDir, Terminated, mailbench, refused_in_one_line, require, results, wait_until,
};

/// A running `mailbench dns` on a free port of 127.0.0.1 (and of ::1 when asked).
struct Dns {
    proc: Terminated,
    /// What it printed: "serving N zones on 127.0.0.1:P[, [::1]:Q] (udp and tcp)".
    line: String,
}

impl Dns {
    fn start(args: &[&str], json: &Path) -> Dns {
        let mut child = mailbench()
            .args(["dns", "-q", "--listen", "127.0.0.1:0", "--json"])
            .arg(json)
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
        assert!(
            line.contains("serving"),
            "mailbench dns did not start: {line}"
        );
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        Dns {
            proc: Terminated(child),
            line,
        }
    }

    /// The port it serves on at `server` (127.0.0.1 or ::1).
    fn port(&self, server: &str) -> String {
        let at = if server.contains(':') {
            format!("[{server}]:")
        } else {
            format!("{server}:")
        };
        self.line
            .split(&at)
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .unwrap_or_else(|| panic!("expected {at}PORT in {:?}", self.line))
            .to_string()
    }

    /// dig's short answers to `queries` (TYPE NAME pairs, one dig process for all).
    fn dig(&self, server: &str, extra: &[&str], queries: &[(&str, &str)]) -> Vec<String> {
        let dig = require("dig").expect("dig is installed with the test deps");
        let mut cmd = Command::new(dig);
        cmd.arg(format!("@{server}"))
            .args(["-p", &self.port(server), "+tries=1", "+time=2"])
            .args(extra);
        for (t, n) in queries {
            cmd.args([n, t]);
        }
        let out = cmd.output().expect("run dig");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn statuses(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| l.split("status: ").nth(1))
        .map(|s| s.split(',').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn dig_gets_what_the_zone_spec_says_over_udp_tcp_and_ipv6() {
    if require("dig").is_none() {
        return;
    }
    let dir = TempDir::new("dns-spec");
    let json = dir.0.join("d.json");
    let dkim = dir.0.join("dkim.txt");
    std::fs::write(
        &dkim,
        "v=DKIM1; k=ed25519; p=VGSi3z4XmusAda4+FQfEohGm1idfqp6dVtGRzEhy3gQ=",
    )
    .expect("write");
    let dkim = dkim.to_string_lossy().to_string();
    let mut dns = Dns::start(
        &[
            "--domains",
            "d{1..254}.example.test",
            "--mx-address",
            "127.0.2.1,::1",
            "--mx-per-domain",
            "2",
            "--dkim-txt",
            &dkim,
            "--listen",
            "[::1]:0",
        ],
        &json,
    );
    let short = dns.dig(
        "127.0.0.1",
        &["+short"],
        &[
            ("MX", "d7.example.test"),
            ("A", "mx1.d1.example.test"),
            ("AAAA", "mx1.d2.example.test"),
            ("TXT", "d3.example.test"),
            ("TXT", "mailbench._domainkey.d3.example.test"),
            ("PTR", "1.2.0.127.in-addr.arpa"),
        ],
    );
    let expected = [
        "10 mx1.d7.example.test.",
        "20 mx2.d7.example.test.",
        // Domain k's j-th MX host takes address (k + j) mod 2: d1's mx1 the first, d2's
        // mx1 the second; a PTR names the first host given each address.
        "127.0.2.1",
        "::1",
        "\"v=spf1 ip4:127.0.0.0/8 ip6:::1/128 -all\"",
        "\"v=DKIM1; k=ed25519; p=VGSi3z4XmusAda4+FQfEohGm1idfqp6dVtGRzEhy3gQ=\"",
        "mx1.d1.example.test.",
    ];
    assert_eq!(short, expected, "dig +short, one answer per line");
    let tcp = dns.dig(
        "127.0.0.1",
        &["+short", "+tcp"],
        &[("A", "mx2.d2.example.test")],
    );
    assert_eq!(tcp, ["127.0.2.1"], "over TCP");
    let v6 = dns.dig("::1", &["+short"], &[("PTR", &ptr6_of_loopback())]);
    assert_eq!(
        v6,
        ["mx2.d1.example.test."],
        "over IPv6, the reverse of ::1"
    );
    let codes = statuses(&dns.dig(
        "127.0.0.1",
        &[],
        &[
            ("A", "example.com"),
            ("A", "nope.d1.example.test"),
            ("AAAA", "mx2.d2.example.test"),
        ],
    ));
    assert_eq!(codes, ["REFUSED", "NXDOMAIN", "NOERROR"]);
    assert_eq!(dns.proc.stop(), Some(0), "SIGTERM ends it cleanly");
    let r = results(&json);
    let d = &r["extra"]["dns"];
    assert_eq!(r["summary"]["questions"], 11, "{d}");
    assert_eq!((d["udp"].as_u64(), d["tcp"].as_u64()), (Some(10), Some(1)));
    assert_eq!(d["by_type"]["txt"], 2);
    assert_eq!(d["by_type"]["a"], 4);
    assert_eq!(r["summary"]["refused"], 1);
    assert_eq!(r["summary"]["nxdomain"], 1);
    assert_eq!(d["clients"]["::1"], 1);
    assert_eq!(
        r["summary"]["zones"],
        254 + 2,
        "254 domains and two reverse zones"
    );
    crate::util::assert_threshold_keys(&r, &mailbench::dns::THRESHOLDS, &[]);
}

/// The relay summary keys a `--dns-domains` run adds.
fn mailbench_dns_keys() -> [&'static str; 5] {
    [
        "dns_queries",
        "dns_queries_per_message",
        "dns_p50_ms",
        "dns_p99_ms",
        "dns_deferred",
    ]
}

/// `::1`'s reverse name.
fn ptr6_of_loopback() -> String {
    let mut n = vec!["1"];
    n.extend(std::iter::repeat_n("0", 31));
    format!("{}.ip6.arpa", n.join("."))
}

#[test]
fn fault_rules_show_with_their_share_and_delay_and_truncation_sends_dig_to_tcp() {
    if require("dig").is_none() {
        return;
    }
    let dir = TempDir::new("dns-faults");
    let json = dir.0.join("d.json");
    let mut dns = Dns::start(
        &[
            "--domains",
            "40",
            "--rule",
            "a:servfail:30%",
            "--rule",
            "mx:delay=150ms",
            "--rule",
            "txt:truncate",
            "--rule",
            "aaaa@mx1.d1.*:drop",
        ],
        &json,
    );
    let names: Vec<String> = (0..400)
        .map(|i| format!("mx1.d{}.example.test", i % 40))
        .collect();
    let queries: Vec<(&str, &str)> = names.iter().map(|n| ("A", n.as_str())).collect();
    let codes = statuses(&dns.dig("127.0.0.1", &[], &queries));
    assert_eq!(codes.len(), 400, "every A question answered");
    let failed = codes.iter().filter(|c| *c == "SERVFAIL").count();
    // 30 % of 400 is 120, one standard deviation ~9: a range of more than five each way.
    assert!(
        (70..=170).contains(&failed),
        "30 % of 400 A answers SERVFAIL: got {failed}"
    );
    let timed = dns.dig("127.0.0.1", &[], &[("MX", "d1.example.test")]);
    let ms: u64 = timed
        .iter()
        .find_map(|l| {
            l.strip_prefix(";; Query time: ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("dig prints the query time: {timed:?}"));
    assert!(
        (150..1000).contains(&ms),
        "MX answered after the 150 ms delay, dig saw {ms} ms"
    );
    let txt = dns.dig("127.0.0.1", &["+short"], &[("TXT", "d1.example.test")]);
    assert_eq!(
        txt.len(),
        1,
        "dig retried over TCP and got the record: {txt:?}"
    );
    let dropped = dns.dig(
        "127.0.0.1",
        &["+time=1"],
        &[("AAAA", "mx1.d1.example.test")],
    );
    assert!(
        dropped
            .iter()
            .any(|l| l.contains("timed out") || l.contains("no servers could be reached")),
        "a dropped question times out: {dropped:?}"
    );
    assert_eq!(dns.proc.stop(), Some(0));
    let r = results(&json);
    let d = &r["extra"]["dns"];
    assert_eq!(
        r["summary"]["servfail"], failed as u64,
        "the server counted what dig saw"
    );
    assert_eq!(d["faults"][0]["fired"], failed as u64);
    assert_eq!(d["faults"][1]["fired"], 1);
    assert_eq!(r["summary"]["truncated"], 1);
    assert_eq!(
        r["summary"]["tcp"], 1,
        "the truncated TXT asked again over TCP"
    );
    assert_eq!(r["summary"]["dropped"], 1);
    if let Some(chromium) = crate::report::chromium() {
        let page = crate::report::report(&chromium, &[&json], &dir.0.join("dns.html"), &[]);
        page.assert_drawn("dns", 2, &["throughput", "percentiles"]);
        page.assert_summary("dns", 0, &r);
        use crate::report::fig;
        page.assert_headline(
            "dns",
            0,
            &[
                fig(&r, "queries_per_sec", "/summary/queries_per_sec"),
                fig(&r, "p99_ms", "/summary/p99_ms"),
                (
                    "faults_fired",
                    Some(
                        d["faults"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|f| f["fired"].as_u64().unwrap_or(0))
                            .sum::<u64>()
                            .into(),
                    ),
                ),
                fig(&r, "dropped", "/summary/dropped"),
            ],
        );
        assert!(
            page.dom.contains("id=\"dns_faults_table\""),
            "the fault rules' table"
        );
    }
    let mx = &r["latency"]["mx"];
    assert!(
        mx["p50_us"].as_u64().unwrap_or(0) >= 150_000,
        "server-side MX time includes the delay: {mx}"
    );
}

#[test]
fn bad_zone_specs_files_and_rules_are_refused_in_one_line() {
    let dir = TempDir::new("dns-bad");
    let bad_zone = dir.0.join("bad.zone");
    std::fs::write(&bad_zone, "$ORIGIN x.test.\n$TTL 60\n@ IN A 127.0.0.1\n").expect("write");
    let z = bad_zone.to_string_lossy().to_string();
    refused_in_one_line(
        &["dns", "--domains", "d{5..1}.example.test"],
        "is not a range",
    );
    refused_in_one_line(&["dns", "--domains", "bad!.test"], "is not a domain name");
    refused_in_one_line(&["dns", "--zone-file", &z], "no SOA record");
    // Issue 26: a DKIM record cut by an unclosed quote is refused at its line, not served.
    let cut = dir.0.join("cut.zone");
    std::fs::write(
        &cut,
        "$ORIGIN x.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\ns._domainkey TXT \"v=DKIM1; p=AB\n",
    )
    .expect("write");
    let cut = cut.to_string_lossy().to_string();
    refused_in_one_line(
        &["dns", "--zone-file", &cut],
        &format!("--zone-file {cut}:4: a quoted string is not closed on its line"),
    );
    refused_in_one_line(
        &["dns", "--zone-file", "/nonexistent.zone"],
        "cannot read it",
    );
    refused_in_one_line(&["dns"], "nothing to serve");
    // Issue 40: `dns --rule` errors named relay's `--dns-rule`.
    refused_in_one_line(
        &["dns", "--domains", "5", "--rule", "mx:explode"],
        "bad --rule \"mx:explode\"",
    );
    refused_in_one_line(
        &[
            "relay",
            "--target",
            "127.0.0.1:1",
            "--dns-domains",
            "3",
            "--dns-rule",
            "mx:explode",
        ],
        "bad --dns-rule \"mx:explode\"",
    );
    // Issue 40: an address below a delegation that no NS names was loaded, never served.
    let hidden = dir.0.join("hidden.zone");
    std::fs::write(
        &hidden,
        "$ORIGIN x.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\nc NS ns.c\nns.c A 127.0.0.1\nwww.c A 127.0.0.2\n",
    )
    .expect("write");
    let hidden = hidden.to_string_lossy().to_string();
    refused_in_one_line(
        &["dns", "--zone-file", &hidden],
        &format!(
            "--zone-file {hidden}:6: www.c.x.test. A is below the delegation at c.x.test. and would never be served"
        ),
    );
    // Issue 40: an address in use is bad input (exit 1, one line naming --listen), not a
    // failed run.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let at = taken.local_addr().expect("addr").to_string();
    refused_in_one_line(
        &["dns", "--domains", "5", "--listen", &at, "-z", "1s"],
        &format!("--listen: cannot listen on tcp {at}"),
    );
    refused_in_one_line(
        &["dns", "--domains", "5", "--mx-address", "mail.test"],
        "not an IP address",
    );
    refused_in_one_line(
        &["relay", "--lab", "postfix", "--dns-domains", "x{1..3}.test"],
        "give --to with a template",
    );
}

/// Issue 26: `dns --help`'s zone-file example runs as written (its address made free: port
/// 53 needs root and may be taken), reading a zone file and logging the question.
#[test]
fn the_zone_file_example_of_dns_help_runs() {
    let help = mailbench()
        .args(["dns", "--help"])
        .output()
        .expect("dns --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let line = help
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("mailbench dns --zone"))
        .unwrap_or_else(|| panic!("a zone-file example in:\n{help}"));
    let dir = TempDir::new("dns-help");
    std::fs::write(
        dir.0.join("lab.zone"),
        "$ORIGIN lab.test.\n$TTL 60\n@ SOA ns h 1 3600 600 86400 60\n@ MX 10 mx\nmx A 127.0.2.1\n",
    )
    .expect("write");
    let args: Vec<&str> = line
        .split_whitespace()
        .skip(1)
        .map(|a| {
            if a == "127.53.0.1:53" {
                "127.0.0.1:0"
            } else {
                a
            }
        })
        .collect();
    let out = mailbench()
        .current_dir(&dir.0)
        .args(&args)
        .args(["-z", "1s", "-q"])
        .output()
        .expect("run the example");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.0.join("queries.log").exists(), "{line}: the query log");
}

#[test]
fn a_lab_postfix_resolves_fifty_domains_through_the_test_dns_and_delivers_each_once() {
    let resolv_before = std::fs::read("/etc/resolv.conf").ok();
    let dir = TempDir::new("relay-dns");
    let json = dir.0.join("r.json");
    let Some(r) = relay(
        &[
            "--dns-domains",
            "50",
            "-n",
            "500",
            "-c",
            "8",
            "--size",
            "2k",
        ],
        &json,
    ) else {
        return;
    };
    crate::relay::assert_exactly_once(&r, 500);
    let s = &r["summary"];
    let log =
        std::fs::read_to_string(json.with_extension("maillog.0")).expect("the lab's log kept");
    let sent: Vec<&str> = log.lines().filter(|l| l.contains("status=sent")).collect();
    assert_eq!(sent.len(), 500);
    assert!(
        sent.iter()
            .all(|l| l.contains("relay=mx1.d") && l.contains(".example.test[127.0.2.")),
        "every delivery went to an MX host found in DNS, none to a bracketed relayhost: {}",
        sent[0]
    );
    let d = &r["extra"]["dns"];
    // Each of the 50 destinations needs at least its MX and its host's address.
    assert!(d["by_type"]["mx"].as_u64().unwrap_or(0) >= 50, "{d}");
    assert!(d["by_type"]["a"].as_u64().unwrap_or(0) >= 50, "{d}");
    assert_eq!(d["by_type"]["aaaa"], 0, "the lab's Postfix is IPv4 only");
    let q = s["dns_queries"].as_u64().unwrap_or(0);
    assert_eq!(d["questions"].as_u64(), Some(q));
    let per = s["dns_queries_per_message"].as_f64().unwrap_or(0.0);
    assert!(
        (per - q as f64 / 500.0).abs() < 0.001,
        "{per} per message of {q} questions"
    );
    // Postfix keeps no DNS cache and glibc neither: no more than one MX and one A lookup
    // per delivery (fewer when a cached connection is reused), at least one per domain.
    assert!((0.2..=2.0).contains(&per), "{per} questions per message");
    assert_eq!(s["dns_deferred"], 0);
    // Every --threshold key is in the summary but the other modes' own.
    crate::util::assert_threshold_keys(
        &r,
        &mailbench::relay::THRESHOLDS,
        &crate::util::relay_keys_but(&mailbench_dns_keys()),
    );
    assert_eq!(
        std::fs::read("/etc/resolv.conf").ok(),
        resolv_before,
        "the machine's resolver untouched"
    );
    assert!(
        crate::util::leftovers(&r).is_empty(),
        "{:?}",
        crate::util::leftovers(&r)
    );
}

#[test]
fn mx_servfail_defers_mail_that_is_delivered_once_the_rule_is_lifted() {
    let dir = TempDir::new("relay-dns-fail");
    let json = dir.0.join("r.json");
    let Some(r) = relay(
        &[
            "--dns-domains",
            "10",
            "-n",
            "200",
            "-c",
            "4",
            "--size",
            "1k",
            "--dns-rule",
            "mx:servfail:100%:until=2s",
        ],
        &json,
    ) else {
        return;
    };
    crate::relay::assert_exactly_once(&r, 200);
    let s = &r["summary"];
    assert!(
        s["dns_deferred"].as_u64().unwrap_or(0) > 0,
        "Postfix's log blames DNS for deferrals: {s}"
    );
    let d = &r["extra"]["dns"];
    assert!(d["by_rcode"]["servfail"].as_u64().unwrap_or(0) > 0, "{d}");
    assert_eq!(d["faults"][0]["fired"], d["by_rcode"]["servfail"]);
    assert!(
        s["drain_s"].as_f64().unwrap_or(0.0) > 2.0,
        "nothing could be delivered before the rule was lifted at 2 s: {s}"
    );
}

#[test]
fn the_list_server_preset_fans_one_message_out_to_254_domains_timed_per_recipient() {
    let dir = TempDir::new("relay-list");
    let json = dir.0.join("r.json");
    let Some(r) = relay(&["--list-server"], &json) else {
        return;
    };
    let s = &r["summary"];
    assert_eq!(
        (s["accepted"].as_u64(), s["expected_recipients"].as_u64()),
        (Some(1), Some(254)),
        "{s}"
    );
    assert_eq!(
        (s["delivered"].as_u64(), s["lost"].as_u64()),
        (Some(254), Some(0)),
        "{s}"
    );
    assert_eq!(
        r["latency"]["e2e_recipient"]["count"], 254,
        "each recipient timed by its own copy"
    );
    assert_eq!(
        r["latency"]["e2e"]["count"], 1,
        "the message's first arrival"
    );
    let (p50, p99) = (
        s["e2e_recipient_p50_ms"].as_f64().unwrap_or(0.0),
        s["e2e_recipient_p99_ms"].as_f64().unwrap_or(0.0),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{s}");
    let per = &r["extra"]["dns"]["per_recipient"];
    // 254 destinations, one recipient each: an MX and an A lookup per delivered recipient.
    assert_eq!(
        (per["mx"].as_f64(), per["a"].as_f64()),
        (Some(1.0), Some(1.0)),
        "{per}"
    );
}

#[test]
fn hostile_packets_and_streams_leave_the_server_answering_in_bounded_memory() {
    use std::io::Write;
    use std::net::{TcpStream, UdpSocket};
    if require("dig").is_none() {
        return;
    }
    let dir = TempDir::new("dns-hostile");
    let json = dir.0.join("d.json");
    let mut dns = Dns::start(&["--domains", "3"], &json);
    let port: u16 = dns.port("127.0.0.1").parse().expect("port");
    let to = ("127.0.0.1", port);
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    // Garbage of every length, half of it behind a query's header (so that it is parsed).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..5000 {
        let len = (next() % 600) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 && p.len() >= 12 {
            p[2] &= 0x7f; // a query, not a response
            p[4..6].copy_from_slice(&1u16.to_be_bytes());
        }
        let _ = udp.send_to(&p, to);
    }
    // A stream that promises 65,535 bytes and stops, one with a zero length, one with
    // garbage behind a plausible length — each closed by its client.
    for payload in [vec![0xff, 0xff, 1, 2, 3], vec![0, 0], {
        let mut v = vec![0, 40];
        v.extend((0..40).map(|_| next() as u8));
        v
    }] {
        let mut s = TcpStream::connect(to).expect("tcp");
        let _ = s.write_all(&payload);
    }
    // More connections than the server serves at once, held open.
    let held: Vec<TcpStream> = (0..1200)
        .filter_map(|_| TcpStream::connect(to).ok())
        .collect();
    let mx = dns.dig("127.0.0.1", &["+short"], &[("MX", "d1.example.test")]);
    assert_eq!(mx, ["10 mx1.d1.example.test."], "still answering over UDP");
    drop(held);
    let tcp = dns.dig(
        "127.0.0.1",
        &["+short", "+tcp"],
        &[("MX", "d1.example.test")],
    );
    assert_eq!(tcp, ["10 mx1.d1.example.test."], "still answering over TCP");
    assert_eq!(dns.proc.stop(), Some(0));
    let r = results(&json);
    let s = &r["summary"];
    assert!(
        s["ignored"].as_u64().unwrap_or(0) > 1000,
        "garbage is no query: {s}"
    );
    assert!(
        s["formerr"].as_u64().unwrap_or(0) > 100,
        "unreadable queries get FORMERR: {s}"
    );
    // 1,024 connections served at once: with a 64 KiB buffer each they would take 64 MiB;
    // an idle one holds none.
    let rss_mib = r["self"]["peak_rss_kib"].as_u64().unwrap_or(u64::MAX) / 1024;
    assert!(
        rss_mib < 32,
        "peak RSS {rss_mib} MiB under 1,200 connections and 5,000 bad packets"
    );
}

/// A query for `name` and `qtype` (no EDNS, RD clear) with id `id`, as RFC 1035 §4.1
/// lays it out.
fn wire_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend(label.as_bytes());
    }
    q.push(0);
    q.extend(qtype.to_be_bytes());
    q.extend(1u16.to_be_bytes());
    q
}

/// Issue 26: with `--threads 2` two threads serve the UDP socket, and what they count
/// adds up exactly to what a client sent and got back: 6,000 questions from four client
/// sockets at once (MX, A, TXT under a 40 % SERVFAIL rule, A outside the zones), plus
/// 100 packets that are no query.
#[test]
fn issue_26_two_udp_threads_count_every_question_once() {
    use std::net::UdpSocket;
    use std::time::Duration;
    let dir = TempDir::new("dns-threads");
    let json = dir.0.join("d.json");
    let mut child = mailbench()
        .args([
            "--threads",
            "2",
            "dns",
            "-q",
            "--listen",
            "127.0.0.1:0",
            "--json",
        ])
        .arg(&json)
        .args(["--domains", "5", "--rule", "txt:servfail:40%"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailbench dns");
    let mut reader = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("dns says where it serves");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let pid = child.id();
    let mut dns = Dns {
        proc: Terminated(child),
        line,
    };
    let port: u16 = dns.port("127.0.0.1").parse().expect("port");
    // The threads start just after the line (the socket is bound: queries wait for them).
    let udp_threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|comm| comm.starts_with("dns-udp"))
                    .count()
            })
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(10), || udp_threads() >= 2);
    assert_eq!(udp_threads(), 2, "UDP threads of --threads 2");
    const PER_CLIENT: usize = 1500;
    const WINDOW: usize = 30;
    // Each client sends a window of questions, then reads every reply; it returns the
    // reply codes it saw, by question kind (MX, A, TXT, outside).
    let clients: Vec<_> = (0..4)
        .map(|c| {
            std::thread::spawn(move || {
                let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
                s.set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                let mut seen = [[0u64; 16]; 4];
                let mut buf = [0u8; 1500];
                for start in (0..PER_CLIENT).step_by(WINDOW) {
                    for i in start..start + WINDOW {
                        let d = format!("d{}.example.test", (i + c) % 5);
                        let (name, qtype) = match i % 4 {
                            0 => (d, 15),
                            1 => (format!("mx1.{d}"), 1),
                            2 => (d, 16),
                            _ => ("elsewhere.invalid".to_string(), 1),
                        };
                        s.send_to(&wire_query(i as u16, &name, qtype), ("127.0.0.1", port))
                            .expect("send");
                    }
                    for _ in 0..WINDOW {
                        let n = s.recv(&mut buf).unwrap_or_else(|e| {
                            panic!("client {c}: a reply of window {start} is missing: {e}")
                        });
                        assert!(n >= 12, "a reply has a header");
                        let id = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                        seen[id % 4][usize::from(buf[3] & 0xf)] += 1;
                    }
                }
                seen
            })
        })
        .collect();
    let mut seen = [[0u64; 16]; 4];
    for c in clients {
        let s = c.join().expect("client");
        for (k, codes) in s.iter().enumerate() {
            for (rc, n) in codes.iter().enumerate() {
                seen[k][rc] += n;
            }
        }
    }
    let garbage = UdpSocket::bind("127.0.0.1:0").expect("bind");
    for _ in 0..100 {
        garbage
            .send_to(&[1, 2, 3], ("127.0.0.1", port))
            .expect("send");
    }
    // The garbage is counted before the server stops: one more question after it, whose
    // reply comes once the packets ahead of it in the socket's queue were taken.
    let last = dns.dig("127.0.0.1", &["+short"], &[("MX", "d1.example.test")]);
    assert_eq!(last, ["10 mx1.d1.example.test."]);
    assert_eq!(dns.proc.stop(), Some(0));
    // Four clients, each asking a quarter of its questions of each kind.
    let quarter = PER_CLIENT as u64;
    let servfail = seen[2][2];
    assert_eq!(seen[0][0], quarter, "every MX answered NOERROR: {seen:?}");
    assert_eq!(seen[1][0], quarter, "every A answered NOERROR: {seen:?}");
    assert_eq!(seen[2][0] + servfail, quarter, "TXT: {seen:?}");
    assert_eq!(seen[3][5], quarter, "outside the zones: REFUSED: {seen:?}");
    assert!(
        (400..=800).contains(&servfail),
        "40 % of {quarter} TXT SERVFAIL: got {servfail}"
    );
    let r = results(&json);
    let (s, d) = (&r["summary"], &r["extra"]["dns"]);
    let sent = quarter * 4 + 1;
    let expected = serde_json::json!({
        "questions": sent, "udp": sent, "tcp": 0, "ignored": 100,
        "by_type": {"mx": quarter + 1, "a": 2 * quarter, "txt": quarter},
        "by_rcode": {"noerror": 3 * quarter + 1 - servfail, "servfail": servfail, "refused": quarter},
        "fired": servfail, "clients": {"127.0.0.1": sent},
        "answered": sent, "threads": 2,
    });
    let got = serde_json::json!({
        "questions": d["questions"], "udp": d["udp"], "tcp": d["tcp"], "ignored": d["ignored"],
        "by_type": {"mx": d["by_type"]["mx"], "a": d["by_type"]["a"], "txt": d["by_type"]["txt"]},
        "by_rcode": d["by_rcode"],
        "fired": d["faults"][0]["fired"], "clients": d["clients"],
        "answered": s["answered"], "threads": r["config"]["threads"],
    });
    assert_eq!(got, expected, "the server's counts against the clients'");
}

#[test]
fn issue_43_no_mx_zones_answer_a_at_each_domain_and_an_empty_mx() {
    if require("dig").is_none() {
        return;
    }
    let dir = TempDir::new("dns-no-mx");
    let mut dns = Dns::start(
        &[
            "--domains",
            "3",
            "--no-mx",
            "--mx-address",
            "127.0.2.1,127.0.2.2",
        ],
        &dir.0.join("d.json"),
    );
    let mx = dns.dig("127.0.0.1", &[], &[("MX", "d1.example.test")]);
    let answers = |lines: &[String]| {
        lines
            .iter()
            .find_map(|l| l.split("ANSWER: ").nth(1))
            .and_then(|t| t.split(',').next())
            .map(str::to_string)
    };
    assert_eq!(
        (statuses(&mx), answers(&mx)),
        (vec!["NOERROR".to_string()], Some("0".to_string())),
        "expected dig to find no MX (NOERROR, empty answer):\n{}",
        mx.join("\n")
    );
    let a = dns.dig(
        "127.0.0.1",
        &["+short"],
        &[
            ("A", "d0.example.test"),
            ("A", "d1.example.test"),
            ("A", "d2.example.test"),
            ("A", "mx1.d0.example.test"),
        ],
    );
    assert_eq!(
        a,
        ["127.0.2.1", "127.0.2.2", "127.0.2.1"],
        "expected each domain's own A record, spread over the addresses, and no MX host"
    );
    assert_eq!(dns.proc.stop(), Some(0));
}
