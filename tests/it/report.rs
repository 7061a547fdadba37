//! `report`, `compare` and `--rounds`: reports of real runs of each command opened in a real
//! headless browser (Debian's chromium-headless-shell), their headline numbers checked
//! against the results files; comparisons of files with known numbers; rounds kept whole.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sink::Sink;
use crate::util::{TempDir, describe, refused_in_one_line, require, results, run, run_expect};

/// What the page says about itself after its script ran, and its whole DOM.
pub(crate) struct Page {
    pub(crate) dom: String,
}

impl Page {
    /// Opens `html` in headless Chromium (no network, fresh profile) and dumps its DOM.
    pub(crate) fn open(chromium: &Path, html: &Path) -> Page {
        let profile = TempDir::new("chromium");
        let out = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--virtual-time-budget=10000",
                "--dump-dom",
            ])
            .arg(format!("--user-data-dir={}", profile.0.display()))
            .arg(format!("file://{}", html.display()))
            .output()
            .expect("run chromium");
        assert!(out.status.success(), "chromium: {out:?}");
        Page {
            dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        }
    }

    /// An attribute of `<body>`.
    fn body(&self, attr: &str) -> Option<String> {
        let start = self.dom.find("<body")?;
        let tag = &self.dom[start..start + self.dom[start..].find('>')?];
        let key = format!("{attr}=\"");
        let at = tag.find(&key)? + key.len();
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    }

    /// The raw value of summary key `key` for run `run`, as the page's table holds it.
    fn summary_value(&self, run: usize, key: &str) -> Option<String> {
        let needle = format!("data-run=\"{run}\" data-key=\"{key}\" data-value=\"");
        let at = self.dom.find(&needle)? + needle.len();
        Some(self.dom[at..at + self.dom[at..].find('"')?].to_string())
    }

    /// Checks that the script drew `charts` charts (at least), none blank, without errors,
    /// and that each of `ids` is on the page.
    pub(crate) fn assert_drawn(&self, what: &str, min_charts: usize, ids: &[&str]) {
        assert_eq!(
            self.body("data-report-status").as_deref(),
            Some("ok"),
            "{what}: status; errors: {:?}",
            self.body("data-errors")
        );
        assert_eq!(self.body("data-errors").as_deref(), Some(""), "{what}");
        assert_eq!(
            self.body("data-blank").as_deref(),
            Some("0"),
            "{what}: charts drawn empty"
        );
        let charts: usize = self
            .body("data-charts")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        assert!(
            charts >= min_charts,
            "{what}: expected at least {min_charts} charts, got {charts}: {:?}",
            self.chart_ids()
        );
        for id in ids {
            assert!(
                self.dom.contains(&format!("id=\"chart-{id}\"")),
                "{what}: expected chart {id} on the page, got {:?}",
                self.chart_ids()
            );
        }
    }

    /// The ids of the charts on the page.
    fn chart_ids(&self) -> Vec<&str> {
        self.dom
            .split("id=\"chart-")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect()
    }

    /// Every number of the results file's summary is in the page, exactly.
    pub(crate) fn assert_summary(&self, what: &str, run: usize, r: &serde_json::Value) {
        let summary = r["summary"].as_object().expect("a summary");
        let mut checked = 0;
        for (key, v) in summary {
            if !(v.is_number() || v.is_boolean()) {
                continue;
            }
            let got = self
                .summary_value(run, key)
                .unwrap_or_else(|| panic!("{what}: summary key {key} is not on the page"));
            let got: serde_json::Value = serde_json::from_str(&got.replace("&quot;", "\""))
                .unwrap_or_else(|e| panic!("{what}: {key}={got}: {e}"));
            assert_eq!(
                got.as_f64().or(got.as_bool().map(f64::from)),
                v.as_f64().or(v.as_bool().map(f64::from)),
                "{what}: summary {key}: page against results file"
            );
            checked += 1;
        }
        assert!(checked >= 5, "{what}: only {checked} numbers checked");
    }
}

impl Page {
    /// The headline opens the page, before the run's table and the charts, and shows each
    /// of `figures` (an id and its value as the results file has it, `None` for a figure
    /// the run has no value for) for run `run`: the raw value exactly, and the text as
    /// [`at_a_glance`] writes it.
    pub(crate) fn assert_headline(
        &self,
        what: &str,
        run: usize,
        figures: &[(&str, Option<serde_json::Value>)],
    ) {
        let at = |needle: &str| self.dom.find(needle);
        let headline = at("<section id=\"headline\">").expect("a headline");
        for later in ["<section id=\"run\">", "<section id=\"charts\">"] {
            assert!(
                at(later).is_some_and(|l| l > headline),
                "{what}: the headline comes before {later}"
            );
        }
        for (id, want) in figures {
            let needle = format!("data-run=\"{run}\" data-figure=\"{id}\" data-value=\"");
            let Some(want) = want else {
                assert!(at(&needle).is_none(), "{what}: {id} shown without a value");
                continue;
            };
            let start = at(&needle)
                .unwrap_or_else(|| panic!("{what}: headline figure {id} is not on the page"))
                + needle.len();
            let rest = &self.dom[start..];
            let raw = rest[..rest.find('"').expect("end of value")].replace("&quot;", "\"");
            let raw: serde_json::Value =
                serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{what}: {id}={raw}: {e}"));
            assert_eq!(
                raw.as_f64()
                    .map(|f| f.to_string())
                    .or(raw.as_str().map(String::from)),
                want.as_f64()
                    .map(|f| f.to_string())
                    .or(want.as_str().map(String::from)),
                "{what}: headline {id}: page against results file"
            );
            let shown_at = rest.find("<b class=\"value\">").expect("shown value") + 17;
            let shown = &rest[shown_at..shown_at + rest[shown_at..].find("</b>").expect("</b>")];
            assert_eq!(shown, at_a_glance(want), "{what}: headline {id} as shown");
        }
    }
}

/// A headline figure as the page is to show it: whole numbers from 100 up in groups of
/// three digits, 2 decimals from 1 up, 3 below; a name as it is.
pub(crate) fn at_a_glance(v: &serde_json::Value) -> String {
    fn grouped(n: i64) -> String {
        let digits = n.unsigned_abs().to_string();
        let groups: Vec<&str> = (0..digits.len())
            .rev()
            .step_by(3)
            .map(|end| &digits[end.saturating_sub(2)..=end])
            .collect();
        let sign = if n < 0 { "-" } else { "" };
        format!(
            "{sign}{}",
            groups.into_iter().rev().collect::<Vec<_>>().join(",")
        )
    }
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if let Some(n) = v.as_i64() {
        return grouped(n);
    }
    let f = v.as_f64().expect("a number");
    if f.abs() >= 100.0 {
        grouped(f.round() as i64)
    } else if f.abs() >= 1.0 {
        format!("{f:.2}")
    } else {
        format!("{f:.3}")
    }
}

/// Figure `id` of a headline, as the results file `r` has it at JSON pointer `at`.
pub(crate) fn fig(
    r: &serde_json::Value,
    id: &'static str,
    at: &str,
) -> (&'static str, Option<serde_json::Value>) {
    (id, r.pointer(at).filter(|v| !v.is_null()).cloned())
}

/// The server's CPU per unit in ms, `per` naming the summary's count of units: what the
/// headline works out from the results file's `extra.sut`, to the µs.
pub(crate) fn cpu_per(
    r: &serde_json::Value,
    id: &'static str,
    per: &str,
) -> (&'static str, Option<serde_json::Value>) {
    let sut = &r["extra"]["sut"];
    let cpu = sut["cpu_user_s"].as_f64().zip(sut["cpu_sys_s"].as_f64());
    let n = r["summary"][per].as_f64().filter(|n| *n > 0.0);
    let v = cpu
        .zip(n)
        .map(|((u, s), n)| ((u + s) * 1e6 / n).round() / 1e3);
    (id, v.map(serde_json::Value::from))
}

/// `mailbench WORDS -q --json JSON` (exit 0).
fn run_json(words: &[&str], json: &Path) {
    let j = json.display().to_string();
    run_expect(&[words, &["-q", "--json", &j]].concat(), 0);
}

/// `mailbench send TARGET ARGS -q --json JSON` (exit 0).
fn send(target: &str, args: &[&str], json: &Path) {
    run_json(&[&["send", target][..], args].concat(), json);
}

pub(crate) fn chromium() -> Option<PathBuf> {
    require("chromium-headless-shell")
}

/// `mailbench report FILES -o OUT` (exit 0) and the page opened.
pub(crate) fn report(chromium: &Path, files: &[&Path], out: &Path, extra: &[&str]) -> Page {
    let mut args: Vec<String> = vec!["report".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["-o".into(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_expect(&args, 0);
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    assert!(size > 50_000, "the page inlines uPlot: {size} bytes");
    let html = std::fs::read_to_string(out).expect("page");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the page loads nothing from the network"
    );
    Page::open(chromium, out)
}

/// Reports of `send` (closed and open loop, the latter with `--report` at the end of the
/// run), `sink`, `relay` through a lab Postfix (a concurrency sweep) and `mailbox pop3`
/// on a lab Dovecot, and an overlay of two runs: each draws every chart its data has,
/// without script errors or blank charts, and shows the results file's summary exactly.
#[test]
fn reports_of_every_command_draw_in_a_real_browser_and_match_their_results() {
    let Some(chromium) = chromium() else { return };
    let dir = TempDir::new("report");
    let p = |name: &str| dir.0.join(name);
    let sink = Sink::start(&["--json", &p("sink.json").display().to_string()]);
    let target = sink.target();
    let send_closed = p("send.json");
    send(&target, &["-n", "3000", "-c", "4"], &send_closed);
    let (send_open, end_report) = (p("open.json"), p("open-at-end.html"));
    send(
        &target,
        &[
            "--rate",
            "400/s",
            "-z",
            "3s",
            "--report",
            &end_report.display().to_string(),
        ],
        &send_open,
    );
    let (code, out) = sink.stop();
    assert_eq!(code, Some(0), "{out}");

    let page = report(&chromium, &[&send_closed], &p("send.html"), &[]);
    page.assert_drawn(
        "send",
        3,
        &["throughput", "latency", "tool_cpu", "percentiles"],
    );
    page.assert_summary("send", 0, &results(&send_closed));
    let r = results(&send_closed);
    page.assert_headline(
        "send",
        0,
        &[
            fig(&r, "msgs_per_sec", "/summary/msgs_per_sec"),
            fig(&r, "accepted", "/summary/accepted"),
            fig(&r, "errors", "/summary/errors"),
            fig(&r, "p99_ms", "/summary/p99_ms"),
            fig(&r, "unstarted", "/summary/unstarted"),
        ],
    );
    assert!(
        page.dom.contains("<title>mailbench send</title>"),
        "the title does not repeat the command as the label"
    );

    let page = Page::open(&chromium, &end_report);
    page.assert_drawn("send --report", 4, &["throughput", "lag", "percentiles"]);
    page.assert_summary("send --report", 0, &results(&send_open));

    let page = report(&chromium, &[&p("sink.json")], &p("sink.html"), &[]);
    page.assert_drawn("sink", 2, &["throughput", "percentiles"]);
    page.assert_summary("sink", 0, &results(&p("sink.json")));

    let page = report(
        &chromium,
        &[&send_closed, &send_open],
        &p("two.html"),
        &["--label", "closed", "--label", "open"],
    );
    page.assert_drawn(
        "overlay",
        4,
        &["throughput", "percentiles_total", "percentiles_connect"],
    );
    page.assert_summary("overlay, first run", 0, &results(&send_closed));
    page.assert_summary("overlay, second run", 1, &results(&send_open));
    assert!(
        page.dom.contains("\"open: accepted/s\""),
        "overlay series named by label"
    );

    if require("postfix").is_some() {
        let relay = p("relay.json");
        run_json(
            &[
                "relay",
                "--lab",
                "postfix",
                "-n",
                "1000",
                "-c",
                "2,8",
                "--size",
                "2k",
                "--interval",
                "200ms",
            ],
            &relay,
        );
        let page = report(&chromium, &[&relay], &p("relay.html"), &[]);
        page.assert_drawn(
            "relay",
            8,
            &[
                "throughput",
                "latency",
                "backlog",
                "sut_cpu",
                "sut_device_busy",
                "sut_memory",
                "sut_procs",
                "percentiles",
                "sweep_drain_mpm",
                "sweep_e2e_p99_ms",
            ],
        );
        page.assert_summary("relay", 0, &results(&relay));
        let r = results(&relay);
        page.assert_headline(
            "relay",
            0,
            &[
                fig(&r, "drain_mpm", "/summary/drain_mpm"),
                fig(&r, "delivered", "/summary/delivered"),
                fig(&r, "lost", "/summary/lost"),
                fig(&r, "damaged", "/summary/damaged"),
                fig(&r, "duplicates", "/summary/duplicates"),
                fig(&r, "e2e_p50_ms", "/summary/e2e_p50_ms"),
                fig(&r, "e2e_p99_ms", "/summary/e2e_p99_ms"),
                ("mta", Some("postfix".into())),
                cpu_per(&r, "mta_cpu_ms_per_message", "delivered_messages"),
            ],
        );
        assert!(
            page.dom.contains("last delivery"),
            "the subtitle gives the drain apart from the injection"
        );
        assert!(page.dom.contains("id=\"sweep_table\""), "the sweep's table");
    }

    if require("dovecot").is_some() {
        let pop3 = p("pop3.json");
        run_json(
            &[
                "mailbox", "pop3", "--lab", "dovecot", "--users", "4", "--fill", "3", "-n", "40",
                "-c", "2",
            ],
            &pop3,
        );
        let page = report(&chromium, &[&pop3], &p("pop3.html"), &[]);
        page.assert_drawn("pop3", 3, &["throughput", "percentiles"]);
        page.assert_summary("pop3", 0, &results(&pop3));
        let r = results(&pop3);
        page.assert_headline(
            "pop3",
            0,
            &[
                fig(&r, "sessions_per_sec", "/summary/sessions_per_sec"),
                fig(&r, "p99_ms", "/summary/p99_ms"),
                fig(&r, "errors", "/summary/errors"),
                cpu_per(&r, "store_cpu_ms_per_session", "completed"),
            ],
        );
        assert!(
            page.dom.contains("\"sessions/s\"") && !page.dom.contains("accepted/s"),
            "POP3's throughput is in sessions"
        );
        assert!(
            !page.dom.contains("Queue device"),
            "a store has no queue device"
        );

        let imap = p("imap.json");
        run_json(
            &[
                "mailbox", "imap", "--lab", "dovecot", "--users", "4", "--fill", "3", "-n", "40",
                "-c", "2",
            ],
            &imap,
        );
        let page = report(&chromium, &[&imap], &p("imap.html"), &[]);
        page.assert_drawn("imap", 3, &["throughput", "percentiles"]);
        page.assert_summary("imap", 0, &results(&imap));
        let r = results(&imap);
        page.assert_headline(
            "imap",
            0,
            &[
                fig(&r, "commands_per_sec", "/summary/commands_per_sec"),
                fig(&r, "p99_ms", "/summary/p99_ms"),
                fig(&r, "violations", "/summary/violations"),
                fig(&r, "errors", "/summary/errors"),
                cpu_per(&r, "store_cpu_ms_per_command", "completed"),
            ],
        );
        assert!(
            page.dom
                .contains("<title>mailbench imap on dovecot</title>"),
            "the title names the store"
        );
        // The store's resources are a summary in the results file, not a series.
        assert!(
            page.dom.contains("<section id=\"sut\">"),
            "the store's resource table"
        );
    }
}

/// A results file with its summary's `mpm` (and the primary rate of each round) set to
/// known values, written as `name`.
fn with_mpm(base: &serde_json::Value, dir: &Path, name: &str, mpm: &[f64]) -> PathBuf {
    let mut r = base.clone();
    r["summary"]["mpm"] = mpm[0].into();
    if mpm.len() > 1 {
        let rounds: Vec<serde_json::Value> = mpm
            .iter()
            .map(|m| {
                let mut round = serde_json::json!({"summary": r["summary"].clone()});
                round["summary"]["mpm"] = (*m).into();
                round
            })
            .collect();
        r["extra"]["rounds"] = rounds.into();
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&r).expect("json")).expect("write");
    path
}

/// `compare` on files with known numbers: exact percentages, `within noise` for rounds
/// from one distribution, `faster`/`slower` for shifted ones, exit 3 with
/// `--fail-if-slower`, a refused workload mismatch, and bad files refused in one line.
#[test]
fn compare_gives_exact_changes_and_noise_verdicts() {
    let dir = TempDir::new("compare");
    let sink = Sink::start(&[]);
    let json = dir.0.join("base.json");
    send(&sink.target(), &["-n", "200"], &json);
    let other = dir.0.join("other.json");
    send(&sink.target(), &["-n", "300", "--size", "2k"], &other);
    let _ = sink.stop();
    let base = results(&json);
    let s = |p: &PathBuf| p.display().to_string();
    let a = with_mpm(&base, &dir.0, "a.json", &[1000.0]);
    let b = with_mpm(&base, &dir.0, "b.json", &[1100.0]);
    let c = with_mpm(&base, &dir.0, "c.json", &[800.0]);
    let out = run_expect(&["compare", &s(&a), &s(&b), &s(&c), "--format", "csv"], 0);
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.contains("mpm,b,1100,0,1,10,single runs,"), "got\n{csv}");
    assert!(csv.contains("mpm,c,800,0,1,-20,single runs,"), "got\n{csv}");
    let args = ["compare", &s(&a), &s(&b), &s(&c), "--fail-if-slower", "15"];
    let out = run_expect(&args, 3);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("c slower than a by more than 15%"),
        "{}",
        describe(&args, &out)
    );
    run_expect(
        &["compare", &s(&a), &s(&b), &s(&c), "--fail-if-slower", "25"],
        0,
    );

    // Rounds: the same spread around 1000 twice is noise; around 1200 it is faster.
    let jitter = [-30.0, 10.0, -5.0, 25.0, 0.0, -15.0];
    let around = |m: f64| jitter.iter().map(|j| m + j).collect::<Vec<_>>();
    let same1 = with_mpm(&base, &dir.0, "same1.json", &around(1000.0));
    let shuffled: Vec<f64> = [20.0, -25.0, 5.0, -10.0, 30.0, -5.0]
        .iter()
        .map(|j| 1000.0 + j)
        .collect();
    let same2 = with_mpm(&base, &dir.0, "same2.json", &shuffled);
    let fast = with_mpm(&base, &dir.0, "fast.json", &around(1200.0));
    let out = run_expect(
        &[
            "compare",
            &s(&same1),
            &s(&same2),
            &s(&fast),
            "--format",
            "json",
        ],
        0,
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mpm = &c["rows"][0];
    assert_eq!(mpm["name"], "mpm");
    assert_eq!(mpm["cells"][1]["verdict"], "within noise", "{mpm:#}");
    assert_eq!(mpm["cells"][2]["verdict"], "faster", "{mpm:#}");
    assert_eq!(mpm["cells"][2]["n"], 6);
    // The baseline as several files, the candidate slower: a failing CI step.
    let (b1, b2, b3, b4) = (
        with_mpm(&base, &dir.0, "b1.json", &[1000.0]),
        with_mpm(&base, &dir.0, "b2.json", &[1010.0]),
        with_mpm(&base, &dir.0, "b3.json", &[990.0]),
        with_mpm(&base, &dir.0, "b4.json", &[1005.0]),
    );
    let (c1, c2, c3, c4) = (
        with_mpm(&base, &dir.0, "c1.json", &[800.0]),
        with_mpm(&base, &dir.0, "c2.json", &[810.0]),
        with_mpm(&base, &dir.0, "c3.json", &[790.0]),
        with_mpm(&base, &dir.0, "c4.json", &[805.0]),
    );
    let args = [
        "compare",
        "--baseline",
        &s(&b1),
        &s(&b2),
        &s(&b3),
        &s(&b4),
        "--candidate",
        &s(&c1),
        &s(&c2),
        &s(&c3),
        &s(&c4),
        "--fail-if-slower",
        "5",
    ];
    let out = run_expect(&args, 3);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("mpm") && l.contains("-20.0%") && l.ends_with("slower")),
        "{}",
        describe(&args, &out)
    );

    // Different workloads are refused, naming the keys; bad files in one line each.
    refused_in_one_line(
        &["compare", &s(&json), &s(&other)],
        "differ in messages, size.max, size.min",
    );
    let not_results = dir.0.join("not.json");
    std::fs::write(&not_results, "{\"hello\": 1}").expect("write");
    refused_in_one_line(
        &["compare", &s(&json), &s(&not_results)],
        "not a results file",
    );
    let mut newer = base.clone();
    newer["schema_version"] = 99.into();
    let newer_path = dir.0.join("newer.json");
    std::fs::write(&newer_path, newer.to_string()).expect("write");
    refused_in_one_line(&["report", &s(&newer_path)], "schema_version 99");
    let mut empty = base.clone();
    empty["series"] = serde_json::json!([]);
    let empty_path = dir.0.join("empty.json");
    std::fs::write(&empty_path, empty.to_string()).expect("write");
    refused_in_one_line(
        &["report", &s(&empty_path), "-o", &s(&dir.0.join("x.html"))],
        "its series is empty",
    );
    refused_in_one_line(&["compare", &s(&json)], "compare needs a baseline");
    let out = run(&["report", &s(&json), "--label", "a", "--label", "b"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        describe(&["report"], &out)
    );
}

/// `--rounds 4` on send keeps four rounds, the median round on top, and each round's own
/// summary; on relay each round gets a fresh lab and delivers every message.
#[test]
fn rounds_are_kept_whole_with_the_median_on_top() {
    let dir = TempDir::new("rounds");
    let sink = Sink::start(&[]);
    let json = dir.0.join("r.json");
    send(
        &sink.target(),
        &["-n", "500", "-c", "2", "--rounds", "4"],
        &json,
    );
    let _ = sink.stop();
    let r = results(&json);
    let rounds = r["extra"]["rounds"].as_array().expect("rounds kept");
    assert_eq!(rounds.len(), 4);
    assert_eq!(r["config"]["rounds"], 4);
    let mut mpm: Vec<f64> = rounds
        .iter()
        .map(|x| x["summary"]["mpm"].as_f64().expect("mpm"))
        .collect();
    for x in rounds {
        assert_eq!(x["summary"]["accepted"], 500, "every round complete: {x:#}");
    }
    let median_round = r["extra"]["median_round"].as_u64().expect("median round") as usize;
    assert_eq!(
        r["summary"],
        rounds[median_round - 1]["summary"],
        "the top level is the median round"
    );
    mpm.sort_by(f64::total_cmp);
    assert_eq!(
        r["summary"]["mpm"].as_f64(),
        Some(mpm[1]),
        "lower middle of {mpm:?}"
    );
    let s = &r["extra"]["rounds_summary"]["mpm"];
    assert_eq!(s["median"].as_f64(), Some((mpm[1] + mpm[2]) / 2.0));
    assert_eq!(
        (s["min"].as_f64(), s["max"].as_f64()),
        (Some(mpm[0]), Some(mpm[3]))
    );

    if require("postfix").is_some() {
        let relay = dir.0.join("relay.json");
        run_json(
            &[
                "relay", "--lab", "postfix", "-n", "200", "--size", "2k", "--rounds", "2",
            ],
            &relay,
        );
        let r = results(&relay);
        let rounds = r["extra"]["rounds"].as_array().expect("rounds kept");
        assert_eq!(rounds.len(), 2);
        let ids: Vec<&str> = rounds.iter().filter_map(|x| x["run_id"].as_str()).collect();
        assert_ne!(ids[0], ids[1], "each round is its own run");
        for x in rounds {
            assert_eq!(
                (
                    x["summary"]["delivered"].as_u64(),
                    x["summary"]["lost"].as_u64()
                ),
                (Some(200), Some(0)),
                "{x:#}"
            );
            assert!(
                x["extra"]["sut"]["cpu_user_s"].is_number(),
                "Postfix observed each round"
            );
        }
    }
}

/// `--compare-postconf KEY=V1,V2,V3` runs the three settings in rotating rounds (4 each:
/// A B C, B C A, C A B, A B C), keeps each side's rounds in its own file (A, B, C in the
/// order of the values) with the setting in its configuration, and ends with the compare
/// table: the first value the baseline, a verdict for each of the two others.
#[test]
fn compare_postconf_rotates_three_settings_and_ends_with_the_table() {
    if require("postfix").is_none() {
        return;
    }
    let dir = TempDir::new("vary");
    let json = dir.0.join("vary.json");
    let args = [
        "relay",
        "--lab",
        "postfix",
        "-q",
        "-n",
        "200",
        "--size",
        "2k",
        "--compare-postconf",
        "default_process_limit=100,75,50",
        "--json",
        &json.display().to_string(),
    ];
    let out = run_expect(&args, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let order: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split(", default_process_limit=").nth(1))
        .map(|v| match v {
            "100" => "A",
            "75" => "B",
            _ => "C",
        })
        .collect();
    assert_eq!(order.concat(), "ABCBCACABABC", "rotating rounds:\n{stderr}");
    // One column per value, in the order given; a verdict for each against the first.
    let header = text
        .lines()
        .find(|l| l.starts_with("figure"))
        .unwrap_or_else(|| panic!("no table header in\n{text}"));
    let at = |v: &str| {
        header
            .find(&format!("default_process_limit={v} "))
            .unwrap_or(usize::MAX)
    };
    assert!(
        at("100") < at("75") && at("75") < at("50") && at("50") < usize::MAX,
        "{header}"
    );
    let drain = text
        .lines()
        .find(|l| l.starts_with("drain_mpm"))
        .unwrap_or_else(|| panic!("no drain_mpm row in\n{text}"));
    let verdicts: usize = ["faster", "slower", "within noise"]
        .iter()
        .map(|v| drain.matches(v).count())
        .sum();
    assert_eq!(
        verdicts, 2,
        "B and C against A, each with a verdict:\n{text}"
    );
    for (tag, value) in [("A", "100"), ("B", "75"), ("C", "50")] {
        let r = results(&dir.0.join(format!("vary-{tag}.json")));
        let rounds = r["extra"]["rounds"].as_array().expect("rounds");
        assert_eq!(rounds.len(), 4, "{tag}");
        for x in rounds {
            assert_eq!(x["summary"]["delivered"], 200, "{tag}: {x:#}");
        }
        let postconf = r["config"]["relay"]["mta_conf"].to_string();
        assert!(
            postconf.contains(&format!("default_process_limit={value}")),
            "{tag}: {postconf}"
        );
    }
}

/// Issue 31: an MTA comparison's page opens with the best MTA per headline figure: the
/// best median of rounds (worked out here from each MTA's rounds in the results file),
/// and the verdict `compare` prints for the same file; each MTA's own headline gives the
/// median of its rounds, as `compare` does, not the median round's value.
#[test]
fn a_comparison_report_opens_with_the_best_run_per_figure_and_compare_s_verdict() {
    let chromium =
        chromium().expect("chromium-headless-shell: scripts/install-deps.sh --for-tests");
    assert!(
        require("postfix").is_some()
            && Path::new("/opt/mailbench/mtas/exim/.mailbench-packages").exists(),
        "Postfix and the unpacked Exim are needed: scripts/install-deps.sh, scripts/install-mtas.sh"
    );
    let dir = TempDir::new("report-compare");
    let json = dir.0.join("mtas.json");
    run_json(
        &[
            "relay",
            "--lab",
            "postfix,exim",
            "-n",
            "100",
            "--size",
            "2k",
            "-c",
            "4",
        ],
        &json,
    );
    let r = results(&json);
    let sides = r["extra"]["sides"].as_array().expect("one side per MTA");
    let labels: Vec<&str> = sides.iter().filter_map(|s| s["label"].as_str()).collect();
    assert_eq!(labels, ["postfix", "exim"]);
    let out = run_expect(
        &["compare", &json.display().to_string(), "--format", "json"],
        0,
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("compare json");
    let page = report(&chromium, &[&json], &dir.0.join("mtas.html"), &[]);
    page.assert_drawn("comparison", 3, &["throughput"]);
    let winners = page.dom.find("<section id=\"winners\">").expect("winners");
    let headline = page
        .dom
        .find("<section id=\"headline\">")
        .expect("headline");
    assert!(winners < headline, "the best per figure comes first");

    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
    };
    let mut checked = 0;
    for (id, higher) in [
        ("drain_mpm", true),
        ("e2e_p50_ms", false),
        ("e2e_p99_ms", false),
    ] {
        let medians: Vec<f64> = sides
            .iter()
            .map(|s| {
                let mut v: Vec<f64> = s["results"]["extra"]["rounds"]
                    .as_array()
                    .expect("rounds")
                    .iter()
                    .map(|x| x["summary"][id].as_f64().expect(id))
                    .collect();
                assert_eq!(v.len(), 4, "four rounds each");
                median(&mut v)
            })
            .collect();
        if medians[0] == medians[1] {
            continue;
        }
        let best = usize::from((medians[1] > medians[0]) == higher);
        let row = c["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|x| x["name"] == id)
            .expect(id);
        let verdict = if best == 1 {
            row["cells"][1]["verdict"]
                .as_str()
                .expect("verdict")
                .to_string()
        } else {
            match row["cells"][1]["verdict"].as_str().expect("verdict") {
                "faster" => "slower".into(),
                "slower" => "faster".into(),
                v => v.to_string(),
            }
        };
        let other = labels[1 - best];
        let said = if ["faster", "slower"].contains(&verdict.as_str()) {
            format!("{verdict} than {other}")
        } else {
            format!("{verdict} (against {other})")
        };
        let want = format!(
            "data-figure=\"{id}\" data-winner=\"{}\" data-value=\"{}\" data-verdict=\"{said}\"",
            labels[best],
            serde_json::Value::from(medians[best])
        );
        assert!(page.dom.contains(&want), "{want}");
        for (run, s) in sides.iter().enumerate() {
            page.assert_headline(
                "comparison",
                run,
                &[fig(
                    &s["results"],
                    "drain_mpm",
                    "/extra/rounds_summary/drain_mpm/median",
                )],
            );
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} figures had a winner");
}
