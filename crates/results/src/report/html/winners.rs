//! The top of a page of several runs (an MTA comparison, `--compare-postconf`'s two files,
//! runs given side by side): for each headline figure the runs share, which run did best
//! and whether that stands out from the noise. The medians and verdicts are `compare`'s
//! own (`report::compare`), the first run the baseline, so that the page and the
//! `compare` table never tell a reader two different answers.

use std::fmt::Write as _;

use super::format::escape;
use super::headline::{self, figure_text};
use crate::report::compare::metrics::Better;
use crate::report::compare::{self, Cell, Row, Side};
use crate::stats::results::Results;

/// One figure's answer: the best run, its median, and the verdict that says how sure.
#[derive(Debug, PartialEq)]
pub struct Winner {
    /// The best run's label; `None` when every run has the same median (a tie).
    pub run: Option<String>,
    /// Its median (of rounds where the file holds rounds).
    pub median: f64,
    /// `compare`'s verdict, read as the winner's: against the baseline when a candidate
    /// won, and the runner-up's verdict turned round when the baseline did.
    pub verdict: String,
}

/// The verdict of a candidate against the baseline, said from the baseline's side.
fn turned(verdict: &str) -> String {
    match verdict {
        "faster" => "slower",
        "slower" => "faster",
        "better" => "worse",
        "worse" => "better",
        other => other,
    }
    .to_string()
}

/// A verdict against `other` in words: "faster than postfix", "within noise (against
/// postfix)".
fn said(verdict: &str, other: &str) -> String {
    match verdict {
        "faster" | "slower" | "better" | "worse" => format!("{verdict} than {other}"),
        "" => format!("no verdict (against {other})"),
        v => format!("{v} (against {other})"),
    }
}

/// The best of `row`'s sides (labels in `sides`), by which way is good for it.
pub fn winner(sides: &[String], row: &Row) -> Option<Winner> {
    let medians: Vec<(usize, f64)> = row
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.median.map(|m| (i, m)))
        .collect();
    let key = |m: f64| if row.better == Better::Higher { -m } else { m };
    let mut ranked = medians.clone();
    ranked.sort_by(|a, b| key(a.1).total_cmp(&key(b.1)));
    let &[(best, median), (second, second_median), ..] = ranked.as_slice() else {
        return None;
    };
    if median == second_median {
        return Some(Winner {
            run: None,
            median,
            verdict: "tie".into(),
        });
    }
    let verdict = |c: &Cell| c.verdict.clone().unwrap_or_default();
    let verdict = if best > 0 {
        said(&verdict(&row.cells[best]), &sides[0])
    } else {
        said(&turned(&verdict(&row.cells[second])), &sides[second])
    };
    Some(Winner {
        run: Some(sides[best].clone()),
        median,
        verdict,
    })
}

/// The winners' table of `runs` (none for a single run, or runs that cannot be compared).
pub fn section(runs: &[(String, &Results)]) -> String {
    if runs.len() < 2 {
        return String::new();
    }
    let Ok(sides) = runs
        .iter()
        .map(|(label, r)| Side::of(label.clone(), r))
        .collect::<Result<Vec<_>, _>>()
    else {
        return String::new();
    };
    let Ok(c) = compare::compare(&sides, true) else {
        return String::new();
    };
    let mut h = String::from(
        "<section id=\"winners\"><h2>Best run per figure</h2><table><thead><tr><th>figure</th><th>best</th><th>median</th><th>verdict</th></tr></thead><tbody>",
    );
    let mut rows = 0;
    for f in headline::of(runs[0].1).figures {
        let Some(row) = c
            .rows
            .iter()
            .find(|r| r.name == headline::compare_name(f.id))
        else {
            continue;
        };
        let Some(w) = winner(&c.sides, row) else {
            continue;
        };
        let value = headline::number(w.median);
        let _ = write!(
            h,
            "<tr data-figure=\"{}\" data-winner=\"{}\" data-value=\"{}\" data-verdict=\"{}\"><th>{}{}</th><td><b>{}</b></td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(f.id),
            escape(w.run.as_deref().unwrap_or("")),
            escape(&value.to_string()),
            escape(&w.verdict),
            escape(f.label),
            if f.unit.is_empty() {
                String::new()
            } else {
                format!(" ({})", escape(f.unit))
            },
            escape(w.run.as_deref().unwrap_or("none: a tie")),
            escape(&figure_text(&value)),
            escape(&w.verdict),
        );
        rows += 1;
    }
    if rows == 0 {
        return String::new();
    }
    h.push_str("</tbody></table><p class=\"muted\">Medians of rounds where a file holds rounds; the verdict is <code>mailbench compare</code>'s, the first run the baseline (see docs/compare.md).</p></section>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(median: Option<f64>, verdict: Option<&str>) -> Cell {
        Cell {
            median,
            spread_pct: 0.0,
            n: 6,
            change_pct: None,
            verdict: verdict.map(String::from),
            p: None,
        }
    }

    fn row(better: Better, cells: Vec<Cell>) -> Row {
        Row {
            name: "drain_mpm".into(),
            better,
            cells,
        }
    }

    #[test]
    fn the_best_median_wins_with_the_verdict_said_from_its_side() {
        let sides: Vec<String> = ["postfix", "exim", "qmail"].map(String::from).into();
        let r = row(
            Better::Higher,
            vec![
                cell(Some(1000.0), None),
                cell(Some(1200.0), Some("faster")),
                cell(Some(900.0), Some("within noise")),
            ],
        );
        let noisy = row(
            Better::Higher,
            vec![cell(Some(1.0), None), cell(Some(2.0), Some("within noise"))],
        );
        assert_eq!(
            winner(&sides, &noisy).map(|w| w.verdict),
            Some("within noise (against postfix)".into())
        );
        assert_eq!(
            winner(&sides, &r),
            Some(Winner {
                run: Some("exim".into()),
                median: 1200.0,
                verdict: "faster than postfix".into()
            })
        );
        // The baseline best: the runner-up's verdict turned round.
        let r = row(
            Better::Lower,
            vec![
                cell(Some(10.0), None),
                cell(Some(12.0), Some("slower")),
                cell(Some(30.0), Some("slower")),
            ],
        );
        let w = winner(&sides, &r).expect("a winner");
        assert_eq!(
            (w.run.as_deref(), w.verdict.as_str()),
            (Some("postfix"), "faster than exim")
        );
        let r = row(
            Better::Less,
            vec![cell(Some(0.0), None), cell(Some(0.0), Some("single runs"))],
        );
        let w = winner(&sides, &r).expect("a tie");
        assert_eq!((w.run, w.verdict.as_str()), (None, "tie"));
        let r = row(Better::Less, vec![cell(Some(0.0), None), cell(None, None)]);
        assert_eq!(winner(&sides, &r), None, "one side alone has no winner");
    }
}
