#!/usr/bin/env bash
# Fuzzes the wire parsers. cargo-fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP=1 lets
# the stable 1.95 toolchain (the only one here) accept them. Crashes are kept under
# fuzz/artifacts/.
#
#   scripts/fuzz.sh           the test suite's pass: a fixed seed and a fixed number of
#                             inputs per target (about 10 s each on two cores), so it
#                             tries the same inputs on every machine: a crash it finds is
#                             found again here, and a green run stays green
#   scripts/fuzz.sh SECONDS   exploring: a fresh seed, SECONDS per target, the corpus kept
#                             under fuzz/corpus/ from run to run
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
# target:inputs for the fixed pass (the targets run at 8,000 to 60,000 inputs a second).
targets=(server_session:120000 reply_decoder:250000 pop3_client:250000 imap_client:200000
  dns_packet:40000 zone_file:120000 ldap_frame:250000)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for spec in "${targets[@]}"; do
  target=${spec%%:*}
  if [ $# -gt 0 ]; then
    args=(-- -max_total_time="$1")
  else
    # An empty corpus directory of its own: what earlier exploring kept would make the
    # pass differ from machine to machine.
    corpus=$(mktemp -d)
    args=("$corpus" -- -seed=1 -runs="${spec#*:}")
  fi
  if ! cargo fuzz run "$target" "${args[@]}" -rss_limit_mb=2048 >"$log" 2>&1; then
    # What failed and where, not only the last lines (a backtrace's end says nothing).
    echo "fuzz target $target failed:"
    grep -m 5 -A 12 -E "panicked at|ERROR: libFuzzer|^error" "$log" || tail -n 60 "$log"
    tail -n 25 "$log"
    exit 1
  fi
  echo "$target: $(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1)"
  [ $# -gt 0 ] || rm -rf "$corpus"
done
