//! What each message is: `--from`, `--to`, `--rcpts`, `--size`, `--body`/`--eml`,
//! `--attach` → a `MessagePlan`; and the messages a command makes itself (filling a
//! store, timing arrivals), whose size and files come from flags of other names.

use std::path::Path;
use std::sync::Arc;

use crate::cli::args::MessageArgs;
use crate::message::address::AddrTemplate;
use crate::message::template::{Content, GenSpec, SizeRange};
use crate::message::users;
use crate::send::plan::{Addresses, MessagePlan};
use crate::units;

/// Message values a command sets itself, as if their flags were given: the relay's
/// `--list-server` and `--dns-domains` spread the recipients over the test domains.
#[derive(Debug, Default)]
pub struct Implied {
    /// Recipients per message, in place of `--rcpts`.
    pub rcpts: Option<u64>,
    /// The recipient template, in place of `--to`.
    pub to: Option<String>,
}

/// The messages from their flags; `default_size` stands for `--size` when not given.
pub fn message(
    a: &MessageArgs,
    default_size: &str,
) -> Result<(MessagePlan, serde_json::Value), String> {
    message_implied(a, default_size, &Implied::default())
}

/// `message`, with the values the command implies taking the place of their flags.
pub fn message_implied(
    a: &MessageArgs,
    default_size: &str,
    implied: &Implied,
) -> Result<(MessagePlan, serde_json::Value), String> {
    let rcpts = match implied.rcpts {
        Some(n) => n,
        None => units::count(&a.rcpts).map_err(super::flagged("--rcpts"))?,
    };
    let to_spec = implied.to.as_deref().unwrap_or(&a.to);
    if rcpts == 0 || rcpts > 100_000 {
        return Err("--rcpts must be between 1 and 100000".into());
    }
    let from = match &a.senders {
        Some(p) => Addresses::List(Arc::new(users::load(p)?)),
        None => {
            Addresses::Template(AddrTemplate::parse(&a.from).map_err(|e| format!("--from: {e}"))?)
        }
    };
    let to = match &a.recipients {
        Some(p) => Addresses::List(Arc::new(users::load(p)?)),
        None => {
            Addresses::Template(AddrTemplate::parse(to_spec).map_err(|e| format!("--to: {e}"))?)
        }
    };
    let attach = a.attach.as_deref();
    build(Envelope {
        from,
        to,
        rcpts,
        from_json: a
            .senders
            .as_ref()
            .map_or(a.from.clone(), |p| format!("list:{}", p.display())),
        to_json: a
            .recipients
            .as_ref()
            .map_or(to_spec.to_string(), |p| format!("list:{}", p.display())),
        size: ("--size", a.size.as_deref().unwrap_or(default_size)),
        attach,
        body: a.body.as_deref().or(a.eml.as_deref()),
    })
}

/// One recipient per message from the fixed `from` to `to`, generated at `size` (a size
/// or a range, given as the flag `size.0`) unless `eml` names files to send instead.
pub fn fixed(
    from: &str,
    to: &str,
    size: (&str, &str),
    eml: Option<&Path>,
) -> Result<(MessagePlan, serde_json::Value), String> {
    let template = |t: &str| AddrTemplate::parse(t).map(Addresses::Template);
    build(Envelope {
        from: template(from)?,
        to: template(to)?,
        rcpts: 1,
        from_json: from.to_string(),
        to_json: to.to_string(),
        size,
        attach: None,
        body: eml,
    })
}

/// A message's envelope and content as given, before the content is made.
struct Envelope<'a> {
    from: Addresses,
    to: Addresses,
    rcpts: u64,
    from_json: String,
    to_json: String,
    /// The size flag's name and value.
    size: (&'a str, &'a str),
    attach: Option<&'a str>,
    body: Option<&'a Path>,
}

/// The plan and its part of the configuration record.
fn build(e: Envelope) -> Result<(MessagePlan, serde_json::Value), String> {
    let (flag, size) = e.size;
    let (min, max) = units::size_range(size).map_err(|why| format!("{flag}: {why}"))?;
    let attach = e
        .attach
        .map(units::size)
        .transpose()
        .map_err(super::flagged("--attach"))?
        .unwrap_or(0);
    if max > 512 << 20 || attach > 512 << 20 {
        return Err(format!("{flag} and --attach are limited to 512 MiB"));
    }
    let generate = |min: usize| {
        Content::generate(&GenSpec {
            size: SizeRange { min, max },
            attach,
            from: sample(&e.from),
            to: sample(&e.to),
        })
    };
    let mut min = min;
    let content = match e.body {
        Some(p) => {
            if attach > 0 {
                return Err("--attach applies to generated messages, not to --body/--eml".into());
            }
            Content::from_path(p)?
        }
        None => {
            let content = generate(min)?;
            match content.smallest(crate::send::workload::longest_prefix()) {
                Some(least) if min < least => {
                    min = at_least(flag, size, least, min == max || max < least)?;
                    generate(min)?
                }
                _ => content,
            }
        }
    };
    let json = serde_json::json!({
        "rcpts": e.rcpts,
        "from": e.from_json,
        "to": e.to_json,
        "size": {"min": min, "max": max},
        "attach": attach,
        "body": e.body.map(|p| p.display().to_string()),
    });
    let plan = MessagePlan {
        from: e.from,
        to: e.to,
        rcpts: e.rcpts as u32,
        content: Arc::new(content),
        dkim: None,
    };
    Ok((plan, json))
}

/// A size below the smallest message that can be made (its header section and trace
/// header): a fixed size is refused, naming the smallest (a user asking for 0 bytes wants
/// to know what the least is, not to get it silently); a range (`0-10k`, as Postal's
/// sizes are written) starts at the smallest instead, as the size flag's help says.
fn at_least(flag: &str, size: &str, least: usize, fixed: bool) -> Result<usize, String> {
    if fixed {
        Err(format!(
            "{flag} {size}: the smallest message mailbench can make is {least} bytes (its header section and trace header); give {flag} {least} or more"
        ))
    } else {
        Ok(least)
    }
}

/// An address for the generated From/To header.
fn sample(a: &Addresses) -> String {
    match a {
        Addresses::Template(t) => t.render(0, 0, &mut fastrand::Rng::with_seed(0)),
        Addresses::List(l) => l[0].address.clone(),
    }
}
