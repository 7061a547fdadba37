//! How a value is written on the page: made safe for HTML, and numbers as people read
//! them. The tables, the headline and the comparison page all write values this way.

use serde_json::Value;

/// Text made safe for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as people read it: integers whole, other numbers to 2 decimals (3
/// significant digits below 1), yes/no, text as is.
pub fn show(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{f:.0}")
            } else if f.abs() < 1.0 {
                format!("{f:.3}")
            } else {
                format!("{f:.2}")
            }
        }
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::String(s) => s.clone(),
        Value::Null => "–".into(),
        other => other.to_string(),
    }
}
