#!/usr/bin/env python3
"""The five lab MTAs (Postfix, Exim, OpenSMTPD, Sendmail, qmail) under the same load on
this machine, with the queue on tmpfs and on disk: `mailbench relay --lab
postfix,exim,opensmtpd,sendmail,qmail --trace-io` in rotating rounds, each placement's
table and results file kept, and a short table per placement of what each MTA asked of
the kernel per delivered message (fsyncs, files created, renamed, unlinked: seed 004's
explanation, one queue file for Postfix against several for qmail) with the most
messages each of its queues held at an interval's end; then the classic method beside
mailbench in the same run (bench/relay_vs_classic.py: smtp-source → MTA → smtp-sink, the
queue polled until empty; it starts the MTA with `mailbench lab MTA`; not qmail yet:
relay_vs_classic.py does not know its log and queue).

Usage: bench/mta_compare.py [-n 2000] [--size-k 25] [--sessions 64] [--rounds 8]
       [--classic-n 1000] [--classic-rounds 2] [--mtas postfix,qmail] [--no-classic]
       [--no-trace-io] [--interval 1s] [--bin PATH] [--out DIR]
--trace-io (on unless --no-trace-io) costs the MTAs part of their rate (19-31 % measured
for Postfix): the rates of a traced table compare with traced rates only. --bin runs an
already built mailbench instead of building target/release.
The response timeout is 10 s for every MTA: OpenSMTPD's compiled-in listen backlog of 5
leaves some of 64 simultaneous connections waiting for a banner that never comes (the
kernel's SYN cookies complete connections the server never sees), and the default 60 s
would stretch every OpenSMTPD round by a minute. The classic comparison runs OpenSMTPD at
5 sessions for the same reason (smtp-source has no timeout and would hang). Needs root,
Postfix and scripts/install-mtas.sh (which builds qmail). Loopback only; every run is
bounded in count and time.
"""
import json, os, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, flag  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MTAS = arg("--mtas", "postfix,exim,opensmtpd,sendmail,qmail").split(",")
MB = arg("--bin", "")

N, SIZE_K, SESSIONS, ROUNDS = arg("-n", 2000), arg("--size-k", 25), arg("--sessions", 64), arg("--rounds", 8)
CLASSIC_N, CLASSIC_ROUNDS = arg("--classic-n", 1000), arg("--classic-rounds", 2)
INTERVAL = arg("--interval", "1s")
OUT = arg("--out", "")
# The per-message figures, as the relay summary spells them, and their column heads.
IO = [("fsyncs_per_msg", "fsyncs"), ("files_created_per_msg", "created"),
      ("renames_per_msg", "renamed"), ("unlinks_per_msg", "unlinked")]


def io_table(json_path):
    """Each MTA's per-message I/O (its median round's) and each queue's most messages at an
    interval's end, from the comparison's results file."""
    try:
        doc = json.load(open(json_path))
    except (OSError, ValueError) as e:
        return f"(no results file: {e})"
    rows = [f"{'mta':<10}" + "".join(f"{h:>10}" for _, h in IO) + "  queues (most at an interval's end)"]
    for side in doc.get("extra", {}).get("sides", []):
        s = side["results"]["summary"]
        cells = "".join(f"{s[k]:>10.2f}" if isinstance(s.get(k), (int, float)) else f"{'-':>10}" for k, _ in IO)
        queues = "  ".join(f"{q['queue']} {q['messages']}" for q in s.get("max_queue_states") or [])
        rows.append(f"{side['label']:<10}{cells}  {queues or '-'}")
    return "\n".join(rows)


def main():
    mb = MB
    if not mb:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
        mb = os.path.join(ROOT, "target", "release", "mailbench")
    out = OUT or os.path.join("/tmp", f"mailbench-mtas-{int(time.time())}")
    os.makedirs(out, exist_ok=True)
    texts = []
    trace = [] if flag("--no-trace-io") else ["--trace-io"]
    for queue in ["tmpfs", "disk"]:
        json_path = os.path.join(out, f"mtas-{queue}.json")
        t0 = time.monotonic()
        r = subprocess.run([mb, "relay", "--lab", ",".join(MTAS), "--queue", queue, "-n", str(N),
                            "-c", str(SESSIONS), "--size", f"{SIZE_K}k", "--rounds", str(ROUNDS),
                            "--interval", INTERVAL, "--timeout", "10s", "-q", "--json", json_path] + trace,
                           capture_output=True, text=True, timeout=7200)
        took = time.monotonic() - t0
        head = (f"== {N} x {SIZE_K} KiB over {SESSIONS} sessions, queue on {queue}, {ROUNDS} rounds "
                f"rotating {', '.join(MTAS)} ({took:.0f} s){' traced' if trace else ''}; baseline {MTAS[0]}")
        text = head + "\n" + r.stdout + (f"\nexit {r.returncode}: {r.stderr[-2000:]}" if r.returncode else "")
        if trace:
            text += f"\n-- per delivered message, queue on {queue} (median round)\n" + io_table(json_path) + "\n"
        print(text, flush=True)
        texts.append(text)
    # relay_vs_classic.py has no qmail yet (its queue poll and log lines are per MTA).
    for mta in [] if flag("--no-classic") else [m for m in MTAS if m != "qmail"]:
        sessions = "5" if mta == "opensmtpd" else str(SESSIONS)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "relay_vs_classic.py"), "--mta", mta,
                            "-n", str(CLASSIC_N), "--size-k", str(SIZE_K), "--sessions", sessions,
                            "--rounds", str(CLASSIC_ROUNDS)],
                           capture_output=True, text=True, timeout=3600)
        text = f"== classic method beside mailbench: {mta}, {sessions} sessions\n" + r.stdout + \
            (f"\nexit {r.returncode}: {r.stderr[-2000:]}" if r.returncode else "")
        print(text, flush=True)
        texts.append(text)
    open(os.path.join(out, "mta-compare.txt"), "w").write("\n\n".join(texts) + "\n")


if __name__ == "__main__":
    main()
