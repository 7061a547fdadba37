#!/usr/bin/env python3
"""POP3 clients side by side against the same lab Dovecot, doing the same sessions: log in
as a user, STAT (or LIST), RETR messages, maybe DELE them, QUIT. Prints each client's rate,
its CPU seconds per 1,000 sessions or messages, Dovecot's own CPU for the same work (its
process tree, exited children included, taken the same way for every client), and the
ratios to mailbench; counts are checked against what was filled.

Clients: `mailbench mailbox pop3` (one thread, C connections); the floor
(`examples/pop3_floor.rs`: the same sessions on the same runtime with precomputed commands
and responses only counted: what the kernel and the runtime cost); a Python poplib client with
C worker processes (the usual hand-written load script); rabid (Debian `postal`, C
processes), which runs until killed and prints only per-minute lines, so it is time-boxed
and its work counted from its debug logs.

- read: a filled lab read over and over, nothing deleted (rabid `-d 100:0`); S sessions,
  each downloading its user's whole mailbox. rabid stops after its first RETR whenever it
  is told to delete less than everything (checked with 2 to 10 messages per mailbox, 2 and
  25 KiB): the row says so.
- drain: rabid's default job, every mailbox downloaded and emptied; a fresh lab per client
  and round; the rate is messages per second until the last mailbox is empty. rabid is
  stopped once its debug logs show every message retrieved.

Usage: bench/pop3_vs_peers.py [--users 100] [--per-user 10] [--size-k 25] [--sessions 2000]
       [--conns 16] [--rounds 3] [--rabid-secs 20] [--out DIR]
Rounds alternate the clients' order. Needs root and Dovecot (scripts/install-deps.sh).
Loopback only; every run is bounded.
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import StoreLab, arg, cpu_children, measure_client, tree_cpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
RABID = shutil.which("rabid") or "/usr/sbin/rabid"
FLOOR = os.path.join(ROOT, "target", "release", "examples", "pop3_floor")


USERS, PER_USER, SIZE_K = arg("--users", 100), arg("--per-user", 10), arg("--size-k", 25)
SESSIONS, CONNS, ROUNDS = arg("--sessions", 2000), arg("--conns", 16), arg("--rounds", 3)
RABID_SECS, OUT = arg("--rabid-secs", 20), arg("--out", "")

POPLIB_CLIENT = r"""
import poplib, sys
from multiprocessing import Pool
host, port, users_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sessions, conns, delete = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "delete"
users = [l.split() for l in open(users_file) if l.strip()]

def session(n):
    user, password = users[n % len(users)]
    c = poplib.POP3(host, port)
    c.user(user)
    c.pass_(password)
    count = c.stat()[0]
    for i in range(1, count + 1):
        c.retr(i)
        if delete:
            c.dele(i)
    c.quit()
    return count

if __name__ == "__main__":
    with Pool(conns) as pool:
        print(sum(pool.map(session, range(sessions), chunksize=4)))
"""


def measure(tool, lab, cmd, parse):
    """A client's run; `parse` gives (sessions, retrieved) from its output."""
    return measure_client(tool, lab, cmd, lambda out: dict(zip(("sessions", "retrieved"), parse(out))))


def Lab(tmp):
    return StoreLab(MB, tmp, "POP3", USERS, PER_USER, SIZE_K)


def mailbench(lab, tmp, sessions, delete):
    j = os.path.join(tmp, "mb.json")
    cmd = [MB, "mailbox", "pop3", "--target", f"127.0.0.1:{lab.port}", "--users-file", lab.users,
           "-n", str(sessions), "-c", str(CONNS), "-q", "--json", j, "--delete", "100" if delete else "0"]

    def parse(_out):
        s = json.load(open(j))["summary"]
        return s["completed"], s["retrieved"]

    return measure("mailbench", lab, cmd, parse)


def poplib(lab, sessions, delete):
    cmd = [sys.executable, "-c", POPLIB_CLIENT, "127.0.0.1", str(lab.port), lab.users, str(sessions),
           str(CONNS), "delete" if delete else "keep"]
    return measure("python poplib", lab, cmd, lambda out: (sessions, int(out.stdout)))


def floor(lab, sessions):
    cmd = [FLOOR, f"127.0.0.1:{lab.port}", str(CONNS), str(sessions), lab.users]
    return measure("floor", lab, cmd, lambda out: (sessions, int(out.stdout)))


def rabid_counts(tmp):
    """Sessions ("quit" lines) and downloads ("retr") in rabid's debug logs."""
    quits = retrs = 0
    for n in os.listdir(tmp):
        if n.startswith("rabid.debug"):
            for line in open(os.path.join(tmp, n), errors="replace"):
                word = line.strip().lower()
                quits += word == "quit"
                retrs += word.startswith("retr ")
    return quits, retrs


def rabid(lab, tmp, delete, until_retrieved=None):
    """rabid until `until_retrieved` messages are in its logs, or RABID_SECS."""
    for n in os.listdir(tmp):
        if n.startswith("rabid.debug"):
            os.remove(os.path.join(tmp, n))
    before_c, before_s = cpu_children(), tree_cpu(lab.master)
    t0 = time.time()
    cmd = [RABID, "-p", str(CONNS), "-z", os.path.join(tmp, "rabid.debug")]
    if not delete:
        cmd += ["-d", "100:0"]
    p = subprocess.Popen(cmd + [f"[127.0.0.1]{lab.port}", lab.users],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while time.time() - t0 < RABID_SECS and p.poll() is None:
        time.sleep(0.05)
        if until_retrieved and rabid_counts(tmp)[1] >= until_retrieved:
            break
    wall = time.time() - t0
    p.kill()
    p.wait()
    cpu, store = cpu_children() - before_c, tree_cpu(lab.master) - before_s
    quits, retrs = rabid_counts(tmp)
    return {"tool": "rabid", "sessions": quits, "retrieved": retrs, "wall_s": wall, "cpu_s": cpu,
            "store_cpu_s": store}


def table(title, rows, unit, per):
    """Medians per tool: rate of `unit`, CPU per 1,000 of `per`; ratios to mailbench."""
    lines = [title, "", f"{'client':<16} {unit + '/s':>13} {'cpu s/1k ' + per:>18} {'Dovecot cpu s/1k':>17}"]
    med = {}
    for tool in ("mailbench", "floor", "python poplib", "rabid"):
        mine = [r for r in rows if r["tool"] == tool and r.get(per, 0) > 0]
        if not mine:
            continue
        med[tool] = {
            "rate": statistics.median(r[unit] / r["wall_s"] for r in mine),
            "cpu": statistics.median(r["cpu_s"] / r[per] * 1000 for r in mine),
            "store": statistics.median(r["store_cpu_s"] / r[per] * 1000 for r in mine),
        }
        m = med[tool]
        lines.append(f"{tool:<16} {m['rate']:>13.1f} {m['cpu']:>18.3f} {m['store']:>17.3f}")
    lines.append("")
    a = med.get("mailbench")
    mine = [r for r in rows if r["tool"] == "mailbench" and r.get(per, 0) > 0]
    for tool, b in med.items():
        if a and tool != "mailbench":
            lines.append(f"mailbench vs {tool}: rate {a['rate'] / b['rate']:.2f}x, client CPU "
                         f"{a['cpu'] / b['cpu']:.2f}x, Dovecot CPU {a['store'] / b['store']:.2f}x")
            # The store sets the rate and drifts over a run: compare within each round too.
            theirs = [r for r in rows if r["tool"] == tool and r.get(per, 0) > 0]
            paired = [(m[unit] / m["wall_s"]) / (t[unit] / t["wall_s"]) for m, t in zip(mine, theirs)]
            if len(paired) > 1:
                lines.append(f"  rate per round: {', '.join(f'{x:.2f}x' for x in paired)}; "
                             f"median {statistics.median(paired):.2f}x")
    return lines


def check(row, want):
    if row["retrieved"] != want:
        raise SystemExit(f"{row['tool']} retrieved {row['retrieved']} messages, not {want}: {row}")


def read_part(tmp):
    rows, note = [], ""
    with Lab(tmp) as lab:
        for r in range(ROUNDS):
            order = [lambda: mailbench(lab, tmp, SESSIONS, False), lambda: floor(lab, SESSIONS),
                     lambda: poplib(lab, SESSIONS, False)]
            for f in order[::-1] if r % 2 else order:
                row = f()
                check(row, SESSIONS * PER_USER)
                rows.append(row)
        if os.path.exists(RABID):
            probe = rabid(lab, tmp, False)
            rows.append(probe)
            if probe["sessions"] == 0:
                note = (f"rabid -d 100:0: no session completed in {RABID_SECS} s; {probe['retrieved']} RETRs "
                        f"sent, then it waited ({probe['cpu_s']:.2f} s CPU): a hang, left out")
    title = (f"# read: {SESSIONS} sessions, each reading its whole mailbox ({PER_USER} messages of {SIZE_K} KiB), "
             f"nothing deleted; {USERS} users, {CONNS} connections, lab Dovecot (maildir, tmpfs); "
             f"{ROUNDS} rounds, medians")
    lines = table(title, [r for r in rows if r["tool"] != "rabid" or r["sessions"] > 0], "sessions", "sessions")
    return lines + ([note] if note else []), rows


def drain_part(tmp):
    rows, total = [], USERS * PER_USER
    for r in range(ROUNDS):
        clients = [lambda lab: mailbench(lab, tmp, USERS, True), lambda lab: poplib(lab, USERS, True)]
        if os.path.exists(RABID):
            clients.append(lambda lab: rabid(lab, tmp, True, total))
        for f in clients[::-1] if r % 2 else clients:
            with Lab(tmp) as lab:
                row = f(lab)
            check(row, total)
            rows.append(row)
    title = (f"# drain: every mailbox downloaded and emptied ({USERS} users x {PER_USER} messages of {SIZE_K} KiB), "
             f"a fresh lab per client and round; {CONNS} connections; {ROUNDS} rounds, medians")
    return table(title, rows, "retrieved", "retrieved"), rows


def main():
    if not (os.path.exists(MB) and os.path.exists(FLOOR)):
        raise SystemExit("build first: cargo build --release --bins --examples")
    with tempfile.TemporaryDirectory(prefix="mailbench-pop3bench-") as tmp:
        read_lines, read_rows = read_part(tmp)
        drain_lines, drain_rows = drain_part(tmp)
    text = "\n".join(read_lines + [""] + drain_lines).rstrip()
    print(text)
    if OUT:
        open(os.path.join(OUT, "pop3_vs_peers.txt"), "w").write(text + "\n")
        json.dump({"read": read_rows, "drain": drain_rows}, open(os.path.join(OUT, "pop3_vs_peers.json"), "w"),
                  indent=1)


if __name__ == "__main__":
    main()
