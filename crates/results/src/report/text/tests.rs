//! The text summaries, by layout and by the pieces they share.

use super::parts::{store_lines, sut_table};
use crate::stats::{IntervalPoint, RelayPoint, SutPoint};

#[test]
fn the_mta_table_shows_averages_and_peaks_per_interval() {
    let point = |user: f64, rss_kib: u64| IntervalPoint {
        relay: RelayPoint {
            sut: Some(SutPoint {
                cpu_user_pct: user,
                rss_kib,
                procs: 10,
                ..SutPoint::default()
            }),
            ..RelayPoint::default()
        },
        ..IntervalPoint::default()
    };
    let mut out = String::new();
    sut_table(&mut out, &[point(100.0, 1024), point(300.0, 3072)], "MTA");
    let row = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .map(|l| l.split_whitespace().rev().take(2).collect::<Vec<_>>())
    };
    assert_eq!(row("cpu user"), Some(vec!["300.0", "200.0"]), "{out}");
    assert_eq!(row("memory"), Some(vec!["3.0", "2.0"]), "{out}");
    assert_eq!(row("processes"), Some(vec!["10.0", "10.0"]), "{out}");
}

#[test]
fn issue_25_13_every_rate_of_the_send_line_is_over_one_named_span() {
    // Steps of the protocol's kind; the rate line does not depend on which.
    const STEPS: crate::stats::Steps = crate::stats::Steps(&["connect", "total"]);
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{SendSummary, Summary};
    let mut total = Recorder::new();
    total.counters.sent = 1000;
    total.counters.accepted = 1000;
    total.counters.bytes = 2_000_000;
    // The last transaction ended 2 s in; closing the connections took the run to 20 s.
    let summary = Summary::Send(SendSummary::derive(&total, 1000, 20.0, 2.0));
    let r = Results::assemble(RunParts {
        command: "send",
        run_id: 1,
        started_us: 0,
        duration_s: 20.0,
        config: serde_json::json!({}),
        summary,
        steps: STEPS,
        self_report: SelfReport::default(),
        total,
        series: Vec::new(),
    });
    let out = super::render(&r, STEPS, "send");
    let want = "rate       500.0 msg/s   30000 msg/min   2.00 MB accepted (1.00 MB/s), over the active span (2.000 s)";
    assert!(out.contains(want), "expected {want:?} in:\n{out}");
}

/// The logs kept beside a results file (an MTA's, then a store's) are named in one line
/// of the summary's tail, so that the check against the servers' own logs is one step.
#[test]
fn the_kept_logs_are_named_in_the_tail() {
    let mut r = sample_results(crate::stats::kind::KINDS[0]);
    let mut out = String::new();
    super::parts::render_tail(&r, &mut out);
    assert!(!out.contains("  logs "), "no log was kept: {out}");
    r.extra.insert(
        "mta_logs".into(),
        serde_json::json!(["/r/a.maillog.0", "/r/a.maillog.1"]),
    );
    r.extra
        .insert("store_logs".into(), serde_json::json!(["/r/a.storelog.0"]));
    let mut out = String::new();
    super::parts::render_tail(&r, &mut out);
    let want = "  logs       the servers' own, kept to check the figures against: /r/a.maillog.0, /r/a.maillog.1, /r/a.storelog.0\n";
    assert!(out.contains(want), "expected {want:?} in:\n{out}");
}

/// A results file of kind `k` around its sample summary, as a run of one second writes it.
fn sample_results(k: &crate::stats::kind::Kind) -> crate::stats::results::Results {
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    Results::assemble(RunParts {
        command: k.name,
        run_id: 1,
        started_us: 0,
        duration_s: 1.0,
        config: serde_json::json!({}),
        summary: crate::stats::kind::tests::sample(k),
        steps: k.steps,
        self_report: SelfReport::default(),
        total: Recorder::new(),
        series: Vec::new(),
    })
}

/// Every kind of run in the registry: a results file of it is read back to the same
/// summary, and shown in its own layout, headline to tail.
#[test]
fn every_kind_of_run_reads_back_and_renders() {
    use crate::stats::kind::KINDS;
    use crate::stats::results::Results;
    let dir = std::env::temp_dir().join(format!("mailbench-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for k in KINDS {
        let r = sample_results(k);
        let summary = r.summary.clone();
        let path = dir.join(format!("{}.json", k.name));
        r.write(&path).expect("write");
        let back = Results::read(&path).expect("read back");
        assert_eq!(back.summary, summary, "{}", k.name);
        let out = super::summary(&back, k.name);
        assert!(out.starts_with(&format!("{}\n\n  ", k.name)), "{out}");
        assert!(
            out.contains("\n  tool       cpu "),
            "{}: no tail in\n{out}",
            k.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mailbox run's rate names its span: 200 commands done 0.045 s in, while a refused
/// login (the server's auth delay) took the run to 1.53 s, is 4,444 commands/s over
/// the 0.045 s the commands took — said so, not left to look like 200 over 1.53 s. The
/// rate counts what the server answered, refused included; the three that timed out are
/// not throughput.
#[test]
fn a_mailbox_rate_names_its_active_span() {
    const STEPS: crate::stats::Steps = crate::stats::Steps(&["connect", "total"]);
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{ImapSummary, Pop3Summary, Summary};
    let mut total = Recorder::new();
    total.counters.sent = 203;
    total.counters.accepted = 190;
    total.counters.rejected = 10;
    total.counters.errors = 3;
    let parts = |command, summary| RunParts {
        command,
        run_id: 1,
        started_us: 0,
        duration_s: 1.53,
        config: serde_json::json!({}),
        summary,
        steps: STEPS,
        self_report: SelfReport::default(),
        total: total.clone(),
        series: Vec::new(),
    };
    let imap = Summary::Imap(ImapSummary::derive(&total, 200, 1.53, 0.045));
    let out = super::render_imap(&Results::assemble(parts("imap", imap)), STEPS, "imap");
    let want = "rate       4444.4 commands/s, over the active span (0.045 s: to the last completed command)";
    assert!(out.contains(want), "expected {want:?} in:\n{out}");
    let pop3 = Summary::Pop3(Pop3Summary::derive(&total, 200, 1.53, 0.045));
    let out = super::render_pop3(&Results::assemble(parts("pop3", pop3)), STEPS, "pop3");
    let want = "over the active span (0.045 s: to the last completed session)";
    assert!(out.contains(want), "expected {want:?} in:\n{out}");
    // Nothing answered (three timeouts): no span to name, and no rate.
    let mut lost = Recorder::new();
    lost.counters.sent = 3;
    lost.counters.errors = 3;
    let imap = Summary::Imap(ImapSummary::derive(&lost, 3, 0.94, 0.94));
    let out = super::render_imap(&Results::assemble(parts("imap", imap)), STEPS, "imap");
    let want = "rate       0.0 commands/s (the server answered none)\n";
    assert!(out.contains(want), "expected {want:?} in:\n{out}");
}

/// The replies line adds up to the answers: a code the summary has no key for
/// (BADVERS for an EDNS version 1 question) is printed from the server's tally.
#[test]
fn the_dns_replies_line_shows_every_code() {
    const STEPS: crate::stats::Steps = crate::stats::Steps(&["answer"]);
    use crate::stats::Recorder;
    use crate::stats::dns::DnsSummary;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::Summary;
    let summary = Summary::Dns(DnsSummary {
        questions: 6,
        answered: 6,
        noerror: 3,
        nxdomain: 2,
        ..DnsSummary::default()
    });
    let mut r = Results::assemble(RunParts {
        command: "dns",
        run_id: 1,
        started_us: 0,
        duration_s: 1.0,
        config: serde_json::json!({}),
        summary,
        steps: STEPS,
        self_report: SelfReport::default(),
        total: Recorder::new(),
        series: Vec::new(),
    });
    r.extra.insert(
        "dns".into(),
        serde_json::json!({"by_rcode": {"noerror": 3, "nxdomain": 2, "badvers": 1}}),
    );
    let out = super::render_dns(&r, "dns");
    assert!(
        out.contains("formerr 0  badvers 1"),
        "expected badvers 1 in the replies line:\n{out}"
    );
}

#[test]
fn no_mta_samples_no_table() {
    let mut out = String::new();
    sut_table(&mut out, &[IntervalPoint::default()], "MTA");
    assert_eq!(out, "");
}

#[test]
fn a_lab_store_shows_its_limits_and_its_own_counts() {
    let extra = serde_json::json!({
        "store_limits": {"pop3 mail_max_userip_connections": "100000"},
        "store_stats": [
            {"name": "logins", "count": 4, "mean_us": 52.6, "p50_us": 50, "p95_us": 60, "max_us": 61},
            {"name": "deliveries", "count": 6, "mean_us": 1216.0, "p50_us": 900, "p95_us": 2000, "max_us": 2100}
        ]
    });
    let extra = serde_json::from_value(extra).expect("a map");
    let mut out = String::new();
    store_lines(&mut out, &extra);
    assert_eq!(
        out,
        "  store limits pop3 mail_max_userip_connections 100000\n  store's own count since it started: logins 4 (mean 0.053 ms)  deliveries 6 (mean 1.216 ms)\n"
    );
    let mut none = String::new();
    store_lines(&mut none, &Default::default());
    assert_eq!(none, "", "no lab, no store lines");
}

#[test]
fn a_stores_memory_io_paging_and_network_lines() {
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{ImapSummary, Summary};
    const STEPS: crate::stats::Steps = crate::stats::Steps(&["total"]);
    let total = Recorder::new();
    let mut r = Results::assemble(RunParts {
        command: "imap",
        run_id: 1,
        started_us: 0,
        duration_s: 2.0,
        config: serde_json::json!({}),
        summary: Summary::Imap(ImapSummary::derive(&total, 0, 2.0, 2.0)),
        steps: STEPS,
        self_report: SelfReport::default(),
        total,
        series: vec![IntervalPoint {
            relay: RelayPoint {
                sut: Some(SutPoint {
                    net_in_bytes_s: Some(2048.0),
                    net_out_bytes_s: Some(65536.0),
                    read_calls_s: Some(12.5),
                    shared_kib: Some(3072),
                    ..SutPoint::default()
                }),
                ..RelayPoint::default()
            },
            ..IntervalPoint::default()
        }],
    });
    r.extra.insert(
        "sut".into(),
        serde_json::json!({
            "cpu_user_s": 0.5, "cpu_sys_s": 0.25, "cpu_avg_pct": 37.5,
            "peak_rss_kib": 40960, "peak_procs": 8, "rss_per_proc_kib": 5120.0,
            "peak_shared_kib": 20480, "disk_read_calls_per_s": 12.5,
            "disk_write_calls_per_s": 4.0, "major_faults_per_s": 0.5,
            "net_in_bytes_per_s": 2048.0, "net_out_bytes_per_s": 65536.0,
            "net_in_bytes": 4096, "net_out_bytes": 131072,
        }),
    );
    let out = super::render_imap(&r, STEPS, "imap");
    for want in [
        "store mem  peak RSS 40960 KiB, peak 8 processes, 5120 KiB per process, peak shared 20480 KiB",
        "store io   12.5 read calls/s, 4.0 write calls/s, 0.5 major page faults/s",
        "store net  in 2048 bytes/s, out 65536 bytes/s (4096 and 131072 bytes, counted at mailbench's clients)",
    ] {
        assert!(out.contains(want), "expected {want:?} in:\n{out}");
    }
    let row = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .map(|l| l.split_whitespace().rev().take(2).collect::<Vec<_>>())
    };
    assert_eq!(row("network in"), Some(vec!["2048.0", "2048.0"]), "{out}");
    assert_eq!(
        row("network out"),
        Some(vec!["65536.0", "65536.0"]),
        "{out}"
    );
    assert_eq!(row("of it shared"), Some(vec!["3.0", "3.0"]), "{out}");
    assert_eq!(row("read calls/s"), Some(vec!["12.5", "12.5"]), "{out}");
    assert_eq!(row("write calls/s"), None, "not read: not shown");
}

/// Issue 40: a `--find-max` run's summary block is its last step's (775 messages of the
/// 4,225 the search sent), and said so: a reader took it for the whole run's.
#[test]
fn a_capacity_searchs_summary_says_it_is_the_last_steps() {
    use crate::stats::Recorder;
    use crate::stats::kind::KINDS;
    use crate::stats::results::{Results, RunParts, SelfReport};
    let k = KINDS
        .iter()
        .find(|k| k.name == "relay")
        .expect("relay kind");
    let mut r = Results::assemble(RunParts {
        command: "relay",
        run_id: 1,
        started_us: 0,
        duration_s: 1.0,
        config: serde_json::json!({}),
        summary: crate::stats::kind::tests::sample(k),
        steps: k.steps,
        self_report: SelfReport::default(),
        total: Recorder::new(),
        series: Vec::new(),
    });
    let plain = super::summary(&r, "relay");
    assert!(!plain.contains("the last of"), "{plain}");
    let steps = serde_json::json!([{"rate_per_sec": 40.0}, {"rate_per_sec": 80.0}, {"rate_per_sec": 160.0}]);
    r.extra.insert("find_max".into(), steps.clone());
    let out = super::summary(&r, "relay");
    assert!(
        out.contains("the figures down to the table are the last of the search's 3 steps"),
        "{out}"
    );
    r.extra.remove("find_max");
    r.extra.insert("sweep".into(), steps);
    let out = super::summary(&r, "relay");
    assert!(out.contains("the last of the sweep's 3 levels"), "{out}");
}

/// A tarpit fires on every reply, so it has no count among the faults: the sink's and the
/// relay's summaries name it from the configuration (0.05 s in, 0.05 s out); so are the
/// shaped links.
#[test]
fn an_active_tarpit_is_named_in_the_sink_and_relay_summaries() {
    use crate::stats::Recorder;
    use crate::stats::kind::KINDS;
    use crate::stats::results::{Results, RunParts, SelfReport};
    for (name, config, want) in [
        (
            "sink",
            serde_json::json!({"tarpit_s": 0.05}),
            "  faults     tarpit 0.05 s before every reply\n",
        ),
        (
            "relay",
            serde_json::json!({"relay": {"sink_tarpit_s": 0.05}}),
            "  receiver   tarpit 0.05 s before every reply (--sink-tarpit)",
        ),
        // Issue 43: each shaped hop named by where it is, with its shape.
        (
            "relay",
            serde_json::json!({"relay": {"links": [
                {"hop": "mta-mta", "delay": 50.0, "jitter": 5.0, "rate_bytes_s": null},
                {"hop": "sink", "delay": 0.0, "jitter": 0.0, "rate_bytes_s": 1000},
            ]}}),
            "  link       MTA to MTA: 50 ms ± 5 ms delay; MTA to sink: 1000 bytes/s per connection each way (--link)\n",
        ),
    ] {
        let k = KINDS.iter().find(|k| k.name == name).expect("kind");
        let r = Results::assemble(RunParts {
            command: k.name,
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config,
            summary: crate::stats::kind::tests::sample(k),
            steps: k.steps,
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series: Vec::new(),
        });
        let out = super::summary(&r, name);
        assert!(out.contains(want), "{name}: expected {want:?} in\n{out}");
    }
}

/// Issue 42: a run in which messages arrived cut or altered says how many of the delivered
/// arrived intact and how many damaged, on the delivery line and the fault line; a run
/// without any says nothing more than before.
#[test]
fn issue_42_the_delivery_and_fault_lines_tell_intact_from_damaged() {
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{RelaySummary, Summary};
    let relay = |damaged| RelaySummary {
        expected_recipients: 300,
        delivered: 294,
        delivered_messages: 294,
        lost: 6,
        damaged,
        fault: Some("power-loss@100".into()),
        fault_at_s: Some(1.0),
        fault_accepted_before: Some(100),
        fault_down_s: Some(0.13),
        fault_duplicated_messages: Some(0),
        fault_unsynced_files: Some(86),
        ..RelaySummary::default()
    };
    let text = |s: RelaySummary| {
        let r = Results::assemble(RunParts {
            command: "relay",
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config: serde_json::json!({}),
            summary: Summary::Relay(s),
            steps: crate::stats::kind::KINDS[0].steps,
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series: Vec::new(),
        });
        super::summary(&r, "relay")
    };
    let out = text(relay(7));
    assert!(
        out.contains(
            "delivered  294 of 300 recipients (294 messages: 287 intact, 7 damaged, cut or altered)  bounced 0  lost 6"
        ),
        "{out}"
    );
    assert!(
        out.contains("86 queue files unsynced at the cut; nothing delivered after the restart; lost 6, damaged 7 (arrived cut or altered), duplicated 0 messages"),
        "{out}"
    );
    let out = text(relay(0));
    assert!(
        out.contains("delivered  294 of 300 recipients (294 messages)  bounced 0"),
        "{out}"
    );
    // Open loop (nothing made up): the failures are the outage's cost, said.
    let mut open = relay(0);
    open.injection.errors = 176;
    let out = text(open);
    assert!(
        out.contains("86 queue files unsynced at the cut; 176 sends failed in all (see errors), none replaced: the open loop kept its schedule; nothing delivered"),
        "{out}"
    );
    assert!(
        out.contains("lost 6, damaged 0 (arrived cut or altered)"),
        "{out}"
    );
}

/// A newcomer's finding: a crash run with a paced sink showed "negative replies 0 (sink
/// rules fired: paced 337)" with 295 deliveries. A pace refuses nothing, and it counts
/// the replies it held, one per copy the MTA sent (again after the crash, or twice): the
/// held replies get their own line saying so, the negative replies keep the rules that
/// refused.
#[test]
fn a_paces_held_replies_are_not_among_the_negative_replies() {
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{RelaySummary, Summary};
    let text = |rejected: u64, faults: serde_json::Value| {
        let mut r = Results::assemble(RunParts {
            command: "relay",
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config: serde_json::json!({}),
            summary: Summary::Relay(RelaySummary {
                expected_recipients: 300,
                delivered: 295,
                delivered_messages: 295,
                receiver_rejected: Some(rejected),
                ..RelaySummary::default()
            }),
            steps: crate::stats::kind::KINDS[0].steps,
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series: Vec::new(),
        });
        r.extra
            .insert("sink".into(), serde_json::json!({ "faults": faults }));
        super::summary(&r, "relay")
    };
    let lines = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("  receiver "))
            .map(String::from)
            .collect()
    };
    let out = text(
        0,
        serde_json::json!({"paced": 337, "reply_4xx": 0, "delay": 0}),
    );
    assert_eq!(
        lines(&out),
        [
            "  receiver   negative replies 0: each a delivery the MTA had to try again or bounce",
            "  receiver   replies held, none refused: paced 337 (sink rules' replies that waited: one per reply sent, every copy or retry of a message counted again)",
        ],
        "in\n{out}"
    );
    let out = text(
        7,
        serde_json::json!({"paced": 0, "reply_4xx": 4, "greylist": 3, "delay": 12}),
    );
    assert_eq!(
        lines(&out),
        [
            "  receiver   negative replies 7 (sink rules fired: greylist 3  reply_4xx 4): each a delivery the MTA had to try again or bounce",
            "  receiver   replies held, none refused: delay 12 (sink rules' replies that waited: one per reply sent, every copy or retry of a message counted again)",
        ],
        "in\n{out}"
    );
    let out = text(0, serde_json::json!({"paced": 0}));
    assert_eq!(
        lines(&out),
        ["  receiver   negative replies 0: each a delivery the MTA had to try again or bounce"],
        "no held line when nothing was held, in\n{out}"
    );
}

/// A newcomer's finding: the relay summary showed banner p50 0 and, pipelined, rcpt and
/// data 0 ms, which nothing explained. A step's wait runs from the reply before it (or
/// the connect) to its own, kept in whole µs: 0 was a reply already there when the wait
/// began, a greeting sent at once or a pipelined reply that came with the one before.
/// The table prints it `<0.001` and says so; the results file keeps its 0 µs. And
/// "delivering at" says in place what pace it is.
#[test]
fn a_reply_already_there_shows_under_a_microsecond_and_pipelining_is_explained() {
    use crate::stats::Recorder;
    use crate::stats::hist::HistJson;
    use crate::stats::recorder::new_histogram;
    use crate::stats::results::{Results, RunParts, SelfReport};
    use crate::stats::summary::{RelaySummary, Summary};
    let hist = |us: &[u64]| {
        let mut h = new_histogram();
        for v in us {
            let _ = h.record(*v);
        }
        HistJson::from_hist(&h)
    };
    let text = |pipelining: bool, rcpt: &[u64]| {
        let steps = crate::stats::kind::KINDS
            .iter()
            .find(|k| k.name == "relay")
            .expect("relay kind")
            .steps;
        let mut r = Results::assemble(RunParts {
            command: "relay",
            run_id: 1,
            started_us: 0,
            duration_s: 1.0,
            config: serde_json::json!({ "pipelining": pipelining }),
            summary: Summary::Relay(RelaySummary {
                expected_recipients: 300,
                delivered: 300,
                delivered_messages: 300,
                drain_mpm: Some(9951.0),
                drain_s: Some(1.5),
                delivery_per_sec: Some(298.84),
                ..RelaySummary::default()
            }),
            steps,
            self_report: SelfReport::default(),
            total: Recorder::new(),
            series: Vec::new(),
        });
        r.latency.clear();
        r.latency.insert("banner".into(), hist(&[0, 0, 0, 12]));
        r.latency.insert("mail".into(), hist(&[3, 4, 29_119]));
        r.latency.insert("rcpt".into(), hist(rcpt));
        (super::summary(&r, "relay"), r)
    };
    let rows = |out: &str| -> Vec<String> {
        out.lines()
            .skip_while(|l| !l.starts_with("  latency ms"))
            .take_while(|l| !l.is_empty() && !l.starts_with("  errors"))
            .map(String::from)
            .collect()
    };
    let (out, r) = text(true, &[0, 0, 0, 1, 2]);
    assert_eq!(r.latency["rcpt"].p50_us, 0, "the file keeps the 0 µs");
    assert_eq!(
        rows(&out),
        [
            "  latency ms     count       p50       p90       p99     p99.9       max",
            "  banner             4    <0.001     0.012     0.012     0.012     0.012",
            "  mail               3     0.004    29.119    29.119    29.119    29.119",
            "  rcpt               5    <0.001     0.002     0.002     0.002     0.002",
            "  (a step is timed from the reply before it, or the connect, to its own reply: <0.001, under 1 µs, is a reply",
            "   already there when its wait began, as a greeting sent at once)",
            "  (pipelined: MAIL, RCPT and DATA go in one write and their replies come back together, so the round trip",
            "   is in the group's first reply, mail's, or data_end's when the next transaction went with it; rcpt and",
            "   data show the wait after it, none)",
        ],
        "in\n{out}"
    );
    assert!(
        out.contains(
            "drain 9951 messages/min (last arrival 1.50 s after the first injection), delivering at 298.8/s (the pace between the first and last 5 % of arrivals)"
        ),
        "{out}"
    );
    // Not pipelined: no pipelining note; the <0.001 note stays for the banner.
    let (out, _) = text(false, &[0, 0, 0, 1, 2]);
    assert!(
        out.contains("as a greeting sent at once)") && !out.contains("(pipelined:"),
        "{out}"
    );
    // Only the banner under 1 µs: its note, none for pipelining.
    let (out, _) = text(true, &[5, 6, 7]);
    assert!(
        out.contains("as a greeting sent at once)") && !out.contains("(pipelined:"),
        "{out}"
    );
}

/// A relay summary's text from `s` alone, for the tests of its lines.
fn relay_text(s: crate::stats::summary::RelaySummary) -> String {
    use crate::stats::Recorder;
    use crate::stats::results::{Results, RunParts, SelfReport};
    let r = Results::assemble(RunParts {
        command: "relay",
        run_id: 1,
        started_us: 0,
        duration_s: 1.0,
        config: serde_json::json!({}),
        summary: crate::stats::summary::Summary::Relay(s),
        steps: crate::stats::kind::KINDS[0].steps,
        self_report: SelfReport::default(),
        total: Recorder::new(),
        series: Vec::new(),
    });
    super::summary(&r, "relay")
}

/// A newcomer's finding: `relay --lab sendmail --fault power-loss@100` printed "MTA log
/// delivered 117" against "delivered 100 of 100": the log counts the 17 messages Sendmail
/// had queued when the cut took their 250 from the client. The line says so where the
/// counts differ, and nothing more where they agree. A closed-loop power-loss@100 on
/// Sendmail here logged 303 against the sink's 300 + 7 cut: Sendmail delivers before its
/// 250 and logs after, so a kill between leaves deliveries with no log line, said too;
/// and the duplicates, second deliveries the log counts as well.
#[test]
fn the_mta_log_line_says_why_it_counts_more_than_were_accepted() {
    use crate::stats::summary::RelaySummary;
    let run = |sent, aborted_delivered| RelaySummary {
        expected_recipients: 100,
        delivered: 100,
        delivered_messages: 100,
        aborted_delivered,
        duplicates: 0,
        maillog_sent: Some(sent),
        queued_left: Some(0),
        ..RelaySummary::default()
    };
    let line = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("  MTA log"))
            .unwrap_or_default()
            .to_string()
    };
    let cases = [
        (
            run(117, 17),
            "  MTA log    delivered 117 (17 more than the 100 accepted ones delivered: the sink got 17 from transactions cut before their 250 reached the client, after the MTA had queued them)  still queued 0",
        ),
        (
            run(103, 0),
            "  MTA log    delivered 103 (3 more than the 100 accepted ones delivered: transactions cut before their 250 reached the client, after the MTA had queued them, or mail not of this run)  still queued 0",
        ),
        (
            run(98, 0),
            "  MTA log    delivered 98 (2 fewer than the 100 the receiver counted)  still queued 0",
        ),
        (
            run(103, 7),
            "  MTA log    delivered 103 (3 more than the 100 accepted ones delivered: the sink got 7 from transactions cut before their 250 reached the client, after the MTA had queued them, and 4 of the sink's 107 deliveries have no line in the log)  still queued 0",
        ),
        // A newcomer's Sendmail power cut: 39 more, 7 cut and 32 delivered twice.
        (
            RelaySummary {
                duplicates: 32,
                ..run(139, 7)
            },
            "  MTA log    delivered 139 (39 more than the 100 accepted ones delivered: the sink got 7 from transactions cut before their 250 reached the client, after the MTA had queued them, and 32 second copies of accepted messages (duplicates))  still queued 0",
        ),
        (run(100, 0), "  MTA log    delivered 100  still queued 0"),
    ];
    for (s, want) in cases {
        let out = relay_text(s);
        assert_eq!(
            line(&out),
            want,
            "expected {want:?}, got {:?}\n{out}",
            line(&out)
        );
    }
}

/// A newcomer's finding: "to flush +0.00 s" when the last message arrived before the
/// end of injection read as a flush that took no time. The line says it came before the
/// end of injection, and how long before.
#[test]
fn a_last_arrival_before_the_end_of_injection_is_not_plus_zero() {
    use crate::stats::summary::RelaySummary;
    let line = |s: RelaySummary| {
        let out = relay_text(s);
        out.lines()
            .find(|l| l.starts_with("  to flush"))
            .unwrap_or_default()
            .to_string()
    };
    let before = RelaySummary {
        last_arrival_after_injection_s: Some(0.0),
        last_arrival_before_injection_end_s: Some(0.42),
        drain_end_after_injection_s: Some(1.5),
        ..RelaySummary::default()
    };
    assert_eq!(
        line(before),
        "  to flush   last arrival 0.42 s before the end of injection (nothing left to flush), drain ended +1.50 s after the end of injection"
    );
    let after = RelaySummary {
        last_arrival_after_injection_s: Some(1.35),
        drain_end_after_injection_s: Some(2.0),
        ..RelaySummary::default()
    };
    assert_eq!(
        line(after),
        "  to flush   last arrival +1.35 s, drain ended +2.00 s after the end of injection"
    );
    let none = RelaySummary {
        drain_end_after_injection_s: Some(10.0),
        ..RelaySummary::default()
    };
    assert_eq!(
        line(none),
        "  to flush   no arrival, drain ended +10.00 s after the end of injection"
    );
}
