//! `sink`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::output::OutputArgs;

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const SINK_EXAMPLES: &str = "\
Examples:
  mailbench sink
      listen on 127.0.0.1:2525, accept and discard everything, print interval lines
  mailbench sink --listen 127.0.0.1:2525 --listen [::1]:2525 --store maildir:/tmp/md
  mailbench sink --rule 'rcpt:451:30%' --rule 'data_end:delay=50ms-200ms' --greylist 30s
      defer 30 % of recipients, slow down end of data, greylist new triples for 30 s
  mailbench sink --lmtp --listen unix:/tmp/lmtp.sock --exit-after-messages 10000 --json out.json

Faults asked for by the recipient address: tempfail@… (450), permfail@… (550),
451-anything@… (that code), disconnect@…, shutdown@… (421), greylist@….
Rules: COMMAND:ACTION[:PERCENT%] with COMMAND connect|ehlo|auth|mail|rcpt|data|data_end|quit
and ACTION a 4xx/5xx code, delay=DUR[-DUR], disconnect, shutdown, or pace=RATE (at most
RATE of that command's replies a second, all connections together; each waits its turn).";

/// Flags of `mailbench sink`.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// The run id (up to 16 hex digits) of this sink's results: give several sinks of one
    /// run the same, so that `mailbench merge` takes their files as one run.
    #[arg(long, value_name = "HEX")]
    pub run_id: Option<String>,
    /// Address to listen on (repeatable): host:port, [v6addr]:port or unix:/path.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:2525")]
    pub listen: Vec<String>,
    /// Speak LMTP (a reply per recipient after the content).
    #[arg(long)]
    pub lmtp: bool,
    /// Name in the greeting.
    #[arg(long, default_value = crate::sink::plan::defaults::HOSTNAME, value_name = "NAME")]
    pub hostname: String,
    /// Largest message accepted; larger ones get 552.
    #[arg(long, default_value = "50M", value_name = "SIZE")]
    pub max_size: String,
    /// Verify every accepted message's DKIM signatures against this public key (PEM, or
    /// the DNS record `v=DKIM1; k=…; p=…`) and count passes, failures and unsigned ones.
    #[arg(long, value_name = "FILE")]
    pub dkim_verify: Option<PathBuf>,
    /// Do not offer PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// Do not offer 8BITMIME.
    #[arg(long)]
    pub no_8bitmime: bool,
    /// Do not offer ENHANCEDSTATUSCODES.
    #[arg(long)]
    pub no_enhanced_status_codes: bool,
    /// Do not offer STARTTLS.
    #[arg(long)]
    pub no_starttls: bool,
    /// Do not offer AUTH.
    #[arg(long)]
    pub no_auth: bool,
    /// Do not offer CHUNKING (BDAT).
    #[arg(long)]
    pub no_chunking: bool,
    /// Do not offer SMTPUTF8.
    #[arg(long)]
    pub no_smtputf8: bool,
    /// Do not offer DSN.
    #[arg(long)]
    pub no_dsn: bool,
    /// PEM certificate for STARTTLS (default: a self-signed one made at start).
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Where messages go: discard, maildir:DIR, mbox:FILE or dir:DIR (one file each).
    #[arg(long, default_value = "discard", value_name = "STORE")]
    pub store: String,
    /// Make each stored message durable before replying 250: fsync its file, then the
    /// directory that names it (a maildir's new/ after the rename; an mbox's data). That
    /// is two waits for the disk per message, one at a time per connection: on a disk the
    /// sink's rate falls to what its flushes allow.
    #[arg(long)]
    pub fsync: bool,
    /// Fault rule COMMAND:ACTION[:PERCENT%] (repeatable).
    #[arg(long, value_name = "RULE")]
    pub rule: Vec<String>,
    /// Fault rules from a TOML file (rules = ["rcpt:451:30%"], greylist = "30s", ...).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Greylist new (client IP, sender, recipient) triples for this long.
    #[arg(long, value_name = "DURATION")]
    pub greylist: Option<String>,
    /// Delay every reply by this much (tarpit).
    #[arg(long, value_name = "DURATION")]
    pub tarpit: Option<String>,
    /// Drip every reply a byte at a time with this delay between bytes.
    #[arg(long, value_name = "DURATION")]
    pub drip: Option<String>,
    /// Read at most this many bytes per second per connection.
    #[arg(long, value_name = "SIZE")]
    pub bandwidth: Option<String>,
    /// Recipients with BHM flags (address [password [flags]]: d defer, r reject, g greylist,
    /// b accept and bounce).
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Check AUTH against the --users list (address and password) instead of accepting any.
    #[arg(long)]
    pub auth_users: bool,
    /// Send DSNs for recipients flagged b to this SMTP server (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub bounce_to: Option<String>,
    /// Concurrent connections overall; more are answered 421.
    #[arg(long, default_value = crate::sink::plan::defaults::MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: String,
    /// Concurrent connections per client IP; more are answered 421.
    #[arg(long, value_name = "N")]
    pub max_conns_per_ip: Option<String>,
    /// Messages per connection; the next MAIL gets 421.
    #[arg(long, value_name = "N")]
    pub max_msgs_per_conn: Option<String>,
    /// Messages per second per client IP; more get 451.
    #[arg(long, value_name = "RATE")]
    pub rate_per_ip: Option<String>,
    /// Close connections idle this long.
    #[arg(long, default_value = crate::sink::plan::defaults::IDLE_TIMEOUT, value_name = "DURATION")]
    pub idle_timeout: String,
    /// Stop after this many messages.
    #[arg(long, value_name = "N")]
    pub exit_after_messages: Option<String>,
    /// Stop after no traffic for this long (counted from the first connection).
    #[arg(long, value_name = "DURATION")]
    pub exit_after_idle: Option<String>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}
