#!/usr/bin/env python3
"""Does the sink's memory stay flat however long it runs? (issue 25 item 14: it grew ~40
bytes a traced message, ~14 GB for an hour at 100,000 msg/s.)

`mailbench send` into `mailbench sink` on loopback (release build, small messages, one
run of --messages traced messages over a few connections). The sink's /metrics (its own
`--prometheus`) says how many messages it has received; its resident memory (VmRSS from
/proc) is read at every million. Prints the table and RSS at the end against RSS at the
first million; target: within 10 % (exit 1 if not). Then the sink's own accounting of the
run: every sequence number seen once, none missing, no duplicates.

With --share I/N the sender is agent I of a run split over N (`send --shard I/N`), so
the sink sees every N-th sequence number and the rest are another agent's (issue 40: one
kept entry per gap grew the sink ~20 bytes a message); --messages is then what the sink
receives, and the accounting expects exactly the other agents' numbers missing.

Usage: bench/sink_memory.py [--messages 5000000] [--step 1000000] [--connections 4]
       [--share I/N] [--out DIR]
Build first: cargo build --release (MAILBENCH=path runs another build). Everything targets
127.0.0.1.
"""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

# Message size: the smallest mailbench makes is 379 bytes (header section and trace).
SIZE = 400

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
MB = os.environ.get("MAILBENCH") or os.path.join(TARGET, "release", "mailbench")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def received(port):
    """The sink's accepted-message count from its /metrics, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    for line in data.decode(errors="replace").splitlines():
        if line.startswith('mailbench_messages_total{result="accepted"}'):
            return int(float(line.split()[-1]))
    return None


def main():
    messages = benchlib.arg("--messages", 5_000_000)
    step = benchlib.arg("--step", 1_000_000)
    conns = benchlib.arg("--connections", 4)
    out_dir = benchlib.arg("--out", "")
    share = benchlib.arg("--share", "0/1")
    index, count = (int(x) for x in share.split("/"))
    if not os.path.exists(MB):
        raise SystemExit(f"{MB} is missing: run cargo build --release first")
    scratch = benchlib.scratch("mailbench-sinkmem-")
    port, mport = benchlib.free_port(), benchlib.free_port()
    sink_json = os.path.join(scratch, "sink.json")
    sink = subprocess.Popen(
        [MB, "sink", "--listen", f"127.0.0.1:{port}", "-q", "--json", sink_json,
         "--prometheus", f"127.0.0.1:{mport}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    benchlib.wait_port(port, "the sink")
    t0 = time.time()
    send = subprocess.Popen(
        [MB, "send", f"127.0.0.1:{port}", "-n", str(messages * count), "-c", str(conns),
         "--size", str(SIZE), "--run-id", "5e4e", "-q"]
        + (["--shard", share] if count > 1 else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows, next_mark = [], step
    while next_mark <= messages:
        n = received(mport) or 0
        if n >= next_mark:
            rows.append((n, rss_kib(sink.pid), time.time() - t0))
            next_mark += step
            continue
        if send.poll() is not None and n < next_mark:
            # /metrics publishes once a second: wait for its last figure.
            time.sleep(1.2)
            n = received(mport) or 0
            if n < next_mark:
                raise SystemExit(f"send ended after {n} messages (exit {send.returncode})")
        time.sleep(0.05)
    send.wait()
    sink.terminate()
    sink.wait()
    with open(sink_json) as f:
        r = json.load(f)
    run = r["extra"]["runs"]["0000000000005e4e"]
    first = rows[0][1]
    lines = [f"sink memory over one run of {messages:,} traced {SIZE}-byte messages, "
             f"{conns} connections (release build)"
             + (f", agent {share} of the run: one number in {count}" if count > 1 else ""),
             f"{'messages':>12} {'RSS MiB':>9} {'vs first':>9} {'elapsed s':>10}"]
    for n, kib, secs in rows:
        lines.append(f"{n:>12,} {kib / 1024:>9.1f} {kib / first:>9.3f} {secs:>10.1f}")
    ratio = rows[-1][1] / first
    lines.append(f"RSS at {rows[-1][0]:,} / RSS at {rows[0][0]:,}: {ratio:.3f} (target <= 1.10)")
    lines.append(f"sink's accounting: distinct {run['distinct']:,}, missing {run['missing_count']}, "
                 f"duplicates {run['duplicates']}, seen {len(run['seen']):,} range(s) "
                 f"from {run['seen'][0]} to {run['seen'][-1]}")
    text = "\n".join(lines)
    print(text)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "sink_memory.txt"), "w") as f:
            f.write(text + "\n")
    want_seen = [[s, s] for s in range(index, messages * count, count)] if count > 1 \
        else [[0, messages - 1]]
    exact = (run["distinct"] == messages
             and run["missing_count"] == (run["max_seq"] + 1 - messages)
             and run["duplicates"] == 0 and run["seen"] == want_seen)
    if ratio > 1.10 or not exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
