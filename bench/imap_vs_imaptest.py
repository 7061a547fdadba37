#!/usr/bin/env python3
"""mailbench's IMAP client beside Dovecot's imaptest, against the same lab Dovecot with the
same users and messages (USERS users with PER_USER messages of SIZE_K KiB, CONNS clients, SECS
seconds each), in rounds that alternate which runs first:

  (a) pipelined reads: imaptest's default pipelining (up to 10 commands in flight) with `-
      fetch2=100,99` (LOGIN, SELECT, about 100 single-message FETCHes, LOGOUT) against
      `mailbench mailbox imap --pipeline 10 --mix fetch_part=1 --per-conn 100` (both ask
      each FETCH for UID and one section drawn from the same five: HEADER, RFC822.HEADER,
      the whole message, part 1, TEXT);
  (b) the same one command at a time: imaptest `no_pipelining` against `--pipeline 1`;
  (c) a read-write mix on both, pipelined: imaptest's default profile (FETCH, STORE,
      EXPUNGE, APPEND, COPY, ...) against mailbench's default (imaptest-like) mix, a new
      login every 6 commands as imaptest's passes through its states have.

Each part starts on a fresh lab store, warmed by an unmeasured read of every mailbox (the
floor client, a few seconds). (a) and (b) also run the floor client (`examples/imap_floor.rs`: the same sessions, responses only
scanned for their tags, nothing parsed, checked or timed) for as many commands as mailbench did:
its CPU per command is what the kernel and the runtime cost any client here, so "floor /
imaptest" is the lowest ratio a client can reach on this machine.

For each: commands per second (every command, LOGIN, SELECT and LOGOUT included), the
client's CPU microseconds per command, Dovecot's CPU per command (its process tree, exited
children included), and the state errors of both (mailbench's violations; imaptest's
`Error:` lines: neither may report any against a correct Dovecot). Ratios are mailbench's
over imaptest's.

imaptest is built from third_party/imaptest by scripts/build-imaptest.sh (run first, as
root, when target/peers/imaptest is missing); the floor and mailbench (unless --mb names
another build) by cargo, from this tree, before anything runs.

Usage: bench/imap_vs_imaptest.py [--users 100] [--per-user 30] [--size-k 10] [--conns 50]
       [--secs 20] [--rounds 3] [--parts abc] [--mb target/release/mailbench] [--out DIR]
Needs root and Dovecot (scripts/install-deps.sh). Loopback only; every run is bounded.
"""
import json, os, re, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import StoreLab, arg, emit, measure_client  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = arg("--mb", os.path.join(ROOT, "target", "release", "mailbench"))
IMAPTEST = os.path.join(ROOT, "target", "peers", "imaptest")
FLOOR = os.path.join(ROOT, "target", "release", "examples", "imap_floor")
BUILD = os.path.join(ROOT, "scripts", "build-imaptest.sh")

USERS, PER_USER, SIZE_K = arg("--users", 100), arg("--per-user", 30), arg("--size-k", 10)
CONNS, SECS, ROUNDS = arg("--conns", 50), arg("--secs", 20), arg("--rounds", 3)
PARTS, OUT = arg("--parts", "abc"), arg("--out", "")

# mailbench's IMAP steps that are commands (connect, banner and TLS are not).
COMMAND_STEPS = ["capability", "starttls", "login", "select", "close", "list", "status", "fetch", "fetch_body",
                 "fetch_part", "search", "store", "delete", "expunge", "copy", "create", "move", "append", "noop", "idle",
                 "logout"]

# Each part: (title, imaptest's arguments, mailbench's arguments, the floor's depth or None).
PARTS_SPEC = {
    "a": ("pipelined reads", ["-", "fetch2=100,99"],
          ["--pipeline", "10", "--mix", "fetch_part=1", "--per-conn", "100"], 10),
    "b": ("one at a time", ["-", "fetch2=100,99", "no_pipelining"],
          ["--pipeline", "1", "--mix", "fetch_part=1", "--per-conn", "100"], 1),
    # imaptest's default profile logs out at the end of every pass through its states
    # (about 9 commands with LOGIN, SELECT and LOGOUT): mailbench logs in as often. The
    # floor has no writing commands.
    "c": ("read-write mix, pipelined", ["copybox=INBOX"], ["--pipeline", "10", "--per-conn", "6"], None),
}
# The floor's sessions in (a) and (b): 100 fetches each, as mailbench's --per-conn.
FLOOR_PER_SESSION = 100
# The warm-up's fetches: a few seconds, every user's sessions several times over.
WARM_UP_FETCHES = 20000


def mailbench(lab, tmp, extra):
    j = os.path.join(tmp, "mb.json")
    cmd = [MB, "mailbox", "imap", "--target", f"127.0.0.1:{lab.port}", "--users-file", lab.users,
           "-z", f"{SECS}s", "-c", str(CONNS), "-q", "--json", j] + extra

    def parse(_out):
        r = json.load(open(j))
        commands = sum(r["latency"].get(s, {}).get("count", 0) for s in COMMAND_STEPS)
        return {"commands": commands, "errors": r["summary"]["violations"], "failed": r["summary"]["errors"]}

    return measure_client("mailbench", lab, cmd, parse)


def floor(lab, depth, commands):
    """The floor client for about `commands` commands (its fetches plus each session's LOGIN,
    SELECT and LOGOUT, as mailbench's count has them)."""
    fetches = max(FLOOR_PER_SESSION, commands * FLOOR_PER_SESSION // (FLOOR_PER_SESSION + 3))
    cmd = [FLOOR, f"127.0.0.1:{lab.port}", str(CONNS), str(fetches), str(FLOOR_PER_SESSION), lab.users,
           "fetch_part=1", str(depth)]

    def parse(out):
        done = int(out.stdout)
        sessions = -(-done // FLOOR_PER_SESSION)
        return {"commands": done + 3 * sessions, "errors": 0, "failed": 0}

    return measure_client("floor", lab, cmd, parse)


def warm_up(lab):
    """An unmeasured read of every user's mailbox before a part's first round: the first
    run on a fresh store may pay for Dovecot's cold indexes and page cache, and round 0 runs
    mailbench first (the floor needs its count), so such a penalty was always mailbench's
    (in two of three runs, part (b)'s round 0 cost it 7 to 10 % more CPU per command than
    its later rounds)."""
    floor(lab, 1, WARM_UP_FETCHES)


def imaptest(lab, tmp, extra):
    users = os.path.join(tmp, "users.imaptest")
    with open(lab.users) as src, open(users, "w") as dst:
        for line in src:
            if line.strip():
                dst.write(":".join(line.split(None, 1)).strip() + "\n")
    mbox = os.path.join(tmp, "append.mbox")
    if not os.path.exists(mbox):
        body = "x" * 76 + "\n"
        with open(mbox, "w") as f:
            for i in range(20):
                f.write(f"From imaptest@bench.test Thu Nov 26 00:00:00 2026\nFrom: imaptest@bench.test\n"
                        f"To: user@store.test\nSubject: imaptest append {i}\nMessage-ID: <{i}@imaptest.bench>\n\n"
                        + body * (SIZE_K * 1024 // 77) + "\n")
    cmd = [IMAPTEST, "user=unused", f"userfile={users}", "host=127.0.0.1", f"port={lab.port}", f"mbox={mbox}",
           f"clients={CONNS}", f"secs={SECS}", f"msgs={PER_USER}"] + extra

    def parse(out):
        text = out.stdout + out.stderr
        totals = text.rsplit("Totals:", 1)
        if len(totals) != 2:
            raise SystemExit(f"imaptest printed no totals:\n{text[-2000:]}")
        rows = [ln.split() for ln in totals[1].strip().splitlines()]
        counts = [int(x) for x in rows[-1] if x.isdigit()] if rows else []
        return {"commands": sum(counts), "errors": len(re.findall(r"^Error:", text, re.M)), "failed": 0}

    return measure_client("imaptest", lab, cmd, parse)


def table(part, title, rows):
    lines = [f"## ({part}) {title}", f"{'client':<10} {'commands/s':>11} {'cpu us/cmd':>11} {'Dovecot us/cmd':>15} "
             f"{'state errors':>13}"]
    med = {}
    for tool in ("mailbench", "imaptest", "floor"):
        mine = [r for r in rows if r["tool"] == tool]
        if not mine:
            continue
        med[tool] = m = {
            "rate": statistics.median(r["commands"] / r["wall_s"] for r in mine),
            "cpu": statistics.median(r["cpu_s"] / max(r["commands"], 1) * 1e6 for r in mine),
            "store": statistics.median(r["store_cpu_s"] / max(r["commands"], 1) * 1e6 for r in mine),
            "errors": sum(r["errors"] for r in mine),
        }
        # The floor checks nothing: it has no state errors to report.
        errors = "-" if tool == "floor" else m["errors"]
        lines.append(f"{tool:<10} {m['rate']:>11.1f} {m['cpu']:>11.2f} {m['store']:>15.2f} {errors:>13}")
    a, b = med["mailbench"], med["imaptest"]
    lines.append(f"mailbench / imaptest: rate {a['rate'] / b['rate']:.2f}x, client CPU per command "
                 f"{a['cpu'] / b['cpu']:.2f}x, Dovecot CPU per command {a['store'] / b['store']:.2f}x")
    if f := med.get("floor"):
        lines.append(f"floor / imaptest: client CPU per command {f['cpu'] / b['cpu']:.2f}x (the lowest any client "
                     f"reaches here); mailbench / floor: client CPU per command {a['cpu'] / f['cpu']:.2f}x")
    return lines


def main():
    # The floor, and mailbench unless another build is given, from this tree as it is (a
    # no-op when they are up to date): a stale binary would measure other code.
    targets = ["--example", "imap_floor"] + ([] if "--mb" in sys.argv else ["--bin", "mailbench"])
    subprocess.run(["cargo", "build", "--quiet", "--release"] + targets, cwd=ROOT, check=True)
    if not os.path.exists(MB):
        raise SystemExit(f"{MB} is missing: give --mb the path of a mailbench build")
    if not os.path.exists(IMAPTEST):
        subprocess.run([BUILD], check=True)
    report = [f"# IMAP, mailbench vs imaptest: {CONNS} clients, {SECS} s per run; {USERS} users x {PER_USER} "
              f"messages of {SIZE_K} KiB, lab Dovecot; {ROUNDS} round{'' if ROUNDS == 1 else 's'} alternating, medians", ""]
    raw = []
    with tempfile.TemporaryDirectory(prefix="mailbench-imaptest-") as tmp:
        for part in PARTS:
            title, theirs, ours, depth = PARTS_SPEC[part]
            rows = []
            # A fresh store per part: the read-write mix changes the mailboxes.
            with StoreLab(MB, tmp, "IMAP", USERS, PER_USER, SIZE_K) as lab:
                warm_up(lab)
                for r in range(ROUNDS):
                    order = [lambda: mailbench(lab, tmp, ours), lambda: imaptest(lab, tmp, theirs)]
                    if depth:
                        # As many commands as mailbench's latest run (round 0 runs it first).
                        ours_last = lambda: [x for x in rows if x["tool"] == "mailbench"][-1]["commands"]
                        order.append(lambda: floor(lab, depth, ours_last()))
                    for run in order[1:] + order[:1] if r % 2 else order:
                        row = run()
                        row.update(part=part, round=r)
                        rows.append(row)
            raw += rows
            report += table(part, title, rows) + [""]
    emit("\n".join(report), OUT, "imap_vs_imaptest.txt")
    if OUT:
        json.dump(raw, open(os.path.join(OUT, "imap_vs_imaptest.json"), "w"), indent=1)
    if any(r["errors"] or r["failed"] for r in raw):
        raise SystemExit("state errors or failed commands: see the table")


if __name__ == "__main__":
    main()
