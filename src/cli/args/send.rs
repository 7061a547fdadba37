//! `send`'s flags and the flags that split a run over agents.

use clap::Args;

use super::load::LoadArgs;

/// Shown after the command's flags in its `--help`: examples and what the flags mean together.
pub(super) const SEND_EXAMPLES: &str = "\
Examples:
  mailbench send 127.0.0.1:2525 -n 10000 -c 64 --size 25k
      10,000 messages of 25 KiB over 64 connections, as fast as they go
  mailbench send 127.0.0.1:25 --rate 500/s -z 60s --arrivals poisson -c 200
      open loop: 500 messages/s for a minute; latency counts from the intended start
  mailbench send mx.test:25 --to 'user{seq}@d{mod:1000}.example.test' --rcpts 3
      three recipients per message spread over 1,000 domains
  mailbench send 127.0.0.1:587 --tls starttls --auth user:secret --json out.json
  mailbench send unix:/run/dovecot/lmtp --lmtp --recipients users.txt
  mailbench send 127.0.0.1:2525 -n 1000 --threshold 'p99(total)<200ms' --threshold 'errors<1%'
  mailbench send 127.0.0.1:25 --rate 1000/s -z 5m --threshold 'unstarted==0'

Trace header: every message carries
  X-Mailbench-Trace: run=<16 hex>; seq=<n>; t=<send time, µs since the epoch>
Exit codes: 0 ok, 1 bad input or unreachable target, 2 run failed or nothing accepted,
3 a threshold was breached.";

/// Flags of `mailbench send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send: host[:port] (default port 25), [v6addr]:port, unix:/path; a
    /// comma-separated list is used round-robin.
    pub target: String,
    /// The load.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Splitting the run over several agents.
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// One run split over many agents, each a `mailbench send` started by a launcher people
/// already operate (Kubernetes, Slurm, Nomad, GNU parallel); `mailbench merge` adds their
/// results up.
#[derive(Debug, Clone, Default, Args)]
pub struct ScaleArgs {
    /// Be agent I of N (from 0): take every N-th message of the run (the same schedule
    /// as one agent would keep, striped), 1/N of -c and of --source-ip. auto/N takes I
    /// from JOB_COMPLETION_INDEX (Kubernetes Indexed Job), SLURM_ARRAY_TASK_ID,
    /// SLURM_PROCID, NOMAD_ALLOC_INDEX or PARALLEL_SEQ (GNU parallel, from 1).
    #[arg(long, value_name = "I/N|auto/N")]
    pub shard: Option<String>,
    /// Start the load at this time, so that agents started a little apart begin
    /// together: RFC 3339 in UTC (2026-11-25T17:00:00Z); +30s from now only for a run
    /// that is not split (each agent's now differs).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// The run id (up to 16 hex digits) in every trace header and in the results: the
    /// same for all agents of a run, so that sinks and `merge` see one run.
    #[arg(long, value_name = "HEX")]
    pub run_id: Option<String>,
}
