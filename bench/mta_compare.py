#!/usr/bin/env python3
"""The five lab MTAs (Postfix, Exim, OpenSMTPD, Sendmail, qmail) under the same load on
this machine, with the queue on tmpfs and on disk: `mailbench relay --lab
postfix,exim,opensmtpd,sendmail,qmail` in rotating rounds, each placement's table and
results file kept; then, for every MTA but qmail, the classic method beside mailbench in
the same run (bench/relay_vs_classic.py: smtp-source → MTA → smtp-sink, the queue polled
until empty; it starts the MTA with `mailbench lab MTA`, which has no qmail yet).

Usage: bench/mta_compare.py [-n 2000] [--size-k 25] [--sessions 64] [--rounds 8]
       [--classic-n 1000] [--classic-rounds 2] [--out DIR]
The response timeout is 10 s for every MTA: OpenSMTPD's compiled-in listen backlog of 5
leaves some of 64 simultaneous connections waiting for a banner that never comes (the
kernel's SYN cookies complete connections the server never sees), and the default 60 s
would stretch every OpenSMTPD round by a minute. The classic comparison runs OpenSMTPD at
5 sessions for the same reason (smtp-source has no timeout and would hang). Needs root,
Postfix and scripts/install-mtas.sh (which builds qmail). Loopback only; every run is
bounded in count and time.
"""
import os, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
MTAS = ["postfix", "exim", "opensmtpd", "sendmail", "qmail"]
# The MTAs `mailbench lab` starts, which the classic method needs.
CLASSIC_MTAS = [m for m in MTAS if m != "qmail"]

N, SIZE_K, SESSIONS, ROUNDS = arg("-n", 2000), arg("--size-k", 25), arg("--sessions", 64), arg("--rounds", 8)
CLASSIC_N, CLASSIC_ROUNDS = arg("--classic-n", 1000), arg("--classic-rounds", 2)
OUT = arg("--out", "")


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    out = OUT or os.path.join("/tmp", f"mailbench-mtas-{int(time.time())}")
    os.makedirs(out, exist_ok=True)
    texts = []
    for queue in ["tmpfs", "disk"]:
        json_path = os.path.join(out, f"mtas-{queue}.json")
        t0 = time.monotonic()
        r = subprocess.run([MB, "relay", "--lab", ",".join(MTAS), "--queue", queue, "-n", str(N),
                            "-c", str(SESSIONS), "--size", f"{SIZE_K}k", "--rounds", str(ROUNDS),
                            "--timeout", "10s", "-q", "--json", json_path],
                           capture_output=True, text=True, timeout=7200)
        took = time.monotonic() - t0
        head = (f"== {N} x {SIZE_K} KiB over {SESSIONS} sessions, queue on {queue}, {ROUNDS} rounds "
                f"rotating {', '.join(MTAS)} ({took:.0f} s); baseline postfix")
        text = head + "\n" + r.stdout + (f"\nexit {r.returncode}: {r.stderr[-2000:]}" if r.returncode else "")
        print(text, flush=True)
        texts.append(text)
    for mta in CLASSIC_MTAS:
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
