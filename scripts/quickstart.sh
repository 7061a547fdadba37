#!/usr/bin/env bash
# The main job, from a fresh clone (as root): install Postfix if missing, build, and run
# the classic relay benchmark on a disposable Postfix — 10,000 messages of 25 KiB over 64
# sessions, queue on tmpfs, relayed to mailbench's embedded sink — then print the summary
# and where the results file is (./results/). Extra arguments go to `mailbench relay`.
# Only what this run needs is installed first (Postfix); every other lab's packages come
# when a command needs them: a lab whose server is missing names the script that
# installs it (scripts/install-deps.sh, install-mtas.sh, install-cyrus.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --postfix
echo "quickstart: building mailbench (about 4 minutes the first time on 2 cores)" >&2
cargo build --release --quiet
mkdir -p results
out="results/relay-$(date +%Y%m%d-%H%M%S).json"
exec "${CARGO_TARGET_DIR:-target}/release/mailbench" relay --lab postfix --json "$out" "$@"
