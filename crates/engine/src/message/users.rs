//! User lists in Postal's format: one `address [password [flags]]` per line.

use std::path::Path;

/// One entry of a user list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The mail address.
    pub address: String,
    /// The password, when given.
    pub password: Option<String>,
    /// Flags (used by the sink: d defer, r reject, b bounce, g greylist).
    pub flags: String,
}

/// The flags a user list may carry (BHM's): d defer, r reject, g greylist, b bounce.
const FLAGS: &str = "drgb";

/// Reads a user list. Blank lines and lines starting with '#' are skipped.
pub fn load(path: &Path) -> Result<Vec<User>, String> {
    read(path, "address [password [flags]]", parse)
}

/// Reads a user list with `parse`, naming the file and line of an error; `shape` is the
/// line format a list with no users is told to use.
pub fn read<T>(
    path: &Path,
    shape: &str,
    parse: impl Fn(&str) -> Result<Vec<T>, (usize, String)>,
) -> Result<Vec<T>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read user list {}: {e}", path.display()))?;
    let users = parse(&text)
        .map_err(|(line, why)| format!("user list {} line {line}: {why}", path.display()))?;
    if users.is_empty() {
        return Err(format!(
            "user list {} has no users; write one '{shape}' per line",
            path.display()
        ));
    }
    Ok(users)
}

/// The entries of a user list's text: (1-based line number, address, the words after
/// it), blank and '#' lines skipped; an address that is none is an error at its line.
pub fn entries(
    text: &str,
) -> impl Iterator<Item = Result<(usize, &str, std::str::SplitWhitespace<'_>), (usize, String)>> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let mut parts = line.split_whitespace();
        let address = parts.next().unwrap_or_default();
        Some(if valid_address(address) {
            Ok((i + 1, address, parts))
        } else {
            Err((
                i + 1,
                format!("{address:?} is not a mail address (expected local@domain)"),
            ))
        })
    })
}

/// Parses the text of a user list; errors carry the 1-based line number.
pub fn parse(text: &str) -> Result<Vec<User>, (usize, String)> {
    let mut users = Vec::new();
    for entry in entries(text) {
        let (line, address, mut parts) = entry?;
        let password = parts.next().map(str::to_string);
        let flags = parts.next().unwrap_or_default().to_string();
        if let Some(bad) = flags.chars().find(|c| !FLAGS.contains(*c)) {
            return Err((
                line,
                format!(
                    "unknown flag {bad:?} in {flags:?}; flags are d (defer), r (reject), g (greylist), b (accept and bounce)"
                ),
            ));
        }
        if let Some(extra) = parts.next() {
            return Err((
                line,
                format!("{extra:?} after the flags; write 'address [password [flags]]'"),
            ));
        }
        users.push(User {
            address: address.to_string(),
            password,
            flags,
        });
    }
    Ok(users)
}

/// A light check that catches typos: one '@', something on both sides, no brackets or
/// spaces (which would break the envelope).
pub fn valid_address(a: &str) -> bool {
    match a.split_once('@') {
        Some((l, d)) => {
            !l.is_empty()
                && !d.is_empty()
                && !d.contains('@')
                && !a.contains(['<', '>', ' ', '\r', '\n'])
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postal_format_is_read() {
        let users = parse("# comment\nuser1@example.test secret\n\nuser2@example.test pw dr\nuser3@example.test\n")
            .expect("valid");
        assert_eq!(users.len(), 3);
        assert_eq!(users[0].password.as_deref(), Some("secret"));
        assert_eq!(users[1].flags, "dr");
        assert_eq!(users[2].password, None);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse("ok@example.test\nnot-an-address\n").expect_err("bad");
        assert_eq!(err.0, 2);
        let err = parse("a@example.test pw dz\n").expect_err("unknown flag");
        assert_eq!(err.0, 1);
        assert!(
            err.1.contains("'z'") && err.1.contains("d (defer)"),
            "{}",
            err.1
        );
        assert!(parse("a@example.test pw d extra\n").is_err());
    }
}
