#!/usr/bin/env bash
# Installs what mailbench's tests and benchmarks need, from Debian packages, without
# prompts. Idempotent: does nothing when everything is present. Never configures or starts
# the system's own Postfix or Dovecot (the labs run private instances). With no option:
# every lab's packages (Postfix, Dovecot, OpenDKIM, slapd, Cyrus unpacked); --postfix only
# Postfix, all `relay --lab postfix` needs (the quickstart's first run); --for-tests adds
# what only the tests use; --mtas (and --for-tests) the other lab MTAs (install-mtas.sh).
set -euo pipefail

need=()
command -v smtp-sink >/dev/null 2>&1 || [ -x /usr/sbin/smtp-sink ] || need+=(postfix)
if [ "${1:-}" = "--postfix" ]; then
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "install-deps: need root to install postfix (try: sudo $0 --postfix)" >&2
      exit 1
    fi
    echo "install-deps: installing postfix (the other labs' packages: scripts/install-deps.sh, when a command asks for them)" >&2
    # Leave /etc/postfix/main.cf absent and the system instance stopped (see LAB-NOTES).
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postfix >/dev/null
  fi
  exit 0
fi
[ -x /usr/sbin/postal ] || need+=(postal)
command -v swaks >/dev/null 2>&1 || need+=(swaks)
# swaks's TLS (--tls) needs Net::SSLeay, only a recommendation of the swaks package.
perl -MNet::SSLeay -e1 >/dev/null 2>&1 || need+=(libnet-ssleay-perl)
# The Dovecot lab (mailbox workloads): IMAP, POP3 and LMTP servers. The package's own
# service is left as Debian leaves it; the lab runs private instances (see LAB-NOTES).
for part in imap pop3 lmtp; do
  [ -x /usr/lib/dovecot/$part ] || need+=(dovecot-${part}d)
done
# OpenDKIM signs for a lab MTA (--mta-dkim-key); like Postfix's, its own service is left
# alone: the lab runs a private instance.
[ -x /usr/sbin/opendkim ] || need+=(opendkim)
# `relay --mta-lookup ldap`: a private slapd holds the recipients and the lab Postfix
# looks them up through its ldap: table (postfix-ldap). The package's own slapd is
# stopped and disabled below: the lab runs a private instance.
[ -x /usr/sbin/slapd ] || need+=(slapd)
[ -e /usr/lib/postfix/postfix-ldap.so ] || need+=(postfix-ldap)
# daemontools' multilog: the qmail lab's log as qmail sites run it (--mta-logging
# multilog), with the other lab MTAs. Only the program: Debian's daemontools starts nothing.
case "${1:-}" in
  --for-tests | --mtas) command -v multilog >/dev/null 2>&1 || need+=(daemontools) ;;
esac
# What only the tests use (the quickstart needs none of it): a headless browser for the
# report pages, the Prometheus client's parser for /metrics, tmux for the live view, dig.
if [ "${1:-}" = "--for-tests" ]; then
  command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
  /usr/bin/python3 -c 'import prometheus_client' >/dev/null 2>&1 || need+=(python3-prometheus-client)
  command -v tmux >/dev/null 2>&1 || need+=(tmux)
  # dkimpy (with PyNaCl for Ed25519): a DKIM verifier no one here wrote, for what the
  # lab's OpenDKIM signs.
  /usr/bin/python3 -c 'import dkim, nacl' >/dev/null 2>&1 || need+=(python3-dkim python3-nacl)
  # BIND's dig: a DNS client no one here wrote, for the test DNS server.
  command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
  # OpenLDAP's client tools, to look into the lab's directory by hand when a test fails.
  command -v ldapsearch >/dev/null 2>&1 || need+=(ldap-utils)
  # NSD's libraries: its package is only unpacked (below), so apt does not pull them in.
  for lib in libevent-2.1-7 libfstrm0 libprotobuf-c1 libssl3 libsystemd0; do
    dpkg -s "$lib" >/dev/null 2>&1 || need+=("$lib")
  done
  # promtool checks /metrics in the Prometheus text format; the package's server is not used.
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  # A private one-node Slurm for the scale-out test (tests/it/slurm.rs starts its own
  # munged, slurmctld and slurmd; the packages' services are left stopped).
  for pkg in munge slurmctld slurmd slurm-client; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  # The installed man pages and completions read back by man, bash, fish and zsh.
  command -v man >/dev/null 2>&1 || need+=(man-db)
  command -v zsh >/dev/null 2>&1 || need+=(zsh)
  command -v fish >/dev/null 2>&1 || need+=(fish)
fi
# openssl makes a stranger's CA for the TLS-failure test and DKIM keys; python3 reads mbox and DSNs.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: need root to install ${need[*]} (try: sudo $0)" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}" >&2
  # Leave /etc/postfix/main.cf absent and the system instance stopped (see LAB-NOTES).
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The prometheus package starts its server where systemd runs; only promtool is wanted.
  if [[ " ${need[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  # Likewise munge and Slurm's daemons: the Slurm test runs private ones.
  for svc in munge slurmctld slurmd; do
    if [[ " ${need[*]} " == *" $svc "* ]] && command -v systemctl >/dev/null 2>&1; then
      systemctl disable --now "$svc" >/dev/null 2>&1 || true
    fi
  done
  # The same for slapd: only the program is wanted, never the system's directory.
  if [[ " ${need[*]} " == *" slapd "* ]]; then
    if command -v systemctl >/dev/null 2>&1; then
      systemctl disable --now slapd >/dev/null 2>&1 || true
    fi
    service slapd stop >/dev/null 2>&1 || true
    update-rc.d slapd disable >/dev/null 2>&1 || true
  fi
fi
# NSD, the reference of the differential DNS test (tests/it/dns_nsd.rs): Debian's package
# unpacked into target/peers/nsd, as bench/dns_vs_nsd.py does, never installed (its
# postinst would add a user and start a system service).
if [ "${1:-}" = "--for-tests" ]; then
  peers="$(cd "$(dirname "$0")/.." && pwd)/target/peers"
  if [ ! -x "$peers/nsd/usr/sbin/nsd" ]; then
    mkdir -p "$peers"
    (cd "$peers" && { apt-get download -q nsd >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get download -q nsd >/dev/null; }; } && dpkg -x nsd_*.deb nsd)
  fi
fi
# The Kubernetes schemas for checking deploy/kubernetes offline (tests only), from PyPI
# into the python3 the tests run.
if [ "${1:-}" = "--for-tests" ] && ! python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check kubernetes-validate==1.37.0
fi
# The Cyrus lab store (`--lab cyrus`), unpacked beside Dovecot: installed with apt-get,
# cyrus-imapd would remove dovecot-imapd and dovecot-pop3d (both provide imap-server).
if [ "$(id -u)" = 0 ]; then
  "$(dirname "$0")/install-cyrus.sh"
fi
# The other lab MTAs (Exim, OpenSMTPD, Sendmail), unpacked beside Postfix: for the tests,
# or when asked (--mtas) for `relay --lab postfix,exim,opensmtpd,sendmail`.
case "${1:-}" in
  --for-tests | --mtas) "$(dirname "$0")/install-mtas.sh" ;;
esac
# LazyFS, the power cut of the durability tests, built from third_party/lazyfs (tests only).
if [ "${1:-}" = "--for-tests" ]; then "$(dirname "$0")/install-lazyfs.sh"; fi
