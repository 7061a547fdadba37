#!/usr/bin/env python3
"""What does DKIM cost? `mailbench send` into `mailbench sink` (25 KiB, 16 connections,
closed loop) unsigned, signed with Ed25519 and signed with RSA-2048 (keys made with
openssl), in rotating order over several rounds. The sink verifies the signatures against
the matching public key, so both sides of DKIM are measured.

Then the same question for an MTA: the lab Postfix relaying 10,000 × 25 KiB with and
without `--mta-dkim-key` (OpenDKIM as its milter, RSA-2048), alternating over the rounds:
delivery MPM and the MTA's CPU per message (Postfix's processes and OpenDKIM's), every
signature verified at the sink.

Prints, medians over the rounds: the sender's messages/s and CPU microseconds per message
(user+sys from its rusage), the signing CPU per message mailbench itself counted, the
sink's CPU per message and its verification CPU per message, and each rate and CPU against
unsigned. No peer signs DKIM (smtp-source and postal cannot), so the unsigned run is the
baseline.

Usage: bench/dkim_cost.py [--rounds 3] [--messages 20000] [--relayed 10000] [--out DIR]
Everything targets 127.0.0.1; every run is bounded by its message count.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")


def keys(tmp):
    """(private, public) PEM paths per algorithm."""
    out = {}
    for alg in ("ed25519", "rsa"):
        key, pub = os.path.join(tmp, f"{alg}.pem"), os.path.join(tmp, f"{alg}.pub")
        extra = ["-pkeyopt", "rsa_keygen_bits:2048"] if alg == "rsa" else []
        subprocess.run(["openssl", "genpkey", "-algorithm", alg, "-out", key] + extra,
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True)
        out[alg] = (key, pub)
    return out


def run(mode, keyset, messages, tmp):
    """One send → sink run; the figures of both sides."""
    port = benchlib.free_port()
    sink_json, send_json = os.path.join(tmp, "sink.json"), os.path.join(tmp, "send.json")
    sink_cmd = [MB, "sink", "--listen", f"127.0.0.1:{port}", "-q", "--json", sink_json]
    send_cmd = [MB, "send", f"127.0.0.1:{port}", "-n", str(messages), "-c", "16", "--size", "25k",
                "-q", "--json", send_json]
    if mode != "unsigned":
        key, pub = keyset[mode]
        sink_cmd += ["--dkim-verify", pub]
        send_cmd += ["--dkim-key", key, "--dkim-domain", "example.org"]
    sink = subprocess.Popen(sink_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    benchlib.wait_port(port, "mailbench sink")
    t0 = time.monotonic()
    p = subprocess.Popen(send_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    sink.send_signal(signal.SIGTERM)
    _, sink_status, sink_ru = os.wait4(sink.pid, 0)
    if status != 0 or sink_status != 0:
        raise SystemExit(f"{mode}: send exited {status}, sink {sink_status}")
    sent, sunk = json.load(open(send_json)), json.load(open(sink_json))
    verify = sunk.get("extra", {}).get("dkim_verify", {})
    if mode != "unsigned" and verify.get("pass") != messages:
        raise SystemExit(f"{mode}: {verify.get('pass')} of {messages} signatures verified: {verify}")
    return {
        "rate": sent["counters"]["accepted"] / wall,
        "cpu_us": (ru.ru_utime + ru.ru_stime) / messages * 1e6,
        "sign_us": sent.get("extra", {}).get("dkim", {}).get("sign_cpu_us_mean", 0.0),
        "sink_cpu_us": (sink_ru.ru_utime + sink_ru.ru_stime) / messages * 1e6,
        "verify_us": verify.get("verify_cpu_us_mean", 0.0),
    }


def relay(signing, keyset, messages, tmp):
    """One lab relay run, the MTA signing or not; (drain MPM, MTA CPU µs per message)."""
    out = os.path.join(tmp, "relay.json")
    key, pub = keyset["rsa"]
    cmd = [MB, "relay", "--lab", "postfix", "-n", str(messages), "-q", "--json", out]
    if signing:
        cmd += ["--mta-dkim-key", key, "--dkim-verify", pub]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    r = json.load(open(out))
    if signing and r["extra"]["dkim_verify"]["pass"] != messages:
        raise SystemExit(f"the MTA signed {r['extra']['dkim_verify']} of {messages}")
    sut = r["extra"]["sut"]
    return r["summary"]["drain_mpm"], (sut["cpu_user_s"] + sut["cpu_sys_s"]) / messages * 1e6


def main():
    rounds = benchlib.arg("--rounds", 3)
    messages = benchlib.arg("--messages", 20000)
    out_dir = benchlib.arg("--out", "")
    tmp = benchlib.scratch("mailbench-dkim-")
    keyset = keys(tmp)
    modes = ["unsigned", "ed25519", "rsa"]
    got = {m: [] for m in modes}
    for r in range(rounds):
        for m in modes[r % 3:] + modes[:r % 3]:
            got[m].append(run(m, keyset, messages, tmp))
    med = {m: {k: statistics.median(x[k] for x in got[m]) for k in got[m][0]} for m in modes}
    base = med["unsigned"]
    lines = [f"# DKIM's cost: mailbench send -> mailbench sink, {messages} x 25 KiB, 16 connections, "
             f"{rounds} rounds in rotating order, medians; the sink verifies with the matching key", "",
             f"{'mode':<10}{'msg/s':>9}{'send cpu us/msg':>17}{'of it signing':>15}"
             f"{'sink cpu us/msg':>17}{'of it verifying':>17}{'rate vs unsigned':>18}{'send cpu vs unsigned':>22}"]
    for m in modes:
        x = med[m]
        lines.append(f"{m:<10}{x['rate']:>9.0f}{x['cpu_us']:>17.1f}{x['sign_us']:>15.1f}"
                     f"{x['sink_cpu_us']:>17.1f}{x['verify_us']:>17.1f}"
                     f"{x['rate'] / base['rate']:>17.2f}x{x['cpu_us'] / base['cpu_us']:>21.2f}x")
    relayed = benchlib.arg("--relayed", 10000)
    mta = {True: [], False: []}
    for r in range(rounds):
        for signing in ([False, True] if r % 2 == 0 else [True, False]):
            mta[signing].append(relay(signing, keyset, relayed, tmp))
    m = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in mta.items()}
    lines += ["", f"# the lab Postfix signing through OpenDKIM (RSA-2048) or not: mailbench relay, {relayed} x 25 KiB, "
              f"64 connections, {rounds} rounds alternating, medians; every signature verified at the sink", "",
              f"{'MTA':<14}{'drain MPM':>11}{'MTA cpu us/msg':>16}",
              f"{'not signing':<14}{m[False][0]:>11.0f}{m[False][1]:>16.1f}",
              f"{'signing':<14}{m[True][0]:>11.0f}{m[True][1]:>16.1f}",
              f"signing against not: drain MPM {m[True][0] / m[False][0]:.2f}x, MTA CPU per message "
              f"{m[True][1] / m[False][1]:.2f}x"]
    text = "\n".join(lines) + "\n"
    benchlib.emit(text, out_dir, "dkim_cost.txt")


if __name__ == "__main__":
    main()
