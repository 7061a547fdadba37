#!/usr/bin/env bash
# The test command: installs the real peers the tests use, then runs formatting, lints,
# docs, a bounded fuzzing pass over the wire parsers, and every test (unit, then
# integration against real servers: smtp-sink, swaks, smtp-source, Postfix, Dovecot, and
# report pages in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
# A run on a machine with little disk failed half way with "No space left on device":
# say what there is at the start, so that such a failure is read at once.
echo "test.sh: $(df -h --output=avail . | tail -n 1 | tr -d ' ') free on the disk of $(pwd)"
# A build from a fresh clone gains nothing from incremental compilation, whose caches
# took half of the test build's 2 GB.
export CARGO_INCREMENTAL=0
./scripts/install-deps.sh --for-tests
# Every crate of the workspace (wire, results, engine, the command line).
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items --quiet
./scripts/fuzz.sh
# The fuzz targets' sanitizer builds are not needed again in this run: their disk goes to
# the test build.
rm -rf fuzz/target
# Every crate's unit tests and the integration tests in one build: they compile side by
# side on the two cores instead of one after the other.
cargo test --workspace --no-run --lib --test it --quiet
cargo test --workspace --lib
# One integration test at a time: many of them assert timings (a known delay, late starts,
# a capacity search) and run real servers that take both cores; beside another test on a
# 2-core machine they measure the neighbour, not themselves.
cargo test --test it -- --test-threads=1
