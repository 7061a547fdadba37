//! A comparison printed: an aligned text table for the terminal, Markdown, CSV, JSON or a
//! small HTML page. Every format has the same rows and columns.

use std::fmt::Write as _;

use super::{Cell, Comparison};
use crate::report::html::format::escape;

/// The output formats of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Text,
    /// A Markdown table.
    Md,
    /// Comma-separated values, one row per figure and side.
    Csv,
    /// The comparison as JSON.
    Json,
    /// A self-contained HTML table.
    Html,
}

/// A number as the tables print it: 4 significant digits at most, integers whole.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// A side's value: the median, with `±spread%` and the count when there are several.
fn value(c: &Cell) -> String {
    match c.median {
        None => "–".into(),
        Some(m) if c.n > 1 => format!("{} ±{:.1}% (n={})", num(m), c.spread_pct, c.n),
        Some(m) => num(m),
    }
}

fn change(c: &Cell) -> String {
    match (c.median, c.change_pct) {
        (None, _) => String::new(),
        (Some(_), None) => "n/a".into(),
        (Some(_), Some(p)) => format!("{p:+.1}%"),
    }
}

/// The header and rows as strings: the figure, the baseline, then per candidate its
/// value, change and verdict.
fn grid(c: &Comparison) -> Vec<Vec<String>> {
    let mut head = vec!["figure".to_string(), c.sides[0].clone()];
    for s in &c.sides[1..] {
        head.push(s.clone());
        head.push("change".into());
        head.push("verdict".into());
    }
    let mut out = vec![head];
    for r in &c.rows {
        let mut line = vec![r.name.clone(), value(&r.cells[0])];
        for cell in &r.cells[1..] {
            line.push(value(cell));
            line.push(change(cell));
            line.push(cell.verdict.clone().unwrap_or_default());
        }
        out.push(line);
    }
    out
}

fn preamble(c: &Comparison) -> Vec<String> {
    let mut lines = vec![format!(
        "baseline {}; change = candidate median against the baseline median; verdict: Mann-Whitney U at p < 0.05 over rounds (at least 4 per side)",
        c.sides[0]
    )];
    lines.extend(c.notes.iter().cloned());
    if !c.differing.is_empty() {
        lines.push(format!(
            "WARNING: compared with --force although the workloads differ in {}",
            c.differing.join(", ")
        ));
    }
    lines
}

/// The comparison in `format`.
pub fn render(c: &Comparison, format: Format) -> String {
    match format {
        Format::Text => text(c),
        Format::Md => markdown(c),
        Format::Csv => csv(c),
        Format::Json => serde_json::to_string_pretty(c).unwrap_or_default() + "\n",
        Format::Html => html(c),
    }
}

fn text(c: &Comparison) -> String {
    let g = grid(c);
    let widths: Vec<usize> = (0..g[0].len())
        .map(|i| g.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = preamble(c).join("\n") + "\n\n";
    for row in &g {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let pad = widths[i] - s.chars().count();
                if i == 0 {
                    format!("{s}{}", " ".repeat(pad))
                } else {
                    format!("{}{s}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn markdown(c: &Comparison) -> String {
    let g = grid(c);
    let mut out = preamble(c)
        .iter()
        .map(|l| format!("_{l}_\n"))
        .collect::<String>()
        + "\n";
    let line = |r: &[String]| format!("| {} |\n", r.join(" | "));
    out.push_str(&line(&g[0]));
    out.push_str(&format!(
        "|{}\n",
        std::iter::once("---|")
            .chain(std::iter::repeat_n("---:|", g[0].len() - 1))
            .collect::<String>()
    ));
    for r in &g[1..] {
        out.push_str(&line(r));
    }
    out
}

fn csv(c: &Comparison) -> String {
    let mut out = String::from("figure,side,median,spread_pct,n,change_pct,verdict,p\n");
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in &c.rows {
        for (side, cell) in c.sides.iter().zip(&r.cells) {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                crate::report::csv::field(&r.name),
                crate::report::csv::field(side),
                opt(cell.median),
                cell.spread_pct,
                cell.n,
                opt(cell.change_pct),
                cell.verdict.as_deref().unwrap_or(""),
                opt(cell.p)
            );
        }
    }
    out
}

fn html(c: &Comparison) -> String {
    let g = grid(c);
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mailbench compare</title>\
         <style>body{font:14px system-ui,sans-serif;margin:1em}table{border-collapse:collapse;font-variant-numeric:tabular-nums}\
         td,th{padding:.15em .7em;border-bottom:1px solid #ccc;text-align:right}td:first-child,th:first-child{text-align:left}\
         .faster,.better{color:#17803d}.slower,.worse{color:#c22;font-weight:bold}\
         @media (prefers-color-scheme:dark){body{background:#15181b;color:#e2e5e8}}</style></head><body>\n",
    );
    for l in preamble(c) {
        let _ = writeln!(out, "<p>{}</p>", escape(&l));
    }
    out.push_str("<table><thead><tr>");
    for h in &g[0] {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in &g[1..] {
        out.push_str("<tr>");
        for (i, v) in r.iter().enumerate() {
            let class = if i >= 2 && (i - 2) % 3 == 2 {
                v.replace(' ', "-")
            } else {
                String::new()
            };
            let _ = write!(out, "<td class=\"{}\">{}</td>", escape(&class), escape(v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Side, compare};
    use super::*;

    fn doc(mpm: f64) -> serde_json::Value {
        serde_json::json!({"command": "send", "config": {}, "summary": {"mpm": mpm}})
    }

    #[test]
    fn every_format_shows_the_same_change() {
        let c = compare(
            &[
                Side {
                    label: "old".into(),
                    docs: vec![doc(1000.0)],
                },
                Side {
                    label: "new".into(),
                    docs: vec![doc(1250.0)],
                },
            ],
            false,
        )
        .expect("comparable");
        let text = render(&c, Format::Text);
        assert!(
            text.contains("mpm     1000  1250  +25.0%  single runs"),
            "got\n{text}"
        );
        assert!(render(&c, Format::Md).contains("| mpm | 1000 | 1250 | +25.0% | single runs |"));
        assert!(render(&c, Format::Csv).contains("mpm,new,1250,0,1,25,single runs,\n"));
        let json: serde_json::Value =
            serde_json::from_str(&render(&c, Format::Json)).expect("json");
        assert_eq!(json["rows"][0]["cells"][1]["change_pct"], 25.0);
        assert!(render(&c, Format::Html).contains("<td class=\"\">+25.0%</td>"));
    }
}
