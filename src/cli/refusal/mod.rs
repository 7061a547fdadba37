//! A command line clap refused, said in one line: what was wrong and how to fix it (the
//! product's rule for bad input), instead of clap's block of `error:`, `tip:`, a usage
//! line that shows only the flags involved, and `For more information…`. Built from the
//! error's context (the flag, the value, the valid values), the command line and the
//! command tree; `cli::parse` prints it. Help, version and the help shown for a bare
//! `mailbench` stay clap's own. Pure: no printing, no exit. `tree` reads the command
//! tree (which command, which argument, what it is for), `spelling` judges clap's
//! suggestions.

use std::error::Error as _;
use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

mod spelling;
mod tree;

use spelling::did_you_mean;
use tree::{clause, command_path, find_arg, flag_of, missing_one, owners, subcommands};

/// Flags a command does not have but a user of another command would type there, with
/// what to type instead: `(command path, flag, hint)`. clap's spelling tip points
/// elsewhere (`--fill-size`), and an alias would hide that populate's flag is another
/// (it fills any store, not only a lab's before a run).
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
            // One already offered as another's alternative ("--lab … or --target …") is
            // not named again.
            let mut each: Vec<String> = Vec::new();
            for m in &missing {
                let offered = format!(" or {}", flag_of(m));
                if !each.iter().any(|e| e.contains(&offered)) {
                    each.push(missing_one(&path, m));
                }
            }
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
    if arg.len() > 1 && arg[1..].starts_with(|c: char| c.is_ascii_digit()) && arg.starts_with('-') {
        // `-n -5`: clap reads a negative value as an option.
        return format!(
            "{arg} is a negative number where a value was expected; counts, rates, sizes \
             and durations are positive; {see}"
        );
    }
    if !arg.starts_with('-') {
        // Say what the command does take in that place: often a value given twice, or
        // a second target where one comma-separated list was meant.
        let takes: Vec<String> = leaf
            .get_positionals()
            .filter(|a| !a.is_hide_set())
            .map(|a| {
                let shown = flag_of(&a.get_id().to_string().to_uppercase());
                let shown = match a.get_value_names().and_then(|v| v.first()) {
                    Some(v) => format!("<{v}>"),
                    None => shown,
                };
                match clause(a) {
                    Some(c) => format!("{shown} ({c})"),
                    None => shown,
                }
            })
            .collect();
        let cmd = leaf.get_name();
        return match takes.is_empty() {
            true => format!("unexpected argument {arg}: {cmd} takes options only; {see}"),
            false => format!(
                "unexpected argument {arg}: {cmd} takes one {}; {see}",
                takes.join(" and one ")
            ),
        };
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

/// The first line of clap's own message without its `error: ` (for kinds without context).
fn first_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests;
