#!/usr/bin/env bash
# Runs each fuzz target for a bounded time (default 30 s each). cargo-fuzz needs nightly
# compiler flags; RUSTC_BOOTSTRAP=1 lets the stable 1.95 toolchain (the only one here)
# accept them. Crashes are kept under fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
for target in server_session reply_decoder pop3_client imap_client dns_packet zone_file ldap_frame; do
  cargo fuzz run "$target" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -n 3
done
