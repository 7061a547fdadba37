#!/usr/bin/env bash
# Runs the side-by-side send benchmark and keeps the output in bench/runs/<date>-<host>/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo build --release --quiet
dir="bench/runs/$(date +%Y%m%d)-$(hostname)"
mkdir -p "$dir"
{
  echo "# send vs peers"
  echo "command: bench/run.sh $*"
  echo "git: $(git rev-parse --short HEAD)"
  echo "kernel: $(uname -r); cpus: $(nproc)"
  echo "postfix: $(dpkg-query -W -f='${Version}' postfix 2>/dev/null); postal: $(dpkg-query -W -f='${Version}' postal 2>/dev/null)"
} > "$dir/README.md"
python3 bench/send_vs_peers.py --out "$dir" "$@"
