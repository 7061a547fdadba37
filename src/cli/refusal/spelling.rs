//! Whether clap's suggestion is a near spelling of what was typed (a typo, a letter
//! missing or swapped), and so worth repeating.

/// `; did you mean X?` when clap's suggestion `suggested` is a close spelling of `typed`
/// (a typo, a letter missing or swapped), else nothing: clap suggests the least unlike
/// name even when it means something else (`send --bogus` drew `--rounds`).
pub fn did_you_mean(typed: &str, suggested: &str) -> String {
    let (a, b) = (
        typed.trim_start_matches('-'),
        suggested.trim_start_matches('-'),
    );
    if suggested.is_empty() || a.is_empty() {
        return String::new();
    }
    let longer = a.chars().count().max(b.chars().count());
    if edits(a, b) * 4 <= longer.max(4) {
        format!("; did you mean {suggested}?")
    } else {
        String::new()
    }
}

/// Edits between two words (insert, delete, replace, or swap two neighbours): the optimal
/// string alignment distance.
pub fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}
