#!/usr/bin/env bash
# Builds imaptest, the IMAP peer of bench/imap_vs_imaptest.py, from the vendored source
# (third_party/imaptest) against Debian 12's Dovecot 2.3.19 into target/peers/imaptest.
#
# Debian does not package imaptest; it links Dovecot's libraries, so it is built against
# dovecot-dev. Only dovecot-dev and the autotools are installed (apt-get --no-remove: this
# never removes a package, so the lab's Dovecot stays as it is). Idempotent: a binary
# built from an archive with the same sha256 is kept. The archive's sha256 is checked
# before anything is unpacked.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/third_party/imaptest"
archive="$src/imaptest-924f619.tar.gz"
out="$here/target/peers"
bin="$out/imaptest"
stamp="$out/imaptest.sha256"

(cd "$src" && sha256sum --quiet -c SHA256SUMS) || {
  echo "build-imaptest: $archive does not match third_party/imaptest/SHA256SUMS" >&2
  exit 1
}
want="$(cut -d' ' -f1 "$src/SHA256SUMS")"
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "build-imaptest: $bin is up to date"
  exit 0
fi

deps=(dovecot-dev autoconf automake libtool pkg-config build-essential)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "build-imaptest: needs ${missing[*]} installed (as root: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-remove --no-install-recommends "${missing[@]}"
fi

build="$out/imaptest-build"
rm -rf "$build"
mkdir -p "$build"
tar -xzf "$archive" -C "$build" --strip-components=1
cd "$build"
# Dovecot 2.3.19's imap_parser_create takes a fourth argument (its parameters); imaptest
# 924f619 was written against the three-argument form.
sed -i "s/imap_parser_create(\(.*\), (size_t)-1)/imap_parser_create(\1, (size_t)-1, NULL)/" src/*.c
echo "1.0-924f619" > version
./autogen.sh >/dev/null
./configure -q --with-dovecot=/usr/lib/dovecot LDFLAGS=-Wl,-rpath,/usr/lib/dovecot >/dev/null
make -s -j"${CARGO_BUILD_JOBS:-2}" >/dev/null
install -m 755 src/imaptest "$bin"
echo "$want" > "$stamp"
cd "$out"
rm -rf "$build"
echo "build-imaptest: built $bin"
