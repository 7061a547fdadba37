#!/usr/bin/env python3
"""Does watching a run cost the run? `mailbench send` into `mailbench sink` (1 KB, 16
connections, closed loop) three ways, in rotating order over several rounds:

- quiet: `-q`, no live view, no /metrics;
- live: the live panel on a real terminal (a pty this script reads), redrawn every interval;
- metrics: `--prometheus` with this script scraping /metrics every 100 ms (ten times what a
  Prometheus server would do at its shortest usual interval).

Prints the sender's messages/s and CPU microseconds per message (user+sys, from the child's
rusage), medians over the rounds, and each against quiet. Target: within noise.

Usage: bench/live_overhead.py [--rounds 5] [--messages 500000] [--out DIR]
Everything targets 127.0.0.1; every run is bounded by its message count.
"""
import os
import pty
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")


def scraper(port, stop, counts):
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                while s.recv(65536):
                    pass
            counts[0] += 1
        except OSError:
            pass
        time.sleep(0.1)


def run(mode, target, messages):
    """One send run; returns (messages/s, cpu µs per message)."""
    cmd = [MB, "send", target, "-n", str(messages), "-c", "16", "--size", "1k"]
    stop, counts, extra = threading.Event(), [0], None
    if mode == "quiet":
        cmd.append("-q")
    if mode == "metrics":
        port = benchlib.free_port()
        cmd += ["-q", "--prometheus", f"127.0.0.1:{port}"]
        extra = threading.Thread(target=scraper, args=(port, stop, counts), daemon=True)
    master = None
    if mode == "live":
        master, slave = pty.openpty()
        stderr = slave
    else:
        stderr = subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
    if master is not None:
        os.close(slave)
        drain = threading.Thread(target=lambda: _drain(master), daemon=True)
        drain.start()
    if extra:
        extra.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    stop.set()
    if status != 0:
        raise SystemExit(f"{mode}: mailbench send exited with {status}")
    if mode == "metrics" and counts[0] == 0:
        raise SystemExit("metrics: no scrape succeeded")
    return messages / wall, (ru.ru_utime + ru.ru_stime) / messages * 1e6


def _drain(fd):
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def main():
    rounds = benchlib.arg("--rounds", 5)
    messages = benchlib.arg("--messages", 500000)
    out_dir = benchlib.arg("--out", "")
    port = benchlib.free_port()
    sink = subprocess.Popen([MB, "sink", "--listen", f"127.0.0.1:{port}", "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    benchlib.wait_port(port, "mailbench sink")
    modes = ["quiet", "live", "metrics"]
    got = {m: [] for m in modes}
    try:
        for r in range(rounds):
            for m in modes[r % 3:] + modes[:r % 3]:
                got[m].append(run(m, f"127.0.0.1:{port}", messages))
    finally:
        sink.terminate()
        sink.wait()
    med = {m: (statistics.median(x[0] for x in got[m]), statistics.median(x[1] for x in got[m]))
           for m in modes}
    lines = [f"# watching a run: mailbench send -> mailbench sink, {messages} x 1 KB, 16 connections, "
             f"{rounds} rounds in rotating order, medians", "",
             f"{'mode':<10}{'msg/s':>10}{'cpu us/msg':>12}{'rate vs quiet':>15}{'cpu vs quiet':>14}"]
    for m in modes:
        rate, cpu = med[m]
        lines.append(f"{m:<10}{rate:>10.0f}{cpu:>12.2f}{rate / med['quiet'][0]:>14.2f}x"
                     f"{cpu / med['quiet'][1]:>13.2f}x")
    for m in ("live", "metrics"):
        per = [f"{a[1] / b[1]:.2f}x" for a, b in zip(got[m], got["quiet"])]
        lines.append(f"  {m} cpu per round vs quiet: {', '.join(per)}")
    text = "\n".join(lines) + "\n"
    benchlib.emit(text, out_dir, "live_overhead.txt")


if __name__ == "__main__":
    main()
