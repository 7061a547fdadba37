#!/usr/bin/env bash
# The test command: installs the real peers the tests use, then runs formatting, lints and
# every test (unit and integration against real servers).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --quiet
cargo test --all-targets
