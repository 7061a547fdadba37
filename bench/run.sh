#!/usr/bin/env bash
# Runs the side-by-side benchmarks (send, sink, relay, pop3, imap), the report's size, the
# live view's overhead, DKIM's cost, the flush benchmark, the test DNS against NSD, DNS
# in the relay, the lab MTAs compared and their durability under faults, and keeps their output in
# bench/runs/<date>-<host>/. Usage: bench/run.sh [--quick] [--no-postal]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --for-tests
cargo build --release --quiet --bins --examples
dir="bench/runs/$(date +%Y%m%d-%H%M)-$(hostname)"
mkdir -p "$dir"
{
  echo "# side-by-side benchmarks"
  echo "command: bench/run.sh $*"
  echo "git: $(git rev-parse --short HEAD)"
  echo "kernel: $(uname -r); cpus: $(nproc)"
  echo "postfix: $(dpkg-query -W -f='${Version}' postfix 2>/dev/null); postal: $(dpkg-query -W -f='${Version}' postal 2>/dev/null); dovecot: $(dpkg-query -W -f='${Version}' dovecot-core 2>/dev/null)"
} > "$dir/README.md"
python3 bench/send_vs_peers.py --reps 3 --out "$dir" "$@"
python3 bench/sink_vs_peers.py --out "$dir" "$@"
python3 bench/relay_vs_classic.py --out "$dir"
python3 bench/pop3_vs_peers.py --out "$dir"
python3 bench/imap_vs_floor.py --out "$dir"
python3 bench/report_size.py --out "$dir"
python3 bench/live_overhead.py --out "$dir"
python3 bench/dkim_cost.py --out "$dir"
python3 bench/flush.py --out "$dir"
command -v dnsperf >/dev/null 2>&1 || apt-get install -y -qq --no-install-recommends dnsperf >/dev/null
python3 bench/dns_vs_nsd.py --out "$dir"
python3 bench/relay_dns.py --out "$dir"
python3 bench/mta_compare.py --out "$dir"
python3 bench/durability.py --out "$dir"
