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
    if strsim::osa_distance(a, b) * 4 <= longer.max(4) {
        format!("; did you mean {suggested}?")
    } else {
        String::new()
    }
}
