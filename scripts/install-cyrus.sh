#!/usr/bin/env bash
# Unpacks the Cyrus lab store (`--lab cyrus`) from Debian 12's packages into
# /opt/mailbench/stores/cyrus (or $MAILBENCH_STORES/cyrus), beside the system's Dovecot.
#
# Debian lets one package at a time provide an IMAP server (`imap-server`): installing
# cyrus-imapd with apt-get removes dovecot-imapd and dovecot-pop3d. So, as install-mtas.sh
# does for the other MTAs: `apt-get download` fetches Cyrus's packages, `dpkg -x` unpacks
# them (no maintainer scripts run: nothing is configured, started or registered), the
# libraries they link are installed as the ordinary packages they are, and the user Cyrus
# switches to is created. The lab runs the binaries from the unpacked tree with its own
# configuration; the system's Dovecot, /etc and its services are left as they are.
#
# Idempotent: a tree that carries the stamp of the same package versions is kept. Needs
# root.
set -euo pipefail

root="${MAILBENCH_STORES:-/opt/mailbench/stores}/cyrus"
packages="cyrus-common cyrus-imapd cyrus-pop3d"
# saslpasswd2 writes the lab's users (no IMAP server among its dependencies).
tools=(sasl2-bin)

if [ "$(id -u)" != 0 ]; then
  echo "install-cyrus: needs root to unpack into $root and create the cyrus user (try: sudo $0)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy cyrus-imapd | grep -q 'Candidate: [0-9]'; then
  apt-get update -qq
fi

# The user Cyrus switches to (compiled in), in group mail, as cyrus-common would make it.
getent passwd cyrus >/dev/null ||
  useradd --system --gid mail --no-create-home --home-dir /var/lib/cyrus \
    --shell /usr/sbin/nologin cyrus

want=""
for p in $packages; do
  want+="$p=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}') "
done
libs=()
if [ ! -f "$root/.mailbench-packages" ] || [ "$(cat "$root/.mailbench-packages")" != "$want" ]; then
  echo "install-cyrus: unpacking $packages into $root" >&2
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"
  # apt-get download writes as the _apt user where it can; a directory it may write to.
  (cd "$tmp" && apt-get download -qq $packages 2>/dev/null)
  rm -rf "$root.new"
  mkdir -p "$root.new"
  for deb in "$tmp"/*.deb; do
    dpkg -x "$deb" "$root.new"
    # Their libraries (and only those: the rest is plumbing the lab does not run).
    for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'); do
      case "$dep" in lib*) libs+=("$dep") ;; esac
    done
  done
  rm -rf "$tmp" "$root"
  mv "$root.new" "$root"
  echo "$want" > "$root/.mailbench-packages"
fi
missing=()
for p in "${libs[@]}" "${tools[@]}" libsasl2-modules-db; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-cyrus: installing what Cyrus links or uses: ${missing[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
