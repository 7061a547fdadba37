#!/usr/bin/env bash
# Builds LazyFS (third_party/lazyfs), the FUSE file system that loses every write not
# fsynced when told to — the power cut of mailbench's durability tests — into
# /opt/mailbench/lazyfs (or $MAILBENCH_LAZYFS): bin/lazyfs, and lib/libpcache.so.0 which
# the binary finds through its rpath.
#
# Offline: the only network use is apt-get for Debian's packages (FUSE 3, CMake, g++,
# spdlog, toml11). LazyFS's own CMake fetches toml11 v3.7.1 and spdlog v1.10.0 from GitHub
# at configure time; Debian 12 packages exactly those versions, and
# third_party/lazyfs/offline-build.patch makes the build use them instead.
# third_party/lazyfs/statfs.patch passes statfs through to the root: LazyFS a47a5ba has
# none, so FUSE reports 0 blocks free and Postfix on it answers MAIL 452.
#
# Idempotent: a build from the same archive and patches (their sha256s in the stamp) is
# kept. Ends by mounting a LazyFS for real and cutting its power once (a file fsynced
# keeps its bytes, one not fsynced loses them): when FUSE cannot mount here it says so
# and exits 1 — the durability tests cannot run on such a machine, and nothing is skipped.
# --check runs only that check. Needs root.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/third_party/lazyfs"
archive="$src/lazyfs-a47a5ba.tar.gz"
patches=("$src/offline-build.patch" "$src/statfs.patch")
prefix="${MAILBENCH_LAZYFS:-/opt/mailbench/lazyfs}"
stamp="$prefix/.mailbench-build"

if [ "$(id -u)" != 0 ]; then
  echo "install-lazyfs: needs root to install packages and build into $prefix (try: sudo $0)" >&2
  exit 1
fi

# Mounts a LazyFS over a temporary directory, writes one file with fsync and one without,
# cuts the power (lazyfs::clear-cache, its completion read from the second FIFO) and
# checks that only the fsynced file kept its bytes. Every wait has a deadline; the mount
# and the process are gone afterwards whatever happened.
check_mount() {
  local t mnt root cfg pid ok=0 why=""
  if [ ! -c /dev/fuse ]; then
    echo "install-lazyfs: FUSE cannot mount here: /dev/fuse is missing (modprobe fuse, or give the container --device /dev/fuse --cap-add SYS_ADMIN); the durability tests need it" >&2
    return 1
  fi
  t="$(mktemp -d /tmp/mailbench-lazyfs-check.XXXXXX)"
  mnt="$t/mnt"
  root="$t/root"
  cfg="$t/lazyfs.toml"
  mkdir -p "$mnt" "$root"
  cat >"$cfg" <<EOF
[faults]
fifo_path="$t/faults.fifo"
fifo_path_completed="$t/done.fifo"
[cache]
apply_eviction=false
[cache.simple]
custom_size="64mb"
blocks_per_page=1
[filesystem]
log_all_operations=false
logfile="$t/lazyfs.log"
EOF
  # In a group of its own, so that its abort on unmount (see third_party/lazyfs/README.md)
  # lands in its log, not on the terminal.
  {
    "$prefix/bin/lazyfs" "$mnt" --config-path "$cfg" -o allow_other -o modules=subdir \
      -o "subdir=$root" -f
  } >"$t/stdout.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    if grep -q " $mnt fuse" /proc/self/mounts && [ -p "$t/faults.fifo" ]; then
      ok=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$ok" = 1 ]; then
    ok=0
    if timeout 10 python3 - "$mnt" <<'EOF'
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "synced"), "wb") as f:
    f.write(b"hello, synced")
    f.flush()
    os.fsync(f.fileno())
with open(os.path.join(d, "unsynced"), "wb") as f:
    f.write(b"hello, lost")
EOF
    then
      # The completion FIFO must have a reader before the command is written.
      timeout 10 head -n 1 "$t/done.fifo" >"$t/done.txt" &
      local reader=$!
      if timeout 10 sh -c "echo lazyfs::clear-cache > '$t/faults.fifo'" &&
        wait "$reader" && grep -q "finished::clear-cache" "$t/done.txt"; then
        local a b
        a="$(stat -c %s "$root/synced" 2>/dev/null || echo missing)"
        b="$(stat -c %s "$root/unsynced" 2>/dev/null || echo missing)"
        if [ "$a" = 13 ] && [ "$b" = 0 ]; then
          ok=1
        else
          why="after the power cut the fsynced file has $a bytes (want 13) and the other $b (want 0)"
        fi
      else
        why="LazyFS did not finish lazyfs::clear-cache within 10 s"
      fi
    else
      why="writing through the mount failed or took over 10 s"
    fi
  else
    why="lazyfs did not mount (waited up to 10 s): $(tail -3 "$t/stdout.log" | tr '\n' ' ')"
  fi
  fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  pkill -9 -P "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$t"
  if [ "$ok" != 1 ]; then
    echo "install-lazyfs: FUSE cannot run LazyFS here: $why; the durability tests need it" >&2
    return 1
  fi
  echo "install-lazyfs: LazyFS mounts here and loses what was not fsynced (checked)" >&2
}

if [ "${1:-}" = "--check" ]; then
  check_mount
  exit
fi

(cd "$src" && sha256sum --quiet -c SHA256SUMS) || {
  echo "install-lazyfs: $archive does not match third_party/lazyfs/SHA256SUMS" >&2
  exit 1
}
want="$(sha256sum "$archive" "${patches[@]}" | cut -d' ' -f1 | tr '\n' ' ')"
if [ -x "$prefix/bin/lazyfs" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  check_mount
  exit
fi

deps=(libfuse3-dev fuse3 cmake g++ make libspdlog-dev libtoml11-dev)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-lazyfs: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The package lists are refreshed only when they do not know a package yet.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  }
fi

echo "install-lazyfs: building LazyFS (a47a5ba) into $prefix" >&2
started=$SECONDS
build="$(mktemp -d /tmp/mailbench-lazyfs-build.XXXXXX)"
trap 'rm -rf "$build"' EXIT
tar -xzf "$archive" -C "$build" --strip-components=1
(
  cd "$build"
  for p in "${patches[@]}"; do
    patch -s -p1 <"$p"
  done
  jobs="${CARGO_BUILD_JOBS:-2}"
  # (its C++ warns a lot; the log is shown only when the build fails)
  {
    cmake -S libs/libpcache -B libs/libpcache/build -DCMAKE_BUILD_TYPE=Release &&
      make -C libs/libpcache/build -j"$jobs" &&
      cmake -S lazyfs -B lazyfs/build -DCMAKE_BUILD_TYPE=Release -DLAZYFS_BUILD_TESTS=OFF \
        "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath,$prefix/lib" &&
      make -C lazyfs/build -j"$jobs"
  } >build.log 2>&1 || {
    tail -30 build.log >&2
    echo "install-lazyfs: the build failed (above: the end of its log)" >&2
    exit 1
  }
  rm -rf "$prefix.new"
  mkdir -p "$prefix.new/bin" "$prefix.new/lib"
  install -m 755 lazyfs/build/lazyfs "$prefix.new/bin/lazyfs"
  cp -a libs/libpcache/build/libpcache.so* "$prefix.new/lib/"
  cp LICENSE "$prefix.new/LICENSE"
)
rm -rf "$prefix"
mv "$prefix.new" "$prefix"
echo "$want" >"$stamp"
echo "install-lazyfs: built $prefix/bin/lazyfs in $((SECONDS - started)) s" >&2
check_mount
