//! Flags given to a command they do not belong to, where clap's own "similar argument"
//! tip would mislead: each is taken, hidden, by the commands it is mistaken for, and
//! refused in one line naming the command that has it. (`send --trace-io` made clap
//! suggest `--grace`, a drain timeout that has nothing to do with tracing IO.)

/// `(flag, the commands it is mistaken for, why they cannot take it and where it is)`.
const MISPLACED: [(&str, &[&str], &str); 1] = [(
    "trace-io",
    &["send", "sink"],
    "counts the IO of the MTA under test, which {cmd} neither runs nor watches; relay \
     does: mailbench relay --lab postfix --trace-io …",
)];

/// `cmd` with each misplaced flag added, hidden (no help, no completion, no man page), to
/// the commands it is mistaken for.
pub fn take(mut cmd: clap::Command) -> clap::Command {
    for (flag, commands, _) in MISPLACED {
        for name in commands {
            cmd = cmd.mut_subcommand(name, |s| {
                s.arg(
                    clap::Arg::new(flag)
                        .long(flag)
                        .action(clap::ArgAction::SetTrue)
                        .hide(true),
                )
            });
        }
    }
    cmd
}

/// The one-line refusal of a misplaced flag in `m`, if one was given.
pub fn refusal(m: &clap::ArgMatches) -> Option<String> {
    let (name, sub) = m.subcommand()?;
    let (flag, _, why) = MISPLACED.iter().find(|(flag, commands, _)| {
        commands.contains(&name) && sub.try_get_one::<bool>(flag).ok().flatten() == Some(&true)
    })?;
    Some(format!("--{flag}: {}", why.replace("{cmd}", name)))
}
