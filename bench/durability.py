#!/usr/bin/env python3
"""Does each lab MTA keep the mail it accepted? Every lab MTA under each fault (issue 42),
in rounds, in one run: `mailbench relay --lab MTA --fault KIND@N` sends N messages at 100/s
while the sink takes 60/s (so the queue holds mail when the fault fires), then the MTA is
crashed (SIGKILL of every process), its power cut (the queue on LazyFS, unsynced writes
dropped) or its disk filled (the queue on a small ext4 held full for a second), restarted
on the same queue and drained. Each cell is the median of the rounds and their range:
accepted, lost (accepted and never delivered), damaged (arrived cut or altered), duplicated,
the 4xx refused while the disk was full, files LazyFS listed unsynced at the cut, and the
time from the restart to the last delivery. A configuration documented as unsafe runs
beside the defaults (`--variant`). A fault a lab does not take yet is shown as such: its
one-line refusal is mailbench's own.

The lab stores run after the MTAs (`--stores`): `mailbench mailbox populate --lab STORE`
fills 4 mailboxes with 50 messages each over LMTP and is crashed or has its power cut
(the mail on LazyFS) after the 200th accepted (the power cut thus with no delivery in
flight: a cut mid-fill can leave a lock Dovecot waits 2 minutes on), with
`mail_fsync=never` beside the defaults; the crash hits IMAP APPENDs after 100. Every
mailbox is read back over IMAP after the restart: accepted, lost, duplicated, unreadable,
unsynced files at the cut, and the time the read-back took.

Usage: bench/durability.py [--rounds 3] [-n 300] [--at 100]
       [--mtas postfix,exim,opensmtpd,sendmail,qmail] [--faults crash,power-loss,disk-full]
       [--variant sendmail:SuperSafe=False] [--no-variant] [--stores dovecot]
       [--bin PATH] [--out DIR]      (--mtas none or --stores none: leave them out)
Needs root, FUSE (LazyFS: scripts/install-deps.sh builds it), Postfix and
scripts/install-mtas.sh. Loopback only; every run is bounded in count and time (a
drain of 60 s at most). With --out DIR each run's results file and the MTA's log
(FILE.maillog.0) are kept in DIR/runs beside the table, to check a cell against them.
"""
import json, os, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, flag, scratch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MTAS = [m for m in arg("--mtas", "postfix,exim,opensmtpd,sendmail,qmail").split(",")
        if m not in ("", "none")]
STORES = [m for m in arg("--stores", "dovecot").split(",") if m not in ("", "none")]
FAULTS = arg("--faults", "crash,power-loss,disk-full").split(",")
ROUNDS, N, AT = arg("--rounds", 3), arg("-n", 300), arg("--at", 100)
VARIANT = None if flag("--no-variant") or not MTAS else arg("--variant", "sendmail:SuperSafe=False")
MB = arg("--bin", "") or os.path.join(ROOT, "target", "release", "mailbench")
OUT = arg("--out", "")
# The figures of a cell, as the relay summary spells them, and their column heads.
FIGURES = [("accepted", "accepted"), ("lost", "lost"), ("damaged", "damaged"),
           ("fault_duplicated_messages", "dup"), ("fault_refused_4xx", "4xx"),
           ("fault_unsynced_files", "unsynced"), ("restart_last_delivery_s", "drain s")]


def one(mta, conf, fault, work):
    """One faulted run: the relay summary, or the line mailbench refused it with."""
    name = f"{mta}-{conf.replace('=', '-')}" if conf else mta
    json_path = os.path.join(work, f"{name}-{fault}-{time.monotonic_ns()}.json")
    cmd = [MB, "relay", "--lab", mta, "-n", str(N), "-c", "4", "--size", "1k",
           "--rate", "100/s", "--sink-rule", "data_end:pace=60/s",
           "--fault", f"{fault}@{AT}", "--drain-timeout", "60s", "-q", "--json", json_path]
    if fault == "disk-full":
        cmd += ["--fault-hold", "1s", "--queue-fs-size", "64M"]
    if conf:
        cmd += ["--mta-conf", conf]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode == 1 or not os.path.exists(json_path):
        lines = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()
        return None, lines[-1]
    return json.load(open(json_path))["summary"], None


# A store's figures (`extra.fault` of `mailbox populate --fault`) and their heads.
STORE_FIGURES = [("accepted", "accepted"), ("lost", "lost"), ("duplicated", "dup"),
                 ("unreadable", "unreadable"), ("unsynced_files", "unsynced"),
                 ("look_s", "look s")]
# (label, --store-conf, fault, --via, at): the store runs.
STORE_RUNS = [("defaults", None, "crash", "imap", 100),
              ("defaults", None, "power-loss", "lmtp", 200),
              ("mail_fsync=never", "mail_fsync=never", "power-loss", "lmtp", 200)]


def one_store(store, conf, fault, via, at, work):
    """One faulted fill of a lab store: its `extra.fault`, or the line mailbench refused
    it with."""
    json_path = os.path.join(work, f"{store}-{fault}-{via}-{time.monotonic_ns()}.json")
    cmd = [MB, "mailbox", "populate", "--lab", store, "--users", "4", "--per-user", "50",
           "--fill-size", "2k", "--via", via, "--fault", f"{fault}@{at}", "-q",
           "--json", json_path]
    if conf:
        cmd += ["--store-conf", conf]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode == 1 or not os.path.exists(json_path):
        lines = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()
        return None, lines[-1]
    return json.load(open(json_path))["extra"].get("fault", {}), None


def cell(values):
    """Median and range of a figure over the rounds ('-' where the runs have none)."""
    v = [x for x in values if isinstance(x, (int, float))]
    if not v:
        return "-"
    med = statistics.median(v)
    fmt = (lambda x: f"{x:.1f}") if any(isinstance(x, float) for x in v) else (lambda x: f"{x:g}")
    return fmt(med) if min(v) == max(v) else f"{fmt(med)} ({fmt(min(v))}-{fmt(max(v))})"


def main():
    if not os.path.exists(MB) or not flag("--bin"):
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "mailbench"],
                       cwd=ROOT, check=True)
    # Each run's results and the MTA's log, kept with the table when it is kept, so that
    # every cell can be checked against the server's own log.
    work = os.path.join(OUT, "runs") if OUT else scratch("mb-durability-")
    os.makedirs(work, exist_ok=True)
    setups = [(m, None) for m in MTAS]
    if VARIANT:
        mta, conf = VARIANT.split(":", 1)
        setups.append((mta, conf))
    runs = {}
    refused = {}
    t0 = time.monotonic()
    # Rounds rotate through the cells, so that a slow minute of the machine falls on all.
    for _ in range(ROUNDS):
        for mta, conf in setups:
            for fault in FAULTS:
                key = (mta, conf, fault)
                if key in refused:
                    continue
                summary, why = one(mta, conf, fault, work)
                if why:
                    refused[key] = why
                else:
                    runs.setdefault(key, []).append(summary)
    store_runs, store_refused = {}, {}
    for _ in range(ROUNDS):
        for store in STORES:
            for label, conf, fault, via, at in STORE_RUNS:
                key = (store, label, fault, via)
                if key in store_refused:
                    continue
                got, why = one_store(store, conf, fault, via, at, work)
                if why:
                    store_refused[key] = why
                else:
                    store_runs.setdefault(key, []).append(got)
    head = f"{'mta':<28}{'fault':<12}" + "".join(f"{h:>16}" for _, h in FIGURES)
    lines = [f"# durability: {N} messages at 100/s, the fault after {AT} accepted, "
             f"{ROUNDS} rounds (median (min-max)); {time.monotonic() - t0:.0f} s"]
    lines += [head] if setups else []
    for mta, conf in setups:
        for fault in FAULTS:
            key = (mta, conf, fault)
            name = mta + (f" {conf}" if conf else "")
            if key in refused:
                lines.append(f"{name:<28}{fault:<12}  not taken: {refused[key]}")
                continue
            got = runs.get(key, [])
            lines.append(f"{name:<28}{fault:<12}"
                         + "".join(f"{cell([s.get(k) for s in got]):>16}" for k, _ in FIGURES))
    if STORES:
        lines += ["", f"# stores: 4 users x 50 messages of 2 KiB, {ROUNDS} rounds "
                  "(median (min-max)); crash after 100 accepted APPENDs, power cut after "
                  "all 200 accepted over LMTP",
                  f"{'store':<28}{'fault':<18}"
                  + "".join(f"{h:>16}" for _, h in STORE_FIGURES)]
        for store in STORES:
            for label, _, fault, via, _ in STORE_RUNS:
                key = (store, label, fault, via)
                name = f"{store} {label}"
                if key in store_refused:
                    lines.append(f"{name:<28}{fault + ' ' + via:<18}  not taken: "
                                 f"{store_refused[key]}")
                    continue
                got = store_runs.get(key, [])
                lines.append(f"{name:<28}{fault + ' ' + via:<18}"
                             + "".join(f"{cell([g.get(k) for g in got]):>16}"
                                       for k, _ in STORE_FIGURES))
    text = "\n".join(lines)
    print(text)
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "durability.txt"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
