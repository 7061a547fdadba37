//! docs/recipes/seed-001.md run as written, at its small scale: the commands of its "At
//! small scale" block, in order, give seed 001's side-by-side table (capacity and the
//! store's resources for Dovecot and Cyrus) and a report with both stores' CPU against
//! users on one chart; each step's first second (`--settle 1s`) is kept apart.

use crate::util::{TempDir, mailbench};

/// The command lines of the recipe's small-scale block, `$DIR` put in.
fn small_scale(dir: &std::path::Path) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/recipes/seed-001.md"
    ))
    .expect("read docs/recipes/seed-001.md");
    let block = doc
        .split("## At small scale")
        .nth(1)
        .and_then(|s| s.split("```sh").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the recipe's small-scale block");
    block
        .lines()
        .filter(|l| l.starts_with("mailbench "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .map(|w| w.replace("$DIR", &dir.to_string_lossy()))
                .collect()
        })
        .collect()
}

#[test]
fn the_seed_001_recipe_prints_its_table_and_draws_its_chart() {
    let dir = TempDir::new("recipe-seed001");
    let commands = small_scale(&dir.0);
    assert_eq!(
        commands.len(),
        2,
        "a comparison and its report: {commands:?}"
    );
    let out = mailbench()
        .args(&commands[0])
        .output()
        .expect("run mailbench");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = text
        .lines()
        .find(|l| l.starts_with("figure"))
        .unwrap_or_else(|| panic!("no table in:\n{text}"));
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["figure", "dovecot", "cyrus", "change", "verdict"]
    );
    for row in [
        "capacity_users",
        "mean_ms",
        "p95_ms",
        "server cpu % of a core",
        "server disk write KiB/s",
        "server read calls/s",
        "server write calls/s",
        "server peak RSS KiB",
        "server RSS KiB/process",
        "server peak shared KiB",
        "server major faults/s",
        "server net in bytes/s",
        "server net out bytes/s",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "{row} in:\n{text}"
        );
    }
    // `--settle 1s`: each step of each store kept its first second apart, and its counted
    // actions and its settle's add up to the store's.
    let r = crate::util::results(&dir.0.join("seed-001.json"));
    let sides = r["extra"]["sides"].as_array().expect("extra.sides");
    assert_eq!(sides.len(), 2, "dovecot and cyrus");
    for side in sides {
        let r = &side["results"];
        let steps = r["extra"]["capacity"]["steps"].as_array().expect("steps");
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
        let mut sum = 0;
        for st in steps {
            assert_eq!(st["settle"]["duration_s"], 1.0, "{}: {st:#}", side["label"]);
            sum += n(&st["summary"]["actions"]) + n(&st["settle"]["actions"]);
        }
        assert_eq!(
            sum,
            n(&r["summary"]["actions"]),
            "{}: the steps' counted and settle actions vs the store's",
            side["label"]
        );
    }
    let out = mailbench().args(&commands[1]).output().expect("run report");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.0.join("seed-001.html")).expect("the report");
    for want in [
        "\"id\":\"users_store_cpu\"",
        "dovecot: store",
        "cyrus: store",
    ] {
        assert!(page.contains(want), "{want} in the report");
    }
}
