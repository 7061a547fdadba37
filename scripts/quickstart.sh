#!/usr/bin/env bash
# The main job, from a fresh clone: install what is needed, build, and benchmark.
# Until the relay benchmark lands, this runs `mailbench send` (10,000 × 25 KiB over 64
# connections) against a throwaway Postfix smtp-sink on a free loopback port, prints the
# summary and leaves the results file in ./results/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo build --release --quiet
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
user=$( [ "$(id -u)" = 0 ] && echo "-u nobody" || echo "" )
/usr/sbin/smtp-sink $user 127.0.0.1:"$port" 1024 &
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
  sleep 0.1
done
mkdir -p results
out="results/send-$(date +%Y%m%d-%H%M%S).json"
./target/release/mailbench send 127.0.0.1:"$port" -n 10000 -c 64 --size 25k --json "$out" "$@"
