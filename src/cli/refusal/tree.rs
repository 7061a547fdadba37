//! What the command tree says about a refused argument: the command it was given to,
//! the argument a flag names, what it is for (its help), what would do instead, and which
//! other commands take it. Read from `cli::command`'s tree; no printing.

use std::ffi::OsString;

/// The commands the arguments name, root first (`mailbench mailbox imap …` gives
/// mailbench, mailbox, imap): each word that is not a flag and names a subcommand of the
/// last one found. `help` is not followed: `mailbench help foo` is a mistake at the top.
pub fn command_path<'a>(root: &'a clap::Command, args: &[OsString]) -> Vec<&'a clap::Command> {
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
pub fn flag_of(shown: &str) -> String {
    let first = shown.split(' ').next().unwrap_or(shown);
    if first.starts_with(['<', '[']) {
        let name = first.trim_start_matches(['<', '[']);
        return format!("<{}>", name.trim_end_matches(['>', ']', '.']));
    }
    first.split('=').next().unwrap_or(first).to_string()
}

/// The argument `flag` names and the command that declares it, looked for in the command
/// and then its parents (global flags such as `--threads` are declared above).
pub fn find_arg<'a>(
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
/// and the flags that would do instead, each with what it is for: an argument both
/// required and in conflict with another is required only without that other (`--target`
/// or `--lab`), else the other could never be given. The conflict must be declared on the
/// required argument (`conflicts_with` on `--target`) to be offered here.
pub fn missing_one(path: &[&clap::Command], shown: &str) -> String {
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
            // What the other is for: `--lab postfix` alone does not say it starts an MTA.
            let what = clause(a).map(|c| format!(" ({c})")).unwrap_or_default();
            Some(format!("--{long}{value}{what}"))
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
pub fn clause(arg: &clap::Arg) -> Option<String> {
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

/// The names of a command's subcommands, for a line that lists them.
/// In --help's order (`cli::command` re-adds some, which moves them to the end).
pub fn subcommands(c: &clap::Command) -> String {
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

/// The commands other than `leaf` that take `flag` (at most three, then `…`).
pub fn owners(root: &clap::Command, leaf: &clap::Command, flag: &str) -> Vec<String> {
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
pub fn take_flag(
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
