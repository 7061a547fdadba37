#!/usr/bin/env python3
"""IMAP clients side by side against the same lab Dovecot (imaptest's set-up: 100 users with
30 messages each, 50 clients), doing the same sessions: LOGIN, SELECT INBOX, then commands
drawn from a read-only mix on message numbers up to EXISTS, a new login every PER_SESSION
commands. Prints each client's commands per second, its CPU microseconds per command,
Dovecot's own CPU per command (its process tree, exited children included), and the ratios
of mailbench to the floor.

Clients: `mailbench mailbox imap` (one thread, with its state checks on every response, as
users run it), and the floor (`examples/imap_floor.rs`: the same sessions on the same
runtime with pre-encoded commands and responses only scanned for their tag: what the kernel
and the runtime cost). A last row runs mailbench with its default (imaptest-like,
state-changing) mix at the same concurrency, for the rate and CPU per command of that mix.

Last, IDLE_SESSIONS sessions log in, SELECT and wait in IDLE at the same time, against a
Dovecot set up to hold them (a few imap processes with many clients each): mailbench's
peak RSS for them (target: 10,000 under 200 MB).

imaptest itself runs beside mailbench (and beside this floor) in bench/imap_vs_imaptest.py.

Usage: bench/imap_vs_floor.py [--users 100] [--per-user 30] [--size-k 10] [--commands 20000]
       [--conns 50] [--per-session 50] [--rounds 3] [--mix MIX] [--idle-sessions 10000]
       [--idle-secs 20] [--pipeline 1] [--out DIR]
--pipeline N: commands in flight per session, for both (mailbench --pipeline N, the floor's
DEPTH), so the ratio compares the same depth.
Rounds alternate the clients' order. Needs root and Dovecot (scripts/install-deps.sh).
Loopback only; every run is bounded.
"""
import json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import StoreLab, arg, measure_client, scratch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
FLOOR = os.path.join(ROOT, "target", "release", "examples", "imap_floor")

USERS, PER_USER, SIZE_K = arg("--users", 100), arg("--per-user", 30), arg("--size-k", 10)
COMMANDS, CONNS, PER_SESSION = arg("--commands", 20000), arg("--conns", 50), arg("--per-session", 50)
ROUNDS, OUT, DEPTH = arg("--rounds", 3), arg("--out", ""), arg("--pipeline", 1)
IDLE_SESSIONS, IDLE_SECS = arg("--idle-sessions", 10000), arg("--idle-secs", 20)
# Dovecot serving thousands of IDLE sessions: imap and imap-login processes that each hold
# many clients (one process per session would be 10,000 processes), with room for them.
IDLE_DOVECONF = ["service/imap/client_limit=1000", "service/imap/service_count=0", "service/imap/vsz_limit=4G",
                 "service/imap-login/service_count=0", "service/imap-login/client_limit=20000",
                 "service/imap-login/process_min_avail=2", "service/imap-login/vsz_limit=2G"]
MIX = arg("--mix", "fetch=30,fetch_body=30,search=10,status=10,list=5,noop=10,select=5")


def Lab(tmp, per_user=None, doveconf=()):
    return StoreLab(MB, tmp, "IMAP", USERS, PER_USER if per_user is None else per_user, SIZE_K, doveconf)


def measure(tool, lab, cmd, parse):
    """A client's run; `parse` gives (commands, more fields) from its output."""
    def fields(out):
        commands, extra = parse(out)
        return {"commands": commands, **extra}
    return measure_client(tool, lab, cmd, fields)


def mailbench(lab, tmp, mix, tool="mailbench"):
    j = os.path.join(tmp, "mb.json")
    cmd = [MB, "mailbox", "imap", "--target", f"127.0.0.1:{lab.port}", "--users-file", lab.users,
           "-n", str(COMMANDS), "-c", str(CONNS), "--per-conn", str(PER_SESSION), "-q", "--json", j, "--pipeline", str(DEPTH)]
    if mix:
        cmd += ["--mix", mix]

    def parse(_out):
        s = json.load(open(j))["summary"]
        if s["errors"] or s["refused"] or s["violations"]:
            raise SystemExit(f"{tool}: errors, refusals or state violations: {s}")
        return s["completed"], {"active_s": s["active_s"], "violations": s["violations"]}

    return measure(tool, lab, cmd, parse)


def floor(lab):
    cmd = [FLOOR, f"127.0.0.1:{lab.port}", str(CONNS), str(COMMANDS), str(PER_SESSION), lab.users, MIX, str(DEPTH)]
    return measure("floor", lab, cmd, lambda out: (int(out.stdout), {}))


def idle_part(tmp):
    """IDLE_SESSIONS sessions at once, each logged in, SELECTed and in IDLE for IDLE_SECS:
    mailbench's peak RSS (from its own results) while they all wait."""
    j = os.path.join(tmp, "idle.json")
    with Lab(tmp, per_user=2, doveconf=IDLE_DOVECONF) as lab:
        cmd = [MB, "mailbox", "imap", "--target", f"127.0.0.1:{lab.port}", "--users-file", lab.users,
               "-n", str(IDLE_SESSIONS), "-c", str(IDLE_SESSIONS), "--mix", "idle=1", "--idle-for",
               f"{IDLE_SECS}s", "-q", "--json", j]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    r = json.load(open(j))
    s, rss = r["summary"], r["self"]["peak_rss_kib"] / 1024
    if out.returncode != 0 or s["completed"] != IDLE_SESSIONS:
        return [f"# IDLE: {s['completed']} of {IDLE_SESSIONS} sessions completed (exit {out.returncode}); "
                f"errors {s['errors']}: not a valid memory figure"]
    return [f"# IDLE: {IDLE_SESSIONS} sessions in IDLE at once for {IDLE_SECS} s each (every one logged in and "
            f"SELECTed), all completed: mailbench peak RSS {rss:.1f} MiB "
            f"({rss * 1024 / IDLE_SESSIONS:.1f} KiB per session); target under 200 MB"]


def table(rows):
    lines = [f"{'client':<22} {'commands/s':>11} {'cpu us/cmd':>11} {'Dovecot cpu us/cmd':>19}"]
    med = {}
    for tool in ("mailbench", "floor", "mailbench default mix"):
        mine = [r for r in rows if r["tool"] == tool]
        if not mine:
            continue
        med[tool] = m = {
            "rate": statistics.median(r["commands"] / r["wall_s"] for r in mine),
            "cpu": statistics.median(r["cpu_s"] / r["commands"] * 1e6 for r in mine),
            "store": statistics.median(r["store_cpu_s"] / r["commands"] * 1e6 for r in mine),
        }
        lines.append(f"{tool:<22} {m['rate']:>11.1f} {m['cpu']:>11.2f} {m['store']:>19.2f}")
    lines.append("")
    a, b = med.get("mailbench"), med.get("floor")
    if a and b:
        lines.append(f"mailbench vs floor: rate {a['rate'] / b['rate']:.2f}x, client CPU per command "
                     f"{a['cpu'] / b['cpu']:.2f}x, Dovecot CPU per command {a['store'] / b['store']:.2f}x")
        mine = [r for r in rows if r["tool"] == "mailbench"]
        theirs = [r for r in rows if r["tool"] == "floor"]
        paired = [(m["commands"] / m["wall_s"]) / (t["commands"] / t["wall_s"]) for m, t in zip(mine, theirs)]
        cpu = [(m["cpu_s"] / m["commands"]) / (t["cpu_s"] / t["commands"]) for m, t in zip(mine, theirs)]
        lines.append(f"  per round: rate {', '.join(f'{x:.2f}x' for x in paired)}; "
                     f"client CPU {', '.join(f'{x:.2f}x' for x in cpu)}")
    d = med.get("mailbench default mix")
    if d:
        lines.append(f"mailbench, default mix: {d['rate']:.0f} commands/s at {d['cpu']:.1f} us of its CPU per "
                     f"command (imaptest's default profile beside it: bench/imap_vs_imaptest.py, part c)")
    return lines


def main():
    if not (os.path.exists(MB) and os.path.exists(FLOOR)):
        raise SystemExit("build first: cargo build --release --bins --examples")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mailbench-imapbench-") as tmp:
        with Lab(tmp) as lab:
            for r in range(ROUNDS):
                order = [lambda: mailbench(lab, tmp, MIX), lambda: floor(lab)]
                for f in order[::-1] if r % 2 else order:
                    row = f()
                    if row["commands"] != COMMANDS:
                        raise SystemExit(f"{row['tool']} completed {row['commands']} of {COMMANDS}: {row}")
                    rows.append(row)
        # A fresh store: the default mix appends, copies and expunges.
        with Lab(tmp) as lab:
            for _ in range(ROUNDS):
                rows.append(mailbench(lab, tmp, None, "mailbench default mix"))
    title = (f"# IMAP: {COMMANDS} commands over {CONNS} connections, {PER_SESSION} per login; {USERS} users x "
             f"{PER_USER} messages of {SIZE_K} KiB, lab Dovecot (maildir, tmpfs); mix {MIX}; {DEPTH} in flight per "
             f"session; {ROUNDS} rounds, "
             f"medians")
    idle = idle_part(scratch("mailbench-imapidle-")) if IDLE_SESSIONS else []
    text = "\n".join([title, ""] + table(rows) + [""] + idle)
    print(text)
    if OUT:
        open(os.path.join(OUT, "imap_vs_floor.txt"), "w").write(text + "\n")
        json.dump(rows, open(os.path.join(OUT, "imap_vs_floor.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
