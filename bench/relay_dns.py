#!/usr/bin/env python3
"""What DNS does to the lab Postfix's relay figures: the same load relayed to a bracketed
relayhost (no DNS), then through the test DNS server with 50 domains, then with DNS
faults (slow MX answers, failing A answers), in alternating order over --rounds.

Prints per run: acceptance and drain MPM, drain seconds, end to end p50/p99, DNS
questions per delivered message, the server's p99 answer time, the deferrals Postfix's
log blames on DNS, and the counts (delivered, lost).

Usage: bench/relay_dns.py [--messages 5000] [--domains 50] [--rounds 1] [--out DIR]
Needs root (the lab). Everything stays on loopback; every run is bounded by its count.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")


def run(mode, extra, messages, domains, tmp):
    out = os.path.join(tmp, "r.json")
    cmd = [MB, "relay", "--lab", "postfix", "-n", str(messages), "--size", "4k", "-c", "32",
           "--to", f"u{{seq}}@d{{mod:{domains}}}.example.test", "--drain-timeout", "300s",
           "-q", "--json", out] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    s = json.load(open(out))["summary"]
    return {"mode": mode, "inject_mpm": s["inject_mpm"], "drain_mpm": s["drain_mpm"],
            "drain_s": s["drain_s"], "e2e_p50": s["e2e_p50_ms"], "e2e_p99": s["e2e_p99_ms"],
            "q_per_msg": s.get("dns_queries_per_message"), "dns_p99": s.get("dns_p99_ms"),
            "deferred": s.get("dns_deferred"), "delivered": s["delivered"], "lost": s["lost"]}


def main():
    messages = benchlib.arg("--messages", 5000)
    domains = benchlib.arg("--domains", 50)
    rounds = benchlib.arg("--rounds", 1)
    out_dir = benchlib.arg("--out", "")
    tmp = benchlib.scratch("mailbench-relay-dns-")
    dns = ["--dns-domains", str(domains)]
    modes = [("relayhost", []), ("dns", dns),
             ("mx 200ms 10%", dns + ["--dns-rule", "mx:delay=200ms:10%"]),
             ("a servfail 5%", dns + ["--dns-rule", "a:servfail:5%"])]
    rows = []
    for r in range(rounds):
        for mode, extra in (modes if r % 2 == 0 else list(reversed(modes))):
            rows.append(run(mode, extra, messages, domains, tmp))
    opt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    lines = [f"# lab Postfix (tmpfs queue), {messages} x 4 KiB over 32 sessions to {domains} domains, "
             f"{rounds} round(s) in alternating order", "",
             f"{'mode':<15}{'accept MPM':>11}{'drain MPM':>10}{'drain s':>8}{'e2e p50':>9}{'e2e p99':>9}"
             f"{'dns q/msg':>10}{'dns p99 ms':>11}{'dns deferred':>13}{'delivered':>10}{'lost':>5}"]
    for x in rows:
        lines.append(f"{x['mode']:<15}{x['inject_mpm']:>11.0f}{x['drain_mpm']:>10.0f}{x['drain_s']:>8.1f}"
                     f"{x['e2e_p50']:>9.1f}{x['e2e_p99']:>9.1f}{opt(x['q_per_msg'], '.2f'):>10}"
                     f"{opt(x['dns_p99'], '.3f'):>11}{opt(x['deferred'], 'd'):>13}{x['delivered']:>10}"
                     f"{x['lost']:>5}")
    benchlib.emit("\n".join(lines) + "\n", out_dir, "relay_dns.txt")


if __name__ == "__main__":
    main()
