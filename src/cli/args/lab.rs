//! The lab flags: which MTA or store, its shape, and how a lab store's mailboxes are filled.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand, ValueEnum};

use crate::lab::{Features, MTAS, Mta, STORES, Store};

/// `--lab`'s values for an MTA: the lab registry's names, each with its help, so that a
/// new MTA needs no edit here. `offered` picks the labs the help lists (by what they can
/// do); the others are still parsed, so that the command refuses them with the reason
/// rather than clap with a bare list.
pub(super) fn mta_parser(offered: fn(&Features) -> bool) -> impl TypedValueParser<Value = Mta> {
    let values = MTAS.iter().map(move |m| {
        PossibleValue::new(m.name())
            .help(m.about())
            .hide(!offered(&m.features()))
    });
    PossibleValuesParser::new(values)
        .try_map(|name| Mta::named(&name).ok_or_else(|| format!("no lab MTA {name}")))
}

/// `--lab`'s values for a mail store: the lab registry's names, each with its help, so
/// that a new store needs no edit here.
pub(super) fn store_parser() -> impl TypedValueParser<Value = Store> {
    let values = STORES
        .iter()
        .map(|s| PossibleValue::new(s.name()).help(s.about()));
    PossibleValuesParser::new(values)
        .try_map(|name| Store::named(&name).ok_or_else(|| format!("no lab store {name}")))
}

/// Where a lab keeps its queue or its mail.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlacementArg {
    /// RAM disk.
    Tmpfs,
    /// Directory on disk.
    Disk,
}

/// How the lab's entry MTA checks recipients (`--mta-lookup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LookupArg {
    /// No recipient check: every recipient is relayed (the lab's default).
    None,
    /// A Postfix hash: table of the run's recipients (the baseline).
    Hash,
    /// A private OpenLDAP holding the run's recipients, through an ldap: table.
    Ldap,
}

/// Whether the lab MTA writes its log (`--mta-logging`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoggingArg {
    /// Its log as the lab writes it (Postfix maillog_file, qmail-send's log).
    On,
    /// No log where the MTA allows it; delivered counts come from the sink alone.
    Off,
    /// qmail-send's log through daemontools' multilog, as qmail sites run it (qmail).
    Multilog,
}

/// Flags that shape a lab.
#[derive(Debug, Args)]
pub struct LabShape {
    /// Queue on a RAM disk or on disk.
    #[arg(long, value_enum, default_value = "tmpfs")]
    pub queue: PlacementArg,
    /// Chain this many MTAs (MTA → MTA → sink).
    #[arg(long, default_value = "1", value_name = "N")]
    pub hops: u8,
    /// Override one of the MTA's own settings (repeatable): a main.cf parameter for
    /// Postfix (default_process_limit=100), a main option for Exim (smtp_accept_max=50),
    /// an smtpd.conf line `KEY VALUE` for OpenSMTPD, a sendmail.cf option `O KEY=VALUE`
    /// for Sendmail (MaxDaemonChildren=50). A setting the MTA refuses is an error.
    #[arg(long = "mta-conf", alias = "postconf", value_name = "KEY=VALUE")]
    pub mta_conf: Vec<String>,
    /// Processes or connections serving SMTP at once (Postfix default_process_limit, Exim
    /// smtp_accept_max, Sendmail MaxDaemonChildren; the lab's default is 512).
    #[arg(long, value_name = "N")]
    pub mta_processes: Option<u32>,
    /// Parallel deliveries to one destination (Postfix
    /// default_destination_concurrency_limit, OpenSMTPD max-conn-per-host; the lab's
    /// default is 100).
    #[arg(long, value_name = "N")]
    pub mta_dest_concurrency: Option<u32>,
    /// The lab MTA DKIM-signs every message it accepts with this PEM private key, through
    /// OpenDKIM as a milter (what does signing cost this MTA).
    #[arg(long, value_name = "FILE")]
    pub mta_dkim_key: Option<PathBuf>,
    /// The lab MTA's signing domain (d=).
    #[arg(
        long,
        default_value = "example.org",
        value_name = "DOMAIN",
        requires = "mta_dkim_key"
    )]
    pub mta_dkim_domain: String,
    /// The lab MTA's selector (s=).
    #[arg(
        long,
        default_value = "mailbench",
        value_name = "NAME",
        requires = "mta_dkim_key"
    )]
    pub mta_dkim_selector: String,
    /// How the entry MTA checks each recipient (seed 004's lookups; --lab postfix): none
    /// (it relays every recipient, the lab's default), hash (a hash: table of the run's
    /// recipients) or ldap (a private slapd holding them, through an ldap: table); lookups
    /// per message and their latency go in the results.
    #[arg(long, value_enum, default_value = "none")]
    pub mta_lookup: LookupArg,
    /// A fault of the lab's LDAP directory (repeatable, with --mta-lookup ldap):
    /// delay=200ms holds every lookup that long; down=5s@10s has it down for 5 s from
    /// 10 s after the first lookup (the MTA then answers 451 4.3.0 Temporary lookup
    /// failure).
    #[arg(long, value_name = "FAULT")]
    pub ldap_fault: Vec<String>,
    /// How the lab MTA logs: on (Postfix maillog_file, qmail-send's output to a file), off
    /// (no log: what logging costs, with delivered counts from the sink), or multilog
    /// (qmail-send through daemontools' multilog, as seed 004 ran it).
    #[arg(long, value_enum, default_value = "on")]
    pub mta_logging: LoggingArg,
}

/// `mailbench lab`'s servers: one subcommand per lab in the registry ([`MTAS`],
/// [`STORES`]), named and described by it, so that a new lab needs no edit here.
#[derive(Debug)]
pub enum LabCommand {
    /// A disposable MTA that relays to --relay.
    Mta(Mta, MtaLabArgs),
    /// A disposable mail store with numbered users.
    Store(Store, DovecotLabArgs),
}

impl clap::FromArgMatches for LabCommand {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, sub)) = m.subcommand() else {
            return Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand));
        };
        if let Some(mta) = Mta::named(name) {
            return Ok(LabCommand::Mta(mta, MtaLabArgs::from_arg_matches(sub)?));
        }
        match Store::named(name) {
            Some(store) => Ok(LabCommand::Store(
                store,
                DovecotLabArgs::from_arg_matches(sub)?,
            )),
            None => Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand)),
        }
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for LabCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        let cmd = MTAS.iter().fold(cmd, |cmd, m| {
            cmd.subcommand(
                MtaLabArgs::augment_args(clap::Command::new(m.name())).about(format!(
                    "A disposable MTA that relays to --relay: {}.",
                    m.about()
                )),
            )
        });
        STORES.iter().fold(cmd, |cmd, s| {
            cmd.subcommand(
                DovecotLabArgs::augment_args(clap::Command::new(s.name())).about(format!(
                    "A disposable mail store with numbered users: {}.",
                    s.about()
                )),
            )
        })
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        Mta::named(name).is_some() || Store::named(name).is_some()
    }
}

/// Flags of `mailbench lab postfix|exim|opensmtpd|sendmail|qmail`.
#[derive(Debug, Args)]
pub struct MtaLabArgs {
    /// Where the lab relays to; `lmtp:HOST:PORT` (Postfix) delivers over LMTP instead,
    /// e.g. into the LMTP port `mailbench lab dovecot` prints.
    #[arg(long, default_value = "127.0.0.1:2525", value_name = "HOST:PORT")]
    pub relay: String,
    /// Offer STARTTLS on the entry smtpd (Postfix), with a certificate made for the lab
    /// (its path is printed, for --tls-ca)
    #[arg(long)]
    pub starttls: bool,
    /// Lab shape.
    #[command(flatten)]
    pub shape: LabShape,
}

/// Flags of `mailbench lab dovecot` and `lab cyrus`.
#[derive(Debug, Args)]
pub struct DovecotLabArgs {
    /// Offer STARTTLS (IMAP), STLS (POP3), IMAPS and POP3S with a certificate made for the
    /// lab (its path is printed, for --tls-ca).
    #[arg(long)]
    pub starttls: bool,
    /// The store's users and settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Messages to deliver into each user's mailboxes before it is handed over.
    #[arg(long, default_value = "0", value_name = "N")]
    pub fill: String,
    /// How the mailboxes are filled.
    #[command(flatten)]
    pub filling: FillArgs,
}

/// A lab store's users and settings (`lab dovecot`, `mailbox ... --lab dovecot`).
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Mailbox users to create [default: 100].
    #[arg(long, value_name = "N")]
    pub users: Option<String>,
    /// Their addresses (also their login names); {num} is the user's number from 1
    /// [default: user{num}@store.test].
    #[arg(long, value_name = "TEMPLATE")]
    pub user_template: Option<String>,
    /// Their passwords; {num} is the user's number [default: secret{num}].
    #[arg(long, value_name = "TEMPLATE")]
    pub password_template: Option<String>,
    /// How mail is kept [default: maildir].
    #[arg(long, value_enum)]
    pub mail_format: Option<MailFormatArg>,
    /// Mail on a RAM disk or on disk [default: tmpfs].
    #[arg(long, visible_alias = "store", value_enum)]
    pub storage: Option<PlacementArg>,
    /// Override one of the store's own settings (repeatable): a dovecot.conf setting for
    /// Dovecot (mail_fsync=always), an imapd.conf option for Cyrus (fulldirhash=1). A
    /// setting the store refuses is an error.
    #[arg(long = "store-conf", alias = "doveconf", value_name = "KEY=VALUE")]
    pub store_conf: Vec<String>,
    /// Have the store count its own logins, deliveries and IMAP commands, with their
    /// durations, and put them beside mailbench's figures (a server-side cross-check; the
    /// store's statistics process costs it a little).
    #[arg(long)]
    pub server_stats: bool,
}

/// How a lab store keeps mail.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MailFormatArg {
    /// One file per message.
    Maildir,
    /// Dovecot's multi-message files.
    Mdbox,
}

/// How mailboxes are filled: over LMTP, with generated messages or real ones.
#[derive(Debug, Clone, Args)]
pub struct FillArgs {
    /// Folders per user that get an equal share, INBOX included (the others are named
    /// f2, f3, ...).
    #[arg(long, default_value = "1", value_name = "N")]
    pub folders: String,
    /// Size of each message filled in, or a range 1k-64k.
    #[arg(long, default_value = "25k", value_name = "SIZE")]
    pub fill_size: String,
    /// Fill with the *.eml files of this directory (or one file), round-robin, instead of
    /// generated messages. They keep their own headers; the trace header is added.
    #[arg(long, value_name = "DIR", conflicts_with = "fill_size")]
    pub eml: Option<PathBuf>,
    /// LMTP sessions that fill at once.
    #[arg(long, default_value = "8", value_name = "N")]
    pub fill_concurrency: String,
}
