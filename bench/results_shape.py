#!/usr/bin/env python3
"""Checks that a restructuring left mailbench's outputs alone.

Runs one fixed set of small commands (send to a sink, the sink itself, relay through a lab
Postfix, the mailbox family on a lab Dovecot, the test DNS, report, compare, merge, and a
few refused inputs) with a given binary, and writes what a user sees of each into a
directory: every results file's key paths with their JSON types, the CSV header, stdout
and stderr with numbers, paths and ports masked, and the exit code. Comparing the
directories of the binary before and after (`--compare A B`) lists every difference; the
figures themselves differ from run to run and are not compared.

    sudo bench/results_shape.py --bin /tmp/before/mailbench --out /tmp/shape-before
    sudo bench/results_shape.py --bin target/release/mailbench --out /tmp/shape-after
    bench/results_shape.py --compare /tmp/shape-before /tmp/shape-after

Needs root (labs) and what scripts/install-deps.sh --for-tests installs; every load is
small and bounded (a few hundred messages, seconds).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def paths(value, prefix=""):
    """Key paths of a JSON value with their types; list items folded into `[]`, and
    map keys that are data (numbers, addresses, codes) folded into `{}`."""
    out = set()
    if isinstance(value, dict):
        out.add(f"{prefix} object")
        for k, v in value.items():
            key = "{}" if re.fullmatch(r"[0-9.:@a-f-]+|\d\d\d.*", k) and not k.isalpha() else k
            out |= paths(v, f"{prefix}.{key}")
    elif isinstance(value, list):
        out.add(f"{prefix} array")
        for v in value:
            out |= paths(v, f"{prefix}[]")
    else:
        kind = {bool: "bool", int: "number", float: "number", str: "string"}.get(
            type(value), "null"
        )
        out.add(f"{prefix} {kind}")
    return out


MASKS = [
    (re.compile(r"/tmp/[^\s,;:'\")]+"), "/tmp/PATH"),
    (re.compile(r"/dev/shm/[^\s,;:'\")]+"), "/dev/shm/PATH"),
    (re.compile(r"\b[0-9a-f]{8,16}\b"), "HEX"),
    (re.compile(r"\d+(\.\d+)?"), "#"),
    (re.compile(r"[ \t]+"), " "),
]


def mask(text):
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text


class Runner:
    def __init__(self, binary, out):
        self.binary = binary
        self.out = out
        self.tmp = tempfile.mkdtemp(prefix="mailbench-shape-")

    def file(self, name):
        return os.path.join(self.tmp, name)

    def run(self, name, args, timeout=180):
        cmd = [self.binary] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        self.record(name, p.returncode, p.stdout, p.stderr)
        return p

    def record(self, name, code, stdout, stderr):
        with open(os.path.join(self.out, f"{name}.out"), "w") as f:
            f.write(f"exit {code}\n--- stdout\n{mask(stdout)}--- stderr\n{mask(stderr)}")

    def keys(self, name, path):
        try:
            with open(path) as f:
                value = json.load(f)
        except (OSError, ValueError) as e:
            lines = [f"unreadable: {type(e).__name__}"]
        else:
            lines = sorted(paths(value))
        with open(os.path.join(self.out, f"{name}.keys"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def header(self, name, path):
        try:
            with open(path) as f:
                first = f.readline()
        except OSError:
            first = "missing\n"
        with open(os.path.join(self.out, f"{name}.csvhead"), "w") as f:
            f.write(first)


def shapes(r):
    sink_port = free_port()
    sink_json = r.file("sink.json")
    sink = subprocess.Popen(
        [r.binary, "sink", "--listen", f"127.0.0.1:{sink_port}", "-z", "20s",
         "--exit-after-messages", "300", "--json", sink_json, "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(0.5)
    r.run("send-closed", ["send", f"127.0.0.1:{sink_port}", "-n", "200", "-c", "4",
                          "--size", "2k", "--json", r.file("send.json"),
                          "--csv", r.file("send.csv")])
    r.keys("send-closed", r.file("send.json"))
    r.header("send-closed", r.file("send.csv"))
    r.run("send-open", ["send", f"127.0.0.1:{sink_port}", "-n", "100", "-c", "4",
                        "--rate", "200/s", "--json", r.file("send-open.json")])
    r.keys("send-open", r.file("send-open.json"))
    out, err = sink.communicate(timeout=60)
    r.record("sink", sink.returncode, out, err)
    r.keys("sink", sink_json)

    r.run("relay", ["relay", "--lab", "postfix", "-n", "200", "-c", "4", "--size", "2k",
                    "--json", r.file("relay.json")])
    r.keys("relay", r.file("relay.json"))

    box = ["--lab", "dovecot", "--users", "4"]
    r.run("populate", ["mailbox", "populate"] + box + ["--per-user", "5",
                       "--json", r.file("populate.json")])
    r.keys("populate", r.file("populate.json"))
    r.run("pop3", ["mailbox", "pop3"] + box + ["-n", "40", "-c", "2",
                   "--json", r.file("pop3.json")])
    r.keys("pop3", r.file("pop3.json"))
    r.run("imap", ["mailbox", "imap"] + box + ["-n", "200", "-c", "2",
                   "--json", r.file("imap.json")])
    r.keys("imap", r.file("imap.json"))
    r.run("profile", ["mailbox", "profile"] + box + ["--fill", "3", "-z", "4s",
                      "--time-scale", "60", "--json", r.file("profile.json")])
    r.keys("profile", r.file("profile.json"))
    r.run("arrival", ["mailbox", "arrival"] + box + ["-n", "40", "-c", "2",
                      "--json", r.file("arrival.json")])
    r.keys("arrival", r.file("arrival.json"))

    dns_port = free_port()
    dns = subprocess.Popen(
        [r.binary, "dns", "--listen", f"127.0.0.1:{dns_port}", "--domains", "10",
         "-z", "3s", "--json", r.file("dns.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(0.5)
    if shutil.which("dig"):
        for q in ["d1.example.test MX", "d2.example.test A", "nope.example.test A"]:
            subprocess.run(["dig", "-p", str(dns_port), "@127.0.0.1", "+tries=1",
                            "+time=1"] + q.split(), capture_output=True)
    out, err = dns.communicate(timeout=30)
    r.record("dns", dns.returncode, out, err)
    r.keys("dns", r.file("dns.json"))

    r.run("report", ["report", r.file("relay.json"), r.file("send.json"),
                     "-o", r.file("report.html")])
    r.run("compare", ["compare", r.file("send.json"), r.file("send-open.json"), "--force"])
    r.run("merge", ["merge", r.file("send.json"), r.file("send-open.json"), "--force",
                    "-o", r.file("merged.json")])
    r.keys("merge", r.file("merged.json"))
    for i, bad in enumerate([
        ["send", "127.0.0.1:1", "--size", "huge"],
        ["relay", "--lab", "postfix", "-c", "0"],
        ["mailbox", "imap", "--lab", "dovecot", "--users", "0"],
        ["mailbox", "profile", "--scenario", "nope"],
        ["mailbox", "arrival", "--users-file", "/nonexistent"],
        ["dns", "--domains", "x"],
        ["sink", "--rule", "bogus"],
        ["report", "/nonexistent.json"],
    ]):
        r.run(f"refused-{i}", bad)


def compare(a, b):
    names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
    differ = 0
    for n in names:
        pa, pb = os.path.join(a, n), os.path.join(b, n)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            print(f"{n}: only in {'the first' if os.path.exists(pa) else 'the second'}")
            differ += 1
            continue
        la = open(pa).read().splitlines()
        lb = open(pb).read().splitlines()
        if la == lb:
            continue
        differ += 1
        print(f"{n}:")
        if n.endswith(".keys"):
            for k in sorted(set(la) - set(lb)):
                print(f"  - {k}")
            for k in sorted(set(lb) - set(la)):
                print(f"  + {k}")
        else:
            import difflib
            for line in difflib.unified_diff(la, lb, lineterm="", n=0):
                if not line.startswith(("---", "+++", "@@")):
                    print(f"  {line}")
    print(f"{len(names)} outputs compared, {differ} differ")
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="the mailbench binary to run")
    ap.add_argument("--out", help="directory for its shapes")
    ap.add_argument("--compare", nargs=2, metavar="DIR", help="compare two shape directories")
    a = ap.parse_args()
    if a.compare:
        sys.exit(compare(*a.compare))
    if not (a.bin and a.out):
        ap.error("give --bin and --out, or --compare A B")
    os.makedirs(a.out, exist_ok=True)
    r = Runner(os.path.abspath(a.bin), a.out)
    try:
        shapes(r)
    finally:
        shutil.rmtree(r.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
