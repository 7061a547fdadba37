//! Issue 43 — the MTA's CPU by process name: a lab Postfix relaying 300 messages shows
//! the processes `ps` lists for it (smtpd receiving, cleanup and trivial-rewrite filing,
//! qmgr scheduling, smtp delivering to the sink), and their CPU adds up to the tree's
//! total, which is the kernel's count of the lab's cgroup (or `/proc`'s per process); the
//! report draws them stacked over time in a real browser.

use crate::util::{TempDir, describe, require, results, run};

#[test]
fn issue_43_a_lab_postfixs_cpu_by_process_names_its_processes_and_adds_up_to_the_tree() {
    let Some(_) = require("postfix") else {
        return;
    };
    let dir = TempDir::new("cpu-by-process");
    let json = dir.0.join("r.json");
    let j = json.to_string_lossy().to_string();
    let args = ["relay", "--lab", "postfix", "-n", "300", "--json", &j];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let r = results(&json);
    let sut = &r["extra"]["sut"];
    let total = sut["cpu_user_s"].as_f64().expect("cpu_user_s")
        + sut["cpu_sys_s"].as_f64().expect("cpu_sys_s");
    let rows = sut["by_process"].as_array().expect("extra.sut.by_process");
    let cpu = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["cpu_s"].as_f64())
    };
    for name in ["smtpd", "cleanup", "qmgr", "smtp"] {
        assert!(
            cpu(name).is_some_and(|s| s > 0.0),
            "Postfix's {name} used CPU relaying 300 messages: {rows:#?}"
        );
    }
    // The names take every process's own CPU as it was read and the ended ones' tails
    // from their parent's reaped count: what they miss is those counts' rounding, two
    // fields of master's each up to a tick short and given back half a tick each, and
    // the readings at the watch's ends are taken with the MTA idle.
    let named: f64 = rows.iter().filter_map(|r| r["cpu_s"].as_f64()).sum();
    let unnamed = sut["cpu_unnamed_s"].as_f64().expect("cpu_unnamed_s");
    assert!(
        (named + unnamed - total).abs() < 1e-9 && unnamed.abs() <= 0.03,
        "the names' CPU ({named} s) is the tree's ({total} s), 0.03 s apart at most: {unnamed} s unnamed"
    );
    let shares: f64 = rows.iter().filter_map(|r| r["share_pct"].as_f64()).sum();
    assert!(
        (shares - named / total * 100.0).abs() < 1e-6,
        "shares add up to the named part of the total: {shares} %"
    );
    // Interval by interval, as the tree's rates are read.
    for p in r["series"].as_array().expect("series") {
        let Some(s) = p.get("sut") else { continue };
        let tree =
            s["cpu_user_pct"].as_f64().unwrap_or(0.0) + s["cpu_sys_pct"].as_f64().unwrap_or(0.0);
        let by: f64 = s["by_process"]
            .as_object()
            .map_or(0.0, |m| m.values().filter_map(|v| v.as_f64()).sum());
        let dt = p["dt_s"].as_f64().unwrap_or(1.0);
        assert!(
            (by - tree).abs() * dt / 100.0 <= 0.03,
            "at {} s the names' {by} % of a core is the tree's {tree} % (0.03 s apart at most over {dt} s)",
            p["t_s"]
        );
    }
    // The text names the busiest, with its seconds and share as the file has them.
    let text = String::from_utf8_lossy(&out.stdout);
    let top = &rows[0];
    let line = format!(
        "    {:<24} {:>8.2} {:>5.1} %",
        top["name"].as_str().unwrap_or("?"),
        top["cpu_s"].as_f64().unwrap_or(0.0),
        top["share_pct"].as_f64().unwrap_or(0.0)
    );
    assert!(
        text.contains("MTA cost by process") && text.contains(&line),
        "the summary's block shows {line:?}:\n{text}"
    );
    // The report's stacked chart of them draws in a real browser, the busiest name first.
    let Some(chromium) = crate::report::chromium() else {
        return;
    };
    let page = crate::report::report(&chromium, &[&json], &dir.0.join("r.html"), &[]);
    page.assert_drawn("relay", 3, &["sut_cpu", "sut_by_process"]);
    let chart = page
        .dom
        .split("\"id\":\"sut_by_process\"")
        .nth(1)
        .and_then(|c| c.split("\"id\":").next())
        .unwrap_or_else(|| panic!("the chart's data on the page"));
    let top = rows[0]["name"].as_str().unwrap_or("?");
    assert!(chart.contains("\"stacked\":true"), "drawn stacked: {chart}");
    assert!(
        chart.contains(&format!("\"{top}\"")),
        "the stacked chart has a band for the busiest name, {top}: {chart}"
    );
}
