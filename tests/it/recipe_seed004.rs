//! Issue 29 — `docs/recipes/seed-004.md` run as written at a small scale: its `sh` block
//! with mailbench on the PATH, on the page's own default queue (a disk queue; issue 40:
//! the test had run tmpfs only), then its outputs against its own results files — postal's
//! CSV header and the accepted messages it adds up to, the comparison table's I/O rows
//! against each MTA's medians in `compare.json`, the queue lines, the lookup lines and
//! the counted 451s of a directory down, and the logging table.

use std::path::Path;
use std::process::Command;

use crate::util::{TempDir, results};

/// The recipe's `sh` block.
fn recipe() -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes/seed-004.md"),
    )
    .expect("docs/recipes/seed-004.md");
    let start = doc.find("```sh\n").expect("the recipe has an sh block") + 6;
    let len = doc[start..].find("```").expect("the sh block ends");
    doc[start..start + len].to_string()
}

/// The first number of a table cell such as `4 ±0.0% (n=4)` or `1.02 ±0.0% (n=4)`.
fn cells(table: &str, row: &str) -> Vec<f64> {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(row))
        .unwrap_or_else(|| panic!("no {row} row in:\n{table}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[1].starts_with('±'))
        .map(|w| w[0].parse().expect("a number"))
        .collect()
}

/// Whether `shown` is `value` as the table rounds it (four significant digits).
fn shown_as(shown: f64, value: f64) -> bool {
    let digits = if value == 0.0 {
        0
    } else {
        (value.abs().log10().floor() as i32 - 3).max(-4)
    };
    (shown - value).abs() <= 0.5 * 10f64.powi(digits) + 1e-9
}

#[test]
fn the_seed_004_recipe_runs_and_its_table_carries_the_results_files_figures() {
    assert!(
        Path::new("/opt/mailbench/mtas/qmail/var/qmail/bin/qmail-send").exists(),
        "qmail is not built for the lab: run scripts/install-mtas.sh"
    );
    let dir = TempDir::new("seed004");
    let bin = Path::new(env!("CARGO_BIN_EXE_mailbench"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-ec", &recipe()])
        .current_dir(&dir.0)
        .env("PATH", path)
        .envs([("N", "200"), ("DURATION", "4s"), ("ROUNDS", "2")])
        .env_remove("QUEUE")
        .output()
        .expect("run sh");
    let said = format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the recipe failed: {said}");
    let file = |name: &str| {
        std::fs::read_to_string(dir.0.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    // The page's default queue is the one that ran: a disk queue, each run's results say.
    for name in [
        "postfix.json",
        "qmail.json",
        "lookup-hash.json",
        "ldap-down.json",
        "qmail-log-off.json",
    ] {
        let r = results(&dir.0.join(name));
        assert_eq!(
            r["config"]["relay"]["queue"], "disk",
            "{name} ran on another queue than the page's default"
        );
    }
    // 1. postal's CSV: its header, and the minutes add up to the messages accepted.
    for mta in ["postfix", "qmail"] {
        let csv = file(&format!("{mta}.csv"));
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("time,messages,data(K),errors,connections,SSL connections")
        );
        let messages: u64 = lines
            .map(|l| {
                l.split(',')
                    .nth(1)
                    .and_then(|m| m.parse::<u64>().ok())
                    .expect(l)
            })
            .sum();
        let r = results(&dir.0.join(format!("{mta}.json")));
        assert_eq!(
            Some(messages),
            r["counters"]["accepted"].as_u64(),
            "{mta}: {csv}"
        );
    }
    // 2-3. The table: each I/O row is the median of each MTA's rounds in compare.json.
    let table = file("table.txt");
    let compare = results(&dir.0.join("compare.json"));
    let sides = compare["extra"]["sides"].as_array().expect("sides");
    let labels: Vec<&str> = sides.iter().filter_map(|s| s["label"].as_str()).collect();
    assert_eq!(labels, ["postfix", "qmail"]);
    for row in [
        "fsyncs_per_msg",
        "files_created_per_msg",
        "renames_per_msg",
        "unlinks_per_msg",
    ] {
        let shown = cells(&table, row);
        assert_eq!(shown.len(), 2, "{row}: {table}");
        for (side, shown) in sides.iter().zip(shown) {
            let median = side["results"]["extra"]["rounds_summary"][row]["median"]
                .as_f64()
                .unwrap_or_else(|| panic!("{row} median of {}", side["label"]));
            assert!(
                shown_as(shown, median),
                "{row} of {}: table {shown}, results {median}",
                side["label"]
            );
        }
    }
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("fsyncs_per_msg"),
        "the recipe prints the I/O rows"
    );
    // 4. The queue lines, one per MTA, and the page with their curves.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("MTA queues").count(), 2, "{stdout}");
    assert!(
        file("seed-004.html").contains("\"id\":\"queue_states\""),
        "the report draws the queues"
    );
    // 5. Lookups: the printed line carries the file's counts; the directory down gives
    //    451s, each counted once in the file and quoted in the text with Postfix's reply.
    for lookup in ["hash", "ldap"] {
        let r = results(&dir.0.join(format!("lookup-{lookup}.json")));
        assert_eq!(r["summary"]["lost"], 0, "{lookup}: {r:#}");
        assert_eq!(
            r["counters"]["accepted"], 200,
            "{lookup}: every recipient is known"
        );
    }
    let ldap = results(&dir.0.join("lookup-ldap.json"));
    let lookups = ldap["summary"]["lookups"].as_u64().expect("ldap lookups");
    assert!(
        stdout.contains(&format!("  lookups    {lookups} (")),
        "the lookups line shows {lookups}: {stdout}"
    );
    let down = results(&dir.0.join("ldap-down.json"));
    let refused: u64 = down["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter(|e| e["code"] == 451)
        .filter_map(|e| e["count"].as_u64())
        .sum();
    assert!(refused > 0, "the directory down refused nobody: {down:#}");
    let row = file("ldap-down.txt")
        .lines()
        .find(|l| l.contains("Temporary lookup failure"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no quoted 451 in ldap-down.txt"));
    assert!(
        row.split_whitespace().any(|w| w == refused.to_string()),
        "the 451 row shows {refused}: {row}"
    );
    assert_eq!(
        down["counters"]["accepted"].as_u64().map(|a| a + refused),
        Some(600),
        "accepted + 451s = sent"
    );
    // 6. Logging: the table has the three qmail runs' drain medians.
    let logging = file("logging.txt");
    let shown = cells(&logging, "drain_mpm");
    assert_eq!(shown.len(), 3, "{logging}");
    for (mode, shown) in ["on", "multilog", "off"].iter().zip(shown) {
        let r = results(&dir.0.join(format!("qmail-log-{mode}.json")));
        let median = r["extra"]["rounds_summary"]["drain_mpm"]["median"]
            .as_f64()
            .unwrap_or_else(|| panic!("drain median of {mode}: {r:#}"));
        assert!(
            shown_as(shown, median),
            "{mode}: table {shown}, results {median}"
        );
        assert_eq!(r["summary"]["lost"], 0, "{mode}");
    }
}
