//! A command line clap refused, said in one line: what was wrong and how to fix it (the
//! product's rule for bad input), instead of clap's block of `error:`, `tip:`, a usage
//! line that shows only the flags involved, and `For more information…`. Built from the
//! error's context (the flag, the value, the valid values), the command line and the
//! command tree; `cli::parse` prints it. Help, version and the help shown for a bare
//! `mailbench` stay clap's own. Pure: no printing, no exit.

use std::error::Error as _;
use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Flags a command does not have but a user of another command would type there, with
/// what to type instead: `(command path, flag, hint)`. The same word means something else
/// in each, so neither clap's spelling tip nor an alias would say it right.
const MISTAKEN: [(&str, &str, &str); 1] = [(
    "mailbench mailbox populate",
    "--fill",
    "populate's messages per user are --per-user N (--fill is how pop3, imap and profile \
     fill a lab store first)",
)];

/// The one line for `e`, or `None` when clap's own output is the answer (help, version,
/// and the help a command without its subcommand shows). `root` is the whole command tree
/// and `args` the process's arguments, program name first: they name the command the
/// mistake was made in, and the flags it has.
pub fn line(e: &clap::Error, root: &clap::Command, args: &[OsString]) -> Option<String> {
    let mut root = root.clone();
    root.build();
    let path = command_path(&root, args);
    let leaf = path.last().copied().unwrap_or(&root);
    let name = path
        .iter()
        .map(|c| c.get_name())
        .collect::<Vec<_>>()
        .join(" ");
    let see = format!("see {name} --help");
    let text = |k| e.get(k).map(ContextValue::to_string).unwrap_or_default();
    let flag = flag_of(&text(ContextKind::InvalidArg));
    let value = text(ContextKind::InvalidValue);
    let line = match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => return None,
        ErrorKind::InvalidValue if value.is_empty() => match valid_values(e) {
            Some(valid) => format!("{flag} needs a value: one of {valid}"),
            None => {
                let what = find_arg(&path, &flag)
                    .and_then(|(_, a)| clause(a))
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                format!(
                    "{flag} needs a value: {}{what}",
                    text(ContextKind::InvalidArg)
                )
            }
        },
        ErrorKind::InvalidValue => format!(
            "{flag} {value}: not one of {}{}",
            valid_values(e).unwrap_or_else(|| "the values its --help lists".into()),
            did_you_mean(&value, &text(ContextKind::SuggestedValue))
        ),
        ErrorKind::ValueValidation => {
            let why = e
                .source()
                .map(|s| reason(&s.to_string()))
                .unwrap_or_else(|| "not valid".into());
            let what = find_arg(&path, &flag)
                .and_then(|(_, a)| clause(a))
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            format!("{flag} {value}: {why}{what}")
        }
        ErrorKind::UnknownArgument => {
            let arg = text(ContextKind::InvalidArg);
            unknown_argument(&root, &name, leaf, &arg, &text(ContextKind::SuggestedArg))
        }
        ErrorKind::InvalidSubcommand => {
            let sub = text(ContextKind::InvalidSubcommand);
            let suggested = match e.get(ContextKind::SuggestedSubcommand) {
                Some(ContextValue::Strings(s)) => s.first().cloned().unwrap_or_default(),
                _ => String::new(),
            };
            match did_you_mean(&sub, &suggested) {
                near if near.is_empty() => {
                    format!(
                        "unknown command {sub}; the commands are {}",
                        subcommands(leaf)
                    )
                }
                near => format!("unknown command {sub}{near} ({see})"),
            }
        }
        ErrorKind::MissingSubcommand => {
            format!("which command? one of {}; {see}", subcommands(leaf))
        }
        ErrorKind::MissingRequiredArgument => {
            let missing = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::Strings(s)) => s.clone(),
                Some(v) => vec![v.to_string()],
                None => Vec::new(),
            };
            let each: Vec<String> = missing.iter().map(|m| missing_one(&path, m)).collect();
            format!("missing {}; {see}", each.join(" and "))
        }
        ErrorKind::ArgumentConflict => {
            let prior = text(ContextKind::PriorArg);
            let a = match text(ContextKind::InvalidSubcommand) {
                s if s.is_empty() => flag.clone(),
                s => s,
            };
            let b: Vec<String> = match e.get(ContextKind::PriorArg) {
                Some(ContextValue::Strings(s)) => s.iter().map(|s| flag_of(s)).collect(),
                _ => vec![flag_of(&prior)],
            };
            if b == [a.clone()] {
                format!("{a} given twice; give it once")
            } else {
                format!("{a} cannot be used with {}; drop one", b.join(" or "))
            }
        }
        ErrorKind::NoEquals => format!("{flag} needs its value after '=': {flag}=VALUE"),
        ErrorKind::TooManyValues => match find_arg(&path, &flag) {
            Some((_, a)) if !a.get_num_args().is_some_and(|n| n.takes_values()) => {
                format!("{flag} takes no value: write {flag} alone, without {value}")
            }
            _ => format!("{flag} {value}: one value too many; {see}"),
        },
        ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            let wanted = match text(ContextKind::ExpectedNumValues) {
                n if n.is_empty() => format!("at least {}", text(ContextKind::MinValues)),
                n => n,
            };
            let got = text(ContextKind::ActualNumValues);
            format!("{flag} takes {wanted} values, got {got}; {see}")
        }
        ErrorKind::InvalidUtf8 => format!("an argument is not valid UTF-8; {see}"),
        _ => format!("{}; {see}", first_line(e)),
    };
    // A positional is named by the command it belongs to.
    let prefix = if flag.starts_with('<') {
        &name
    } else {
        prefix(e.kind(), &name)
    };
    Some(format!("{prefix}: {line}"))
}

/// Value errors name their flag, which says where; the others name the command.
fn prefix(kind: ErrorKind, name: &str) -> &str {
    match kind {
        ErrorKind::InvalidValue
        | ErrorKind::ValueValidation
        | ErrorKind::NoEquals
        | ErrorKind::TooManyValues
        | ErrorKind::TooFewValues
        | ErrorKind::WrongNumberOfValues => "mailbench",
        _ => name,
    }
}

/// The commands the arguments name, root first (`mailbench mailbox imap …` gives
/// mailbench, mailbox, imap): each word that is not a flag and names a subcommand of the
/// last one found. `help` is not followed: `mailbench help foo` is a mistake at the top.
fn command_path<'a>(root: &'a clap::Command, args: &[OsString]) -> Vec<&'a clap::Command> {
    let mut path = vec![root];
    for a in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if a == "--" {
            break;
        }
        let last = path[path.len() - 1];
        if let Some(sub) = (!a.starts_with('-') && a != "help")
            .then(|| last.find_subcommand(a))
            .flatten()
        {
            path.push(sub);
        }
    }
    path
}

/// The flag of an argument as clap shows it (`--pipeline <N>` → `--pipeline`,
/// `--bogus=3` → `--bogus`); a positional is `<NAME>` (`[RUN.json]...` → `<RUN.json>`).
fn flag_of(shown: &str) -> String {
    let first = shown.split(' ').next().unwrap_or(shown);
    if first.starts_with(['<', '[']) {
        let name = first.trim_start_matches(['<', '[']);
        return format!("<{}>", name.trim_end_matches(['>', ']', '.']));
    }
    first.split('=').next().unwrap_or(first).to_string()
}

/// The argument `flag` names and the command that declares it, looked for in the command
/// and then its parents (global flags such as `--threads` are declared above).
fn find_arg<'a>(
    path: &[&'a clap::Command],
    flag: &str,
) -> Option<(&'a clap::Command, &'a clap::Arg)> {
    path.iter().rev().find_map(|c| {
        let arg = c.get_arguments().find(|a| {
            if let Some(long) = flag.strip_prefix("--") {
                a.get_long() == Some(long)
            } else if let Some(short) = flag.strip_prefix('-') {
                a.get_short().map(String::from).as_deref() == Some(short)
            } else {
                let name = flag
                    .trim_start_matches(['<', '['])
                    .trim_end_matches(['>', ']', '.']);
                a.is_positional()
                    && (a.get_id() == name
                        || a.get_value_names()
                            .is_some_and(|v| v.iter().any(|v| v == name)))
            }
        });
        arg.map(|a| (*c, a))
    })
}

/// A required argument that was not given (`shown` as clap shows it), with what it is for
/// and the flags that would do instead: an argument both required and in conflict with
/// another is required only without that other (`--target` or `--lab`), else the other
/// could never be given.
fn missing_one(path: &[&clap::Command], shown: &str) -> String {
    let Some((owner, arg)) = find_arg(path, &flag_of(shown)) else {
        return shown.to_string();
    };
    let what = clause(arg).map(|c| format!(" ({c})")).unwrap_or_default();
    let instead: Vec<String> = owner
        .get_arg_conflicts_with(arg)
        .into_iter()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let long = a.get_long()?;
            let value = match a.get_possible_values().first() {
                Some(v) => format!(" {}", v.get_name()),
                None => a
                    .get_value_names()
                    .and_then(|v| v.first())
                    .map(|v| format!(" <{v}>"))
                    .unwrap_or_default(),
            };
            Some(format!("--{long}{value}"))
        })
        .collect();
    if instead.is_empty() {
        format!("{shown}{what}")
    } else {
        format!("{shown}{what} or {}", instead.join(" or "))
    }
}

/// What an argument is for, from the first clause of its help, in lower case: the reminder
/// that makes `--pipeline 0: must be 1..=1000` readable without the manual.
fn clause(arg: &clap::Arg) -> Option<String> {
    let help = arg.get_help()?.to_string();
    // Mailbox flags that apply with a lab only start with "--lab: ".
    let help = help.strip_prefix("--lab: ").unwrap_or(&help);
    let end = help
        .find(['.', ',', ';', '(', ':', '['])
        .unwrap_or(help.len());
    let first = help[..end].trim();
    let mut chars = first.chars();
    let head = chars.next()?;
    // Keep an acronym's capitals (IMAP, LMTP); lower an ordinary first word.
    let second_upper = chars.next().is_some_and(char::is_uppercase);
    let lowered = if second_upper {
        first.to_string()
    } else {
        head.to_lowercase().chain(first.chars().skip(1)).collect()
    };
    (lowered.len() <= 70).then_some(lowered)
}

/// A value parser's complaint rephrased as what the value must be: clap's ranges and the
/// standard number parsers say what is wrong in their own words.
fn reason(source: &str) -> String {
    let source = source.lines().collect::<Vec<_>>().join("; ");
    if let Some((_, range)) = source.split_once(" is not in ") {
        return match range.strip_suffix("..") {
            Some(low) => format!("must be at least {low}"),
            None => format!("must be {range}"),
        };
    }
    match source.as_str() {
        "invalid digit found in string" => "must be a whole number".into(),
        "cannot parse integer from empty string" => "needs a number".into(),
        "number too large to fit in target type" => "too large".into(),
        "number too small to fit in target type" => "too small".into(),
        "invalid float literal" => "must be a number".into(),
        _ => source,
    }
}

/// The valid values of an enum flag, as clap lists them (none for a free-form value).
fn valid_values(e: &clap::Error) -> Option<String> {
    match e.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(v)) if v.is_empty() => None,
        Some(ContextValue::Strings(v)) => Some(v.join(", ")),
        Some(v) => Some(v.to_string()),
        None => None,
    }
}

/// The names of a command's subcommands, for a line that lists them.
/// In --help's order (`cli::command` re-adds some, which moves them to the end).
fn subcommands(c: &clap::Command) -> String {
    let mut subs: Vec<&clap::Command> = c
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    subs.sort_by_key(|s| s.get_display_order());
    subs.iter()
        .map(|s| s.get_name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The line for a flag or word the command does not take: a hint of ours when we know
/// what was meant, clap's suggestion when it is a near spelling, else the commands that do
/// take the flag.
fn unknown_argument(
    root: &clap::Command,
    name: &str,
    leaf: &clap::Command,
    arg: &str,
    suggested: &str,
) -> String {
    let see = format!("see {name} --help");
    let flag = flag_of(arg);
    if !arg.starts_with('-') {
        return format!("unexpected argument {arg}; {see}");
    }
    if let Some((_, _, hint)) = MISTAKEN.iter().find(|(c, f, _)| *c == name && *f == flag) {
        return format!("unknown option {flag}; {hint}");
    }
    let near = did_you_mean(&flag, &flag_of(suggested));
    if !near.is_empty() {
        return format!("unknown option {flag}{near} ({see})");
    }
    let owners = owners(root, leaf, &flag);
    if owners.is_empty() {
        format!("unknown option {flag}; {see}")
    } else {
        format!(
            "unknown option {flag} (a flag of {}); {see}",
            owners.join(", ")
        )
    }
}

/// The commands other than `leaf` that take `flag` (at most three, then `…`).
fn owners(root: &clap::Command, leaf: &clap::Command, flag: &str) -> Vec<String> {
    let long = flag.strip_prefix("--").unwrap_or(flag);
    let mut found = Vec::new();
    for s in root.get_subcommands() {
        take_flag(s, s.get_name(), leaf, long, &mut found);
    }
    if found.len() > 3 {
        found.truncate(3);
        found.push("…".into());
    }
    found
}

/// Adds `c` (named `path`) and its subcommands to `found` where they take `--long` as a
/// flag of their own (not hidden, not a global inherited from above), `leaf` left out.
fn take_flag(
    c: &clap::Command,
    path: &str,
    leaf: &clap::Command,
    long: &str,
    found: &mut Vec<String>,
) {
    let has = c
        .get_arguments()
        .any(|a| !a.is_hide_set() && !a.is_global_set() && a.get_long() == Some(long));
    if has && !std::ptr::eq(c, leaf) {
        found.push(path.to_string());
    }
    for s in c.get_subcommands() {
        take_flag(s, &format!("{path} {}", s.get_name()), leaf, long, found);
    }
}

/// `; did you mean X?` when clap's suggestion `suggested` is a close spelling of `typed`
/// (a typo, a letter missing or swapped), else nothing: clap suggests the least unlike
/// name even when it means something else (`send --bogus` drew `--rounds`).
fn did_you_mean(typed: &str, suggested: &str) -> String {
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
fn edits(a: &str, b: &str) -> usize {
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

/// The first line of clap's own message without its `error: ` (for kinds without context).
fn first_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::{did_you_mean, edits, line, reason};

    /// The line mailbench prints for `args` (after the program name), if clap refuses them.
    fn refused(args: &[&str]) -> Option<String> {
        let argv: Vec<std::ffi::OsString> = std::iter::once("mailbench")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        let root = crate::cli::command();
        let e = root.clone().try_get_matches_from(&argv).err()?;
        line(&e, &root, &argv)
    }

    #[test]
    fn each_kind_of_mistake_is_one_line_naming_the_input_and_the_fix() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["mailbox", "imap", "--target", "h:1", "--pipeline", "0"],
                "mailbench: --pipeline 0: must be 1..=1000 (commands in flight per session)",
            ),
            (
                &["mailbox", "imap", "--target", "h:1", "--login", "foo"],
                "mailbench: --login foo: not one of login, plain",
            ),
            (
                &["relay", "--lab", "postfx"],
                "mailbench: --lab postfx: not one of postfix, exim, opensmtpd, sendmail, qmail; \
                 did you mean postfix?",
            ),
            (
                &["relay", "--bogus"],
                "mailbench relay: unknown option --bogus; see mailbench relay --help",
            ),
            (
                &["send", "--bogus"],
                "mailbench send: unknown option --bogus; see mailbench send --help",
            ),
            (
                &["send", "h:1", "--rat", "5/s"],
                "mailbench send: unknown option --rat; did you mean --rate? (see mailbench send --help)",
            ),
            (
                &["mailbox", "populate", "--fill", "3"],
                "mailbench mailbox populate: unknown option --fill; populate's messages per user \
                 are --per-user N (--fill is how pop3, imap and profile fill a lab store first)",
            ),
            (
                &["send"],
                "mailbench send: missing <TARGET> (where to send); see mailbench send --help",
            ),
            (
                &["mailbox", "imap"],
                "mailbench mailbox imap: missing --target <HOST:PORT> (the IMAP server) or \
                 --lab dovecot; see mailbench mailbox imap --help",
            ),
            (
                &["relay", "--target", "h:1", "--lab", "postfix"],
                "mailbench relay: --target cannot be used with --lab; drop one",
            ),
            (
                &["lab", "postfx"],
                "mailbench lab: unknown command postfx; did you mean postfix? (see mailbench lab --help)",
            ),
            (
                &["--threads", "x", "send", "h:1"],
                "mailbench: --threads x: must be a whole number (threads that run connections)",
            ),
            (
                &["send", "h:1", "--quiet=yes"],
                "mailbench: --quiet takes no value: write --quiet alone, without yes",
            ),
            (
                &["send", "h:1", "--threads", "2", "--threads", "3"],
                "mailbench send: --threads given twice; give it once",
            ),
            (
                &["help", "foo"],
                "mailbench: unknown command foo; the commands are send, relay, lab, mailbox, \
                 doctor, sink, report, compare, merge, dns, completions, man",
            ),
            (
                &["dns", "--zone-file"],
                "mailbench: --zone-file needs a value: --zone-file <FILE> (a standard zone file to serve)",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(refused(args).as_deref(), Some(*want), "{args:?}");
        }
    }

    #[test]
    fn help_and_version_stay_clap_s() {
        for args in [
            &["--help"][..],
            &["--version"],
            &["send", "--help"],
            &[],
            &["mailbox"],
        ] {
            assert_eq!(refused(args), None, "{args:?}");
        }
    }

    /// Every command, given a flag it lacks, nothing, or a stray word: one line, no panic.
    #[test]
    fn every_command_refuses_in_one_line() {
        fn paths(c: &clap::Command, above: &[String], out: &mut Vec<Vec<String>>) {
            for s in c.get_subcommands() {
                let mut p = above.to_vec();
                p.push(s.get_name().to_string());
                out.push(p.clone());
                paths(s, &p, out);
            }
        }
        let mut all = Vec::new();
        paths(&crate::cli::command(), &[], &mut all);
        for p in all {
            for extra in [
                &["--no-such-flag"][..],
                &["no-such-word", "x", "y"],
                &["--threads", "0"],
            ] {
                let args: Vec<&str> = p
                    .iter()
                    .map(String::as_str)
                    .chain(extra.iter().copied())
                    .collect();
                if let Some(l) = refused(&args) {
                    assert_eq!(l.lines().count(), 1, "{args:?}: {l}");
                    assert!(l.starts_with("mailbench"), "{args:?}: {l}");
                }
            }
        }
    }

    #[test]
    fn did_you_mean_only_for_a_near_spelling() {
        assert_eq!(did_you_mean("--rat", "--rate"), "; did you mean --rate?");
        assert_eq!(did_you_mean("--raet", "--rate"), "; did you mean --rate?");
        assert_eq!(
            did_you_mean("--conections", "--connections"),
            "; did you mean --connections?"
        );
        assert_eq!(did_you_mean("--bogus", "--rounds"), "");
        assert_eq!(did_you_mean("--fill", "--fill-size"), "");
        assert_eq!(did_you_mean("--x", ""), "");
        assert_eq!(edits("kitten", "sitting"), 3);
        assert_eq!(edits("ab", "ba"), 1);
    }

    #[test]
    fn value_parsers_complaints_say_what_the_value_must_be() {
        assert_eq!(reason("0 is not in 1..=1000"), "must be 1..=1000");
        assert_eq!(reason("0 is not in 1.."), "must be at least 1");
        assert_eq!(
            reason("invalid digit found in string"),
            "must be a whole number"
        );
        assert_eq!(reason("bad\nvalue"), "bad; value");
    }
}
