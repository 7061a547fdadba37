//! `mailbench compare`: the same figures of several runs side by side, each candidate's
//! change against the baseline in %, and a verdict that takes the noise into account —
//! the seeds' version-against-version tables, made honest on a shared machine. A side is
//! one results file, or several (`--baseline a1 a2 … --candidate b1 b2 …`); a file holding
//! rounds (`--rounds`) gives one value per round. `metrics` reads the figures from a
//! results document, `noise` is the test (see `docs/compare.md` for the method), `render`
//! prints the table as text, Markdown, CSV, JSON or HTML.

pub mod metrics;
pub mod noise;
pub mod render;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use metrics::{Better, Figure};

/// One side of the comparison: a label and its results documents.
pub struct Side {
    /// Column name.
    pub label: String,
    /// The results documents (as JSON) of this side.
    pub docs: Vec<Value>,
}

impl Side {
    /// A side of one results document.
    pub fn of(label: String, r: &crate::stats::Results) -> Result<Side, String> {
        let doc = serde_json::to_value(r).map_err(|e| e.to_string())?;
        Ok(Side {
            label,
            docs: vec![doc],
        })
    }
}

/// One compared figure across the sides.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The figure's name.
    pub name: String,
    /// Which way is good.
    pub better: Better,
    /// One cell per side, the baseline first.
    pub cells: Vec<Cell>,
}

/// A figure on one side.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Median of the side's values (`None`: the side does not have this figure).
    pub median: Option<f64>,
    /// Half the range of the values, in % of the median.
    pub spread_pct: f64,
    /// How many values (runs or rounds).
    pub n: usize,
    /// Change of the median against the baseline's, in % (`None` for the baseline, or
    /// when the baseline is 0).
    pub change_pct: Option<f64>,
    /// `faster`, `slower`, `better`, `worse`, `within noise`, `within resolution` (a
    /// latency difference the histograms cannot resolve), `too few rounds` or `single
    /// runs` (`None` for the baseline).
    pub verdict: Option<String>,
    /// Mann-Whitney p-value where a test was made.
    pub p: Option<f64>,
}

/// The whole comparison, as every format prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Side labels, the baseline first.
    pub sides: Vec<String>,
    /// The rows.
    pub rows: Vec<Row>,
    /// Workload keys whose values differ between the sides (compared anyway: `--force`).
    pub differing: Vec<String>,
    /// The row that `--fail-if-slower` judges.
    pub primary: Option<String>,
    /// What a row's numbers alone do not say (a capacity that is only a lower bound).
    pub notes: Vec<String>,
}

/// Configuration keys that describe the system under test or the outputs, not the
/// workload: runs that differ only in these are comparable.
const NOT_WORKLOAD: &[&str] = &[
    "target",
    "targets",
    "listen",
    "thresholds",
    "interval_s",
    "relay",
    "lab",
    "store",
    "sut_pids",
    "queue_cmd",
    "rounds",
    "label",
];

/// The workload of a results document: its command and its configuration without
/// [`NOT_WORKLOAD`], flattened to dotted keys.
fn workload(doc: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("command".to_string(), doc["command"].to_string());
    fn walk(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if prefix.is_empty() && NOT_WORKLOAD.contains(&k.as_str()) {
                        continue;
                    }
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            v => {
                out.insert(prefix.to_string(), v.to_string());
            }
        }
    }
    walk("", &doc["config"], &mut out);
    out
}

/// The keys whose values differ between any document and the first.
fn differing(sides: &[Side]) -> Vec<String> {
    let mut docs = sides.iter().flat_map(|s| s.docs.iter());
    let Some(first) = docs.next().map(workload) else {
        return Vec::new();
    };
    let mut keys: Vec<String> = Vec::new();
    for d in docs {
        let w = workload(d);
        for k in first.keys().chain(w.keys()) {
            if first.get(k) != w.get(k) && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.sort();
    keys
}

/// The side's notes: a profile ramp that never broke measured no capacity, only that the
/// store held its largest step (its `capacity_users` is "at least").
fn notes(side: &Side) -> Vec<String> {
    let at_least = |d: &Value| {
        let c = &d["extra"]["capacity"];
        c["capacity_at_least"]
            .as_bool()
            .filter(|b| *b)
            .and(c["capacity_users"].as_u64())
    };
    let docs = side
        .docs
        .iter()
        .flat_map(|d| match d["extra"]["rounds"].as_array() {
            Some(rounds) if !rounds.is_empty() => rounds.iter().collect(),
            _ => vec![d],
        });
    docs.filter_map(at_least)
        .min()
        .map(|n| {
            format!(
                "{}: capacity_users is at least {n}: its ramp never broke (every step held)",
                side.label
            )
        })
        .into_iter()
        .collect()
}

/// The values a side gives: one per round where a file holds rounds, else one per file.
fn samples(side: &Side) -> Vec<Vec<Figure>> {
    side.docs
        .iter()
        .flat_map(|d| match d["extra"]["rounds"].as_array() {
            Some(rounds) if !rounds.is_empty() => rounds.iter().map(metrics::figures).collect(),
            _ => vec![metrics::figures(d)],
        })
        .collect()
}

/// Compares `sides` (the first is the baseline). Refuses sides whose workloads differ
/// unless `force`, naming the keys.
pub fn compare(sides: &[Side], force: bool) -> Result<Comparison, String> {
    if sides.len() < 2 {
        return Err("compare needs at least two results files (a baseline and a candidate)".into());
    }
    let differing = differing(sides);
    if !differing.is_empty() && !force {
        return Err(format!(
            "the runs' workloads differ in {}; compare runs of the same workload, or pass --force to compare them anyway",
            differing.join(", ")
        ));
    }
    let per_side: Vec<Vec<Vec<Figure>>> = sides.iter().map(samples).collect();
    // Row names in the baseline's order, then those only candidates have.
    let mut names: Vec<(String, Better, bool)> = Vec::new();
    for f in per_side.iter().flatten().flatten() {
        if !names.iter().any(|(n, _, _)| *n == f.name) {
            names.push((f.name.clone(), f.better, f.from_hist));
        }
    }
    let primary = metrics::PRIMARY
        .iter()
        .find(|p| names.iter().any(|(n, _, _)| n == *p))
        .map(|p| (*p).to_string());
    // With one run per side, the primary rate's verdict uses batch means of its series.
    let single = sides.iter().all(|s| s.docs.len() == 1) && per_side.iter().all(|s| s.len() == 1);
    let batches: Vec<Vec<f64>> = sides
        .iter()
        .map(|s| noise::batch_means(&metrics::interval_rates(&s.docs[0]), 10))
        .collect();
    let rows = names
        .into_iter()
        .map(|(name, better, from_hist)| {
            let values: Vec<Vec<f64>> = per_side
                .iter()
                .map(|s| {
                    s.iter()
                        .filter_map(|figs| figs.iter().find(|f| f.name == name).map(|f| f.value))
                        .collect()
                })
                .collect();
            let tested: Vec<&[f64]> = if single && primary.as_deref() == Some(name.as_str()) {
                batches.iter().map(Vec::as_slice).collect()
            } else {
                values.iter().map(Vec::as_slice).collect()
            };
            let base = noise::median(&values[0]);
            let cells = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut c = cell(i, v, base, better, tested[0], tested[i]);
                    // A latency difference below the histograms' resolution is no verdict.
                    if from_hist
                        && let (true, Some(m)) = (i > 0, c.median)
                        && (m - base).abs() <= metrics::resolution_ms(m, base)
                    {
                        c.verdict = Some("within resolution".into());
                        c.p = None;
                    }
                    c
                })
                .collect();
            Row {
                name,
                better,
                cells,
            }
        })
        .collect();
    Ok(Comparison {
        sides: sides.iter().map(|s| s.label.clone()).collect(),
        rows,
        differing,
        primary,
        notes: sides.iter().flat_map(notes).collect(),
    })
}

fn cell(i: usize, v: &[f64], base: f64, better: Better, tb: &[f64], tc: &[f64]) -> Cell {
    if v.is_empty() {
        return Cell {
            median: None,
            spread_pct: 0.0,
            n: 0,
            change_pct: None,
            verdict: None,
            p: None,
        };
    }
    let median = noise::median(v);
    let change_pct = (i > 0 && base != 0.0).then(|| (median - base) / base.abs() * 100.0);
    let (verdict, p) = if i == 0 {
        (None, None)
    } else if tb.len() < noise::MIN_ROUNDS || tc.len() < noise::MIN_ROUNDS {
        let why = if tb.len() <= 1 && tc.len() <= 1 {
            "single runs"
        } else {
            "too few rounds"
        };
        (Some(why.to_string()), None)
    } else {
        let p = noise::mann_whitney_p(tb, tc);
        let up = noise::median(tc) > noise::median(tb);
        let word = if p >= noise::ALPHA {
            "within noise"
        } else {
            match (better, up) {
                (Better::Higher, true) | (Better::Lower, false) => "faster",
                (Better::Higher, false) | (Better::Lower, true) => "slower",
                (Better::Less, false) => "better",
                (Better::Less, true) => "worse",
            }
        };
        (Some(word.to_string()), Some(p))
    };
    Cell {
        median: Some(median),
        spread_pct: noise::spread_pct(v),
        n: v.len(),
        change_pct,
        verdict,
        p,
    }
}

impl Comparison {
    /// Candidates whose primary rate is more than `pct` % below the baseline's and not
    /// within the noise (a bare change decides where no test could be made).
    pub fn slower_than(&self, pct: f64) -> Vec<String> {
        let Some(row) = self
            .primary
            .as_ref()
            .and_then(|p| self.rows.iter().find(|r| &r.name == p))
        else {
            return Vec::new();
        };
        row.cells
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, c)| {
                let beyond = c.change_pct.is_some_and(|ch| ch < -pct);
                let noise = matches!(
                    c.verdict.as_deref(),
                    Some("within noise" | "within resolution" | "faster")
                );
                beyond && !noise
            })
            .map(|(i, _)| self.sides[i].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mpm: f64, p99_us: u64, size: u64) -> Value {
        serde_json::json!({
            "command": "send",
            "config": {"size": size, "target": "127.0.0.1:25"},
            "summary": {"mpm": mpm, "lost": 0},
            "latency": {"total": {"p50_us": 1000, "p99_us": p99_us}},
        })
    }

    fn side(label: &str, docs: Vec<Value>) -> Side {
        Side {
            label: label.into(),
            docs,
        }
    }

    #[test]
    fn changes_are_exact_percentages_against_the_baseline() {
        let c = compare(
            &[
                side("a", vec![run(1000.0, 2000, 1)]),
                side("b", vec![run(1100.0, 1500, 1)]),
                side("c", vec![run(800.0, 4000, 1)]),
            ],
            false,
        )
        .expect("comparable");
        let row = |n: &str| c.rows.iter().find(|r| r.name == n).expect(n);
        let mpm = row("mpm");
        assert_eq!(mpm.cells[1].change_pct, Some(10.0));
        assert_eq!(mpm.cells[2].change_pct, Some(-20.0));
        assert_eq!(row("p99(total) ms").cells[1].change_pct, Some(-25.0));
        assert_eq!(row("p99(total) ms").cells[2].change_pct, Some(100.0));
        assert_eq!(row("lost").cells[1].change_pct, None, "no % of zero");
        assert_eq!(mpm.cells[1].verdict.as_deref(), Some("single runs"));
        assert_eq!(c.primary.as_deref(), Some("mpm"));
        assert_eq!(c.slower_than(10.0), vec!["c".to_string()]);
        assert!(c.slower_than(25.0).is_empty());
    }

    /// Issue 43: two runs show which of the server's processes got more expensive, a row
    /// per process name; a name only one run has is a row with the other's cell empty.
    #[test]
    fn issue_43_each_process_name_is_a_row_of_cpu_per_message() {
        let relay = |smtpd_s: f64, more: Option<(&str, f64)>| {
            let mut by = vec![serde_json::json!({"name": "smtpd", "cpu_s": smtpd_s})];
            by.extend(more.map(|(n, c)| serde_json::json!({"name": n, "cpu_s": c})));
            let mut r = run(1000.0, 2000, 1);
            r["summary"]["accepted"] = 500.into();
            r["extra"] =
                serde_json::json!({"sut": {"cpu_user_s": 2.0, "cpu_sys_s": 1.0, "by_process": by}});
            r
        };
        let c = compare(
            &[
                side("a", vec![relay(1.0, None)]),
                side("b", vec![relay(1.5, Some(("cleanup", 0.25)))]),
            ],
            false,
        )
        .expect("comparable");
        let row = |n: &str| c.rows.iter().find(|r| r.name == n).expect(n);
        let smtpd = row("server cpu ms/unit: smtpd");
        // 1.0 s and 1.5 s over 500 messages.
        assert_eq!(
            (smtpd.cells[0].median, smtpd.cells[1].median),
            (Some(2.0), Some(3.0))
        );
        assert_eq!(smtpd.cells[1].change_pct, Some(50.0));
        let cleanup = row("server cpu ms/unit: cleanup");
        assert_eq!(
            (cleanup.cells[0].median, cleanup.cells[1].median),
            (None, Some(0.5)),
            "only the candidate has it"
        );
    }

    /// Issue 40: a ramp that never broke showed "20" beside a capacity that broke, as if
    /// both were measured; the comparison says which is only a lower bound.
    #[test]
    fn issue_40_a_ramp_that_never_broke_is_at_least_in_the_comparison() {
        let profile = |users: u64, at_least: bool| {
            serde_json::json!({
                "command": "mailbox profile",
                "config": {},
                "summary": {"capacity_users": users},
                "extra": {"capacity": {"capacity_users": users, "capacity_at_least": at_least}},
            })
        };
        let c = compare(
            &[
                side("limited", vec![profile(8, false)]),
                side("free", vec![profile(20, true)]),
            ],
            false,
        )
        .expect("comparable");
        assert_eq!(
            c.notes,
            vec!["free: capacity_users is at least 20: its ramp never broke (every step held)"]
        );
        let text = render::render(&c, render::Format::Text);
        assert!(
            text.contains("free: capacity_users is at least 20"),
            "{text}"
        );
        // The same in rounds (`profile --lab dovecot,cyrus`): the rounds' own capacities.
        let rounds = |users: u64, at_least: bool| {
            let mut top = profile(users, false);
            top["extra"] = serde_json::json!({"rounds": [profile(users, at_least)]});
            top
        };
        let c = compare(
            &[
                side("limited", vec![rounds(8, false)]),
                side("free", vec![rounds(20, true)]),
            ],
            false,
        )
        .expect("comparable");
        assert_eq!(
            c.notes,
            vec!["free: capacity_users is at least 20: its ramp never broke (every step held)"]
        );
    }

    #[test]
    fn a_different_workload_is_refused_naming_the_keys_but_not_a_different_target() {
        let mut other_target = run(1000.0, 1, 1);
        other_target["config"]["target"] = "10.0.0.1:25".into();
        assert!(
            compare(
                &[
                    side("a", vec![run(1.0, 1, 1)]),
                    side("b", vec![other_target])
                ],
                false
            )
            .is_ok()
        );
        let err = compare(
            &[
                side("a", vec![run(1.0, 1, 1)]),
                side("b", vec![run(1.0, 1, 2)]),
            ],
            false,
        )
        .expect_err("sizes differ");
        assert!(err.contains("differ in size;"), "got {err}");
        let forced = compare(
            &[
                side("a", vec![run(1.0, 1, 1)]),
                side("b", vec![run(1.0, 1, 2)]),
            ],
            true,
        )
        .expect("forced");
        assert_eq!(forced.differing, vec!["size".to_string()]);
    }

    #[test]
    fn rounds_from_one_distribution_are_within_noise_and_shifted_ones_are_not() {
        let rounds = |base: f64, jitter: &[f64]| -> Vec<Value> {
            jitter.iter().map(|j| run(base + j, 2000, 1)).collect()
        };
        let jitter = [-30.0, 10.0, -5.0, 25.0, 0.0, -15.0];
        let same = compare(
            &[
                side("a", rounds(1000.0, &jitter)),
                side("b", rounds(1000.0, &[20.0, -25.0, 5.0, -10.0, 30.0, -5.0])),
            ],
            false,
        )
        .expect("comparable");
        assert_eq!(
            same.rows[0].cells[1].verdict.as_deref(),
            Some("within noise")
        );
        let faster = compare(
            &[
                side("a", rounds(1000.0, &jitter)),
                side("b", rounds(1200.0, &jitter)),
            ],
            false,
        )
        .expect("comparable");
        assert_eq!(faster.rows[0].cells[1].verdict.as_deref(), Some("faster"));
        assert_eq!(faster.rows[0].cells[1].n, 6);
        let slower = compare(
            &[
                side("a", rounds(1000.0, &jitter)),
                side("b", rounds(800.0, &jitter)),
            ],
            false,
        )
        .expect("comparable");
        assert_eq!(slower.rows[0].cells[1].verdict.as_deref(), Some("slower"));
        assert_eq!(slower.slower_than(5.0), vec!["b".to_string()]);
    }

    #[test]
    fn issue_25_13_a_latency_difference_below_the_resolution_is_no_verdict() {
        // Six rounds each: the e2e median 0 against 0.001 ms (one microsecond, the unit
        // the histograms record in), and a p99 of 2 against 3 ms (clearly apart).
        let rounds = |e2e_ms: f64, p99_us: u64| -> Vec<Value> {
            (0..6)
                .map(|k| {
                    let mut r = run(1000.0 + k as f64, p99_us + k, 1);
                    r["summary"]["e2e_p50_ms"] = e2e_ms.into();
                    r
                })
                .collect()
        };
        let c = compare(
            &[side("a", rounds(0.0, 2000)), side("b", rounds(0.001, 3000))],
            false,
        )
        .expect("comparable");
        let row = |n: &str| c.rows.iter().find(|r| r.name == n).expect(n);
        assert_eq!(
            row("e2e_p50_ms").cells[1].verdict.as_deref(),
            Some("within resolution"),
            "0 against 0.001 ms is no verdict"
        );
        assert_eq!(row("e2e_p50_ms").cells[1].p, None);
        assert_eq!(
            row("p99(total) ms").cells[1].verdict.as_deref(),
            Some("slower"),
            "a millisecond is resolved"
        );
    }
}
