//! The `dns` command's flags, and the zone flags `relay --dns-domains` shares.

use std::path::PathBuf;

use clap::Args;

use super::output::OutputArgs;

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const DNS_EXAMPLES: &str = "\
Examples:
  mailbench dns --domains 'd{1..254}.example.test' --mx-address 127.0.2.1,127.0.2.2
      254 zones on 127.0.0.1:5353 (UDP and TCP), each with an MX host on one of two
      addresses; check with: dig @127.0.0.1 -p 5353 MX d1.example.test
  mailbench dns --domains 50 --rule 'mx:delay=200ms:10%' --rule 'a:servfail:5%' \\
      -z 60s --json dns.json
      domains d0..d49.example.test, slow MX answers and failing A answers, 60 s
  mailbench dns --zone-file lab.zone --listen 127.53.0.1:53 --query-log queries.log
      a zone file (RFC 1035 master format, one zone with its SOA) on port 53 of
      127.53.0.1, one line per question in queries.log

Rules: TYPE[@NAME-GLOB]:ACTION[:PERCENT%][:until=DURATION] with TYPE a|aaaa|mx|txt|ptr|other|any
and ACTION delay=DUR[-DUR], servfail, nxdomain, refused, drop (no answer) or truncate (TC bit).";

/// The zones a DNS server makes: `dns`'s flags, and the relay's with `--dns-domains`.
#[derive(Debug, Args, Clone)]
pub struct ZoneArgs {
    /// MX records per domain (preferences 10, 20, ...), each on its own host name.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=16))]
    pub mx_per_domain: u8,
    /// No MX records: each domain's own name gets the A (or AAAA) record, and an MTA
    /// delivers to it as the implicit MX (RFC 5321 §5.1); --mx-per-domain is then unused.
    #[arg(long)]
    pub no_mx: bool,
    /// TTL of every synthetic record: how long resolvers may cache them.
    #[arg(long, default_value = "300s", value_name = "DURATION")]
    pub zone_ttl: String,
    /// Publish this DKIM public key (PEM, or the record `v=DKIM1; k=…; p=…`) at
    /// SELECTOR._domainkey of every synthetic domain.
    #[arg(long, value_name = "FILE")]
    pub dkim_txt: Option<PathBuf>,
    /// The selector of --dkim-txt.
    #[arg(long, default_value = "mailbench", value_name = "NAME")]
    pub dkim_txt_selector: String,
}

/// Flags of `mailbench dns`.
#[derive(Debug, Args)]
pub struct DnsArgs {
    /// Address to serve on, UDP and TCP (repeatable): host:port or [v6addr]:port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5353")]
    pub listen: Vec<String>,
    /// Synthetic domains: a count N (d0..dN-1.example.test) or names with one {A..B} range
    /// each, comma-separated: 'd{1..254}.example.test'.
    #[arg(long, value_name = "SPEC")]
    pub domains: Option<String>,
    /// Addresses of the synthetic MX hosts, comma-separated (IPv4 gives A records, IPv6
    /// AAAA); domains are spread over them.
    #[arg(long, value_name = "IP,...", default_value = "127.0.2.1")]
    pub mx_address: String,
    /// The synthetic zones' details.
    #[command(flatten)]
    pub zone: ZoneArgs,
    /// A standard zone file to serve (repeatable); needs $ORIGIN or absolute names, and
    /// an SOA.
    #[arg(long, value_name = "FILE")]
    pub zone_file: Vec<PathBuf>,
    /// Fault rule (repeatable): TYPE[@NAME-GLOB]:ACTION[:PERCENT%][:until=DURATION].
    #[arg(long, value_name = "RULE")]
    pub rule: Vec<String>,
    /// Write one line per query (time, client, transport, name, type, outcome, time taken)
    /// to this file; for debugging, it costs time per query.
    #[arg(long, value_name = "FILE")]
    pub query_log: Option<PathBuf>,
    /// Stop after this long.
    #[arg(short = 'z', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Outputs and thresholds.
    #[command(flatten)]
    pub out: OutputArgs,
}
