#!/usr/bin/env bash
# Unpacks the lab's other MTAs — Exim, OpenSMTPD, Sendmail — from Debian 12's packages
# into /opt/mailbench/mtas/<mta> (or $MAILBENCH_MTAS/<mta>), beside the system's own MTA,
# and builds qmail (notqmail, which Debian does not package) from third_party/notqmail.
#
# Debian lets one package at a time provide the system MTA (`mail-transport-agent`), so
# they cannot all be installed with apt-get install. Instead: `apt-get download` fetches
# each MTA's packages, `dpkg -x` unpacks them (no maintainer scripts run: nothing is
# configured, started or registered), the libraries they link are installed as the
# ordinary packages they are, and the users each MTA switches to are created. The labs
# run the binaries from the unpacked tree with their own configuration; the system's own
# MTA, /etc and its services are left as they are.
#
# Idempotent: an MTA whose tree carries the stamp of the same package versions (qmail: of
# the same archive) is skipped. Needs root.
set -euo pipefail

root="${MAILBENCH_MTAS:-/opt/mailbench/mtas}"
declare -A packages=(
  [exim]="exim4-daemon-light exim4-base exim4-config"
  [opensmtpd]="opensmtpd"
  [sendmail]="sendmail-bin sendmail-base sendmail-cf"
)
# What the unpacked trees need besides their libraries: sendmail.cf is built with m4.
tools=(m4)
# qmail's SMTP service runs under tcpserver; it is built with a C compiler and make.
tools+=(ucspi-tcp gcc make)

if [ "$(id -u)" != 0 ]; then
  echo "install-mtas: needs root to unpack into $root and create the MTAs' users (try: sudo $0)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

# The candidate version of each package, as apt would fetch it now.
versions() {
  local out=""
  for p in "$@"; do
    out+="$p=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}') "
  done
  echo "$out"
}

if ! apt-cache policy exim4-daemon-light | grep -q 'Candidate: [0-9]'; then
  apt-get update -qq
fi

# The users they switch to, as their packages' maintainer scripts would make them.
user() {
  getent group "$1" >/dev/null || groupadd --system "$1"
  getent passwd "$1" >/dev/null ||
    useradd --system --gid "$1" --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$1"
}
user Debian-exim
user opensmtpd
user opensmtpq

libs=()
for mta in exim opensmtpd sendmail; do
  want="$(versions ${packages[$mta]})"
  stamp="$root/$mta/.mailbench-packages"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    continue
  fi
  echo "install-mtas: unpacking $mta (${packages[$mta]}) into $root/$mta" >&2
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"
  # apt-get download writes as the _apt user where it can; a directory it may write to.
  (cd "$tmp" && apt-get download -qq ${packages[$mta]} 2>/dev/null)
  rm -rf "$root/$mta.new"
  mkdir -p "$root/$mta.new"
  for deb in "$tmp"/*.deb; do
    dpkg -x "$deb" "$root/$mta.new"
    # Their libraries (and only those: the rest are MTA plumbing the lab does not run).
    for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'); do
      case "$dep" in lib*) libs+=("$dep") ;; esac
    done
  done
  rm -rf "$tmp" "$root/$mta"
  mv "$root/$mta.new" "$root/$mta"
  # What the maintainer scripts would set with dpkg-statoverride: smtpctl talks to the
  # daemon only when it runs setgid opensmtpq (the lab uses it to retry the queue).
  if [ "$mta" = opensmtpd ]; then
    chgrp opensmtpq "$root/$mta/usr/sbin/smtpctl"
    chmod 2555 "$root/$mta/usr/sbin/smtpctl"
  fi
  echo "$want" > "$root/$mta/.mailbench-packages"
done

missing=()
for p in "${libs[@]}" "${tools[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-mtas: installing what the MTAs link or use: ${missing[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi


# qmail: built from the vendored notqmail with its home compiled in as /var/qmail (the lab
# binds its own directory there, in its namespace) and installed under $root/qmail.
here="$(cd "$(dirname "$0")/.." && pwd)"
archive="$here/third_party/notqmail/notqmail-1.09.tar.gz"
(cd "$here/third_party/notqmail" && sha256sum --quiet -c SHA256SUMS) || {
  echo "install-mtas: $archive does not match third_party/notqmail/SHA256SUMS" >&2
  exit 1
}
# Its users and groups, as its INSTALL.ids.md makes them (homes as it gives them; no
# login shell).
qmail_user() {
  getent passwd "$1" >/dev/null ||
    useradd --system --gid "$2" --no-create-home --home-dir "$3" \
      --shell /usr/sbin/nologin "$1"
}
getent group nofiles >/dev/null || groupadd --system nofiles
getent group qmail >/dev/null || groupadd --system qmail
qmail_user alias nofiles /var/qmail/alias
for u in qmaild qmaill qmailp; do qmail_user "$u" nofiles /var/qmail; done
for u in qmailq qmailr qmails; do qmail_user "$u" qmail /var/qmail; done
want="$(sha256sum "$archive" | cut -d' ' -f1)"
stamp="$root/qmail/.mailbench-archive"
if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-mtas: building qmail (notqmail 1.09) into $root/qmail" >&2
  tmp="$(mktemp -d)"
  tar xzf "$archive" -C "$tmp"
  (
    cd "$tmp/notqmail-1.09"
    echo /var/qmail > conf-qmail
    # (its old-style C warns a lot; the log is shown only when the build fails)
    make it man instpackage instchown >build.log 2>&1 || {
      tail -20 build.log >&2
      exit 1
    }
    rm -rf "$root/qmail.new"
    mkdir -p "$root/qmail.new"
    DESTDIR="$root/qmail.new" ./instpackage
    DESTDIR="$root/qmail.new" ./instchown
    chmod 755 "$root/qmail.new/var"
  )
  rm -rf "$tmp" "$root/qmail"
  mv "$root/qmail.new" "$root/qmail"
  echo "$want" > "$stamp"
fi
# The mount point of its compiled-in home (empty: each lab instance binds its own there).
mkdir -p /var/qmail
