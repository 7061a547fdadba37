#!/bin/bash
# Task-clock (perf stat: CPU time, precise to the microsecond) of IMAP clients doing the
# same body fetches against one running Dovecot, alternating run by run so that a machine
# that slows down slows every client alike: for A/B tests of two mailbench builds, with the
# floor beside them. perf stat comes from Debian's linux-perf.
#
# usage: bench/imap_ab.sh HOST:PORT USERS_FILE DEPTH COMMANDS ROUNDS CLIENT...
#   CLIENT: a mailbench binary, or "floor" (target/release/examples/imap_floor)
#   e.g. mailbench lab dovecot --users 100 --fill 30 --fill-size 10k   (prints both)
#        bench/imap_ab.sh 127.0.0.1:43799 /tmp/mailbench-lab-.../users.txt 1 60000 5 \
#            /tmp/mb-before target/release/mailbench floor
set -euo pipefail
target=$1 users=$2 depth=$3 n=$4 rounds=$5
shift 5
root=$(cd "$(dirname "$0")/.." && pwd)
floor=$root/target/release/examples/imap_floor
json=$(mktemp)
trap 'rm -f "$json"' EXIT
for _ in $(seq "$rounds"); do
  for c in "$@"; do
    if [ "$c" = floor ]; then
      cmd=("$floor" "$target" 50 "$n" 100 "$users" fetch_body=1 "$depth")
    else
      cmd=("$c" mailbox imap --target "$target" --users-file "$users" -n "$n" -c 50
        --per-conn 100 -q --json "$json" --pipeline "$depth" --mix fetch_body=1)
    fi
    ms=$(perf stat -x, -e task-clock "${cmd[@]}" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}')
    echo "$c $ms"
  done
done | awk '{s[$1] += $2; n[$1]++; v[$1] = v[$1] " " int($2)}
  END {for (k in s) printf "%-40s mean %5.0f ms task-clock (%s)\n", k, s[k] / n[k], v[k]}'
