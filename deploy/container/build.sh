#!/usr/bin/env bash
# Builds the mailbench image (the repository's Dockerfile) with podman on a Debian 12
# machine that cannot reach Docker Hub: the two base images the Dockerfile names are made
# here instead, then the Dockerfile is built for real with its bases pointed at them.
#   localhost/debian:bookworm-slim     debootstrap --variant=minbase bookworm -> podman import
#   localhost/rust:1.95-slim-bookworm  that base + gcc/libc6-dev from Debian's mirror + this
#                                      machine's Rust 1.95 toolchain (rustc, cargo, std) copied in
#   localhost/mailbench:latest         the Dockerfile (cargo fetches crates from crates.io)
# Each image is made once and reused; delete it (podman rmi) to remake it.
# Needs root, podman, debootstrap, runc (apt-get install -y podman debootstrap runc), Debian's mirror
# and crates.io. Environment: MIRROR (default http://deb.debian.org/debian), RUST_TOOLCHAIN
# (default: `rustup toolchain list`'s 1.95.0 directory), TAG (default localhost/mailbench:latest).
# Usage: deploy/container/build.sh
set -euo pipefail

die() {
  echo "build.sh: $*" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}
tag=${TAG:-localhost/mailbench:latest}
base=localhost/debian:bookworm-slim
rust=localhost/rust:1.95-slim-bookworm
work=${WORK:-/var/tmp/mailbench-image}

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and rootful podman need it)"
for tool in podman debootstrap timeout; do
  command -v "$tool" >/dev/null || die "$tool is missing: apt-get install -y podman debootstrap"
done
mkdir -p "$work"

# What podman needs to start a container here. Its defaults raise RLIMIT_NOFILE and
# RLIMIT_NPROC above what a process without CAP_SYS_RESOURCE may set (crun: "setrlimit
# `RLIMIT_NOFILE`: Operation not permitted"), so give the host's own limits; crun refuses a
# hybrid cgroup layout ("cgroups in hybrid mode not supported"), where runc works.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
nproc=$(cat /proc/sys/kernel/pid_max)
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
runtime=()

# 1. The runtime base: a minimal Debian 12 from the package mirror, imported as an image.
if ! podman image exists "$base"; then
  echo "== $base: debootstrap bookworm from $mirror"
  rm -rf "$work/rootfs"
  timeout 30m debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" \
    >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed or took over 30 minutes: see $work/debootstrap.log"
  echo "deb $mirror bookworm main" >"$work/rootfs/etc/apt/sources.list"
  rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/archives/"*.deb
  tar --numeric-owner -C "$work/rootfs" -c . |
    podman import --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      - "$base" >/dev/null || die "podman import of $work/rootfs failed"
  rm -rf "$work/rootfs"
fi

# Which OCI runtime starts a container here: crun (podman's default) unless it cannot.
probe=$(timeout 2m podman run --rm "${limits[@]}" "$base" true 2>&1) || {
  command -v runc >/dev/null ||
    die "podman cannot start a container with crun ($probe); apt-get install -y runc and rerun"
  probe=$(timeout 2m podman --runtime runc run --rm "${limits[@]}" "$base" true 2>&1) ||
    die "podman cannot start a container with crun nor runc: $probe"
  runtime=(--runtime runc)
  echo "== crun cannot start containers here, runc can: using runc"
}

# 2. The build base: the toolchain the project pins, as the official rust image lays it out.
if ! podman image exists "$rust"; then
  tc=${RUST_TOOLCHAIN:-${RUSTUP_HOME:-$HOME/.rustup}/toolchains/1.95.0-x86_64-unknown-linux-gnu}
  [ -x "$tc/bin/rustc" ] && [ -x "$tc/bin/cargo" ] ||
    die "no Rust 1.95 toolchain at $tc: rustup toolchain install 1.95.0, or set RUST_TOOLCHAIN"
  "$tc/bin/rustc" --version | grep -q '^rustc 1\.95\.' ||
    die "$tc/bin/rustc is $("$tc/bin/rustc" --version), not 1.95"
  echo "== $rust: $base + gcc + $tc"
  ctx="$work/rust-context"
  rm -rf "$ctx"
  mkdir -p "$ctx/rust"
  # bin and lib are the compiler, cargo and the standard library; share is docs and man pages.
  cp -aL "$tc/bin" "$tc/lib" "$ctx/rust/"
  # The certificate authorities this host adds to Debian's (a TLS-inspecting proxy's, say):
  # without them cargo cannot reach crates.io from the build where the host can. Only the
  # build base trusts them; the mailbench image does not.
  mkdir -p "$ctx/local-ca"
  cp /usr/local/share/ca-certificates/*.crt "$ctx/local-ca/" 2>/dev/null || true
  cat >"$ctx/Containerfile" <<CF
FROM $base
RUN apt-get update \\
 && apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
COPY local-ca /usr/local/share/ca-certificates/
RUN update-ca-certificates
COPY rust /usr/local/rust
ENV CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN rustc --version && cargo --version
CF
  timeout 30m podman build "${runtime[@]}" "${limits[@]}" --network host -t "$rust" "$ctx" >"$work/rust-image.log" 2>&1 ||
    die "building $rust failed or took over 30 minutes: see $work/rust-image.log"
  rm -rf "$ctx"
fi

# 3. The repository's Dockerfile, for real, on those bases.
echo "== $tag: the Dockerfile (a release build: minutes on two cores)"
start=$(date +%s)
timeout 60m podman build "${runtime[@]}" "${limits[@]}" --network host \
  --build-arg BUILD_IMAGE="$rust" --build-arg RUNTIME_IMAGE="$base" \
  --build-arg MAILBENCH_COMMIT="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null)" \
  -t "$tag" -f "$repo/Dockerfile" "$repo" >"$work/mailbench-image.log" 2>&1 ||
  die "building $tag failed or took over 60 minutes: see $work/mailbench-image.log"
echo "built $tag in $(($(date +%s) - start)) s"
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^($base|$rust|$tag) " || true
podman "${runtime[@]}" run --rm "${limits[@]}" "$tag" --version
