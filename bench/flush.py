#!/usr/bin/env python3
"""Seed 003's flush benchmark on the lab Postfix (queue on tmpfs): inject N messages on
hold, release them all at once and time the drain (`mailbench relay --flush`), beside the
normal relay run of the same N (injection and delivery at the same time), in alternating
order over --rounds.

Prints per run: acceptance MPM, delivery (drain) MPM, drain seconds (from the release for
the flush, from the first injection otherwise), the largest backlog, Postfix's CPU, and
the counts (held, delivered, lost) — then the flush's drain MPM against the normal run's.

Usage: bench/flush.py [--messages 100000] [--size 4k] [--rounds 1] [--out DIR]
Needs root (the lab). Everything stays on loopback; every run is bounded by its count.
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")


def run(flush, messages, size, tmp):
    out = os.path.join(tmp, "r.json")
    cmd = [MB, "relay", "--lab", "postfix", "-n", str(messages), "--size", size, "-c", "64",
           "--drain-timeout", "600s", "-q", "--json", out] + (["--flush"] if flush else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    r = json.load(open(out))
    s, sut = r["summary"], r["extra"].get("sut", {})
    return {
        "mode": "flush" if flush else "normal",
        "inject_mpm": s["inject_mpm"],
        "drain_mpm": s["drain_mpm"],
        "drain_s": s["drain_s"],
        "max_backlog": s["max_backlog"],
        "held": s.get("flush_held", 0),
        "delivered": s["delivered"],
        "lost": s["lost"],
        "postfix_cpu_s": sut.get("cpu_user_s", 0.0) + sut.get("cpu_sys_s", 0.0),
        "release_ms": r["extra"].get("flush", {}).get("release_took_ms", 0.0),
    }


def main():
    messages = benchlib.arg("--messages", 100000)
    size = benchlib.arg("--size", "4k")
    rounds = benchlib.arg("--rounds", 1)
    out_dir = benchlib.arg("--out", "")
    tmp = benchlib.scratch("mailbench-flush-")
    rows = []
    for r in range(rounds):
        for flush in ([True, False] if r % 2 == 0 else [False, True]):
            rows.append(run(flush, messages, size, tmp))
    lines = [f"# flush vs normal relay: lab Postfix, tmpfs queue, {messages} x {size}, 64 connections, "
             f"{rounds} round(s) in alternating order", "",
             f"{'mode':<8}{'accept MPM':>12}{'drain MPM':>11}{'drain s':>9}{'max backlog':>13}"
             f"{'held':>8}{'delivered':>11}{'lost':>6}{'postfix cpu s':>15}{'release ms':>12}"]
    for x in rows:
        lines.append(f"{x['mode']:<8}{x['inject_mpm']:>12.0f}{x['drain_mpm']:>11.0f}{x['drain_s']:>9.1f}"
                     f"{x['max_backlog']:>13}{x['held']:>8}{x['delivered']:>11}{x['lost']:>6}"
                     f"{x['postfix_cpu_s']:>15.1f}{x['release_ms']:>12.0f}")
    med = {m: statistics.median(x["drain_mpm"] for x in rows if x["mode"] == m) for m in ("flush", "normal")}
    lines += ["", f"drain MPM, flush against normal: {med['flush'] / med['normal']:.2f}x "
              f"({med['flush']:.0f} vs {med['normal']:.0f})"]
    benchlib.emit("\n".join(lines) + "\n", out_dir, "flush.txt")


if __name__ == "__main__":
    main()
