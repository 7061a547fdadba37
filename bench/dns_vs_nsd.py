#!/usr/bin/env python3
"""`mailbench dns` against NSD serving the same zones on loopback, driven by dnsperf,
side by side in one run: queries per second and server CPU per query, each server on one
thread (`--threads 1`, NSD `server-count: 1`) and on two (`--threads 2`, `server-count: 2`).

The zones: N synthetic domains (d0..dN-1.example.test), each with SOA, NS, one MX, the MX
host's A record and an SPF TXT — what `mailbench dns --domains N` makes; NSD gets the
same records as zone files written here. dnsperf asks a mix of MX, A and TXT questions
over them (a relay's lookups). On a 2-core machine a one-thread server is pinned to CPU 0
and dnsperf to CPU 1 (taskset); a two-thread server and dnsperf share both CPUs (so on
two cores the two-thread rate is bounded by dnsperf's own share). Each round runs the four
configurations, in the reverse order every other round, so that a load that comes and
goes on a shared machine falls on all of them alike; the ratios are of the medians.

NSD (Debian's nsd) is not installed as a service: its package is fetched with
`apt-get download` and unpacked with `dpkg -x` into target/peers/nsd (its libraries are
dnsperf's, installed by apt), and runs from there with its own config in a scratch
directory.

Usage: bench/dns_vs_nsd.py [--domains 254] [--seconds 10] [--rounds 3] [--out DIR]
Needs: target/release/mailbench (cargo build --release), dnsperf (apt-get install
dnsperf), taskset, dig, apt-get download. Loopback only.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
PEERS = os.path.join(ROOT, "target", "peers")
NSD = os.path.join(PEERS, "nsd", "usr", "sbin", "nsd")


def fetch_nsd():
    """NSD unpacked from its Debian package, once."""
    if os.path.exists(NSD):
        return
    os.makedirs(PEERS, exist_ok=True)
    subprocess.run(["apt-get", "download", "-q", "nsd"], cwd=PEERS, check=True, capture_output=True)
    deb = next(f for f in os.listdir(PEERS) if f.startswith("nsd_") and f.endswith(".deb"))
    subprocess.run(["dpkg", "-x", deb, os.path.join(PEERS, "nsd")], cwd=PEERS, check=True)


def zone_files(n, tmp):
    """One zone file per domain, the records `mailbench dns --domains n` serves."""
    names = []
    for k in range(n):
        d = f"d{k}.example.test"
        path = os.path.join(tmp, f"{d}.zone")
        with open(path, "w") as f:
            f.write(f"$ORIGIN {d}.\n$TTL 300\n"
                    f"@ IN SOA ns.{d}. hostmaster.{d}. 1 3600 600 86400 300\n"
                    f"@ IN NS ns.{d}.\n@ IN MX 10 mx1.{d}.\nmx1 IN A 127.0.2.1\n"
                    f"@ IN TXT \"v=spf1 ip4:127.0.0.0/8 ip6:::1/128 -all\"\n")
        names.append((d, path))
    return names


def query_file(n, tmp):
    path = os.path.join(tmp, "queries.txt")
    with open(path, "w") as f:
        for k in range(n):
            d = f"d{k}.example.test"
            f.write(f"{d} MX\nmx1.{d} A\n{d} TXT\n")
    return path


def cpus(threads):
    """The CPUs a server with `threads` threads runs on (dnsperf gets the others, or all)."""
    return "0" if threads == 1 else "0-1"


def start_nsd(zones, port, tmp, threads):
    conf = os.path.join(tmp, f"nsd-{port}.conf")
    with open(conf, "w") as f:
        f.write(f'server:\n  server-count: {threads}\n  username: ""\n  database: ""\n  zonelistfile: ""\n'
                f'  ip-address: 127.0.0.1@{port}\n  pidfile: "{tmp}/nsd.pid"\n'
                f'  xfrdfile: "{tmp}/xfrd.state"\n  logfile: "{tmp}/nsd.log"\n  verbosity: 0\n'
                f'  hide-version: yes\n  rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n  zonesdir: "{tmp}"\nremote-control:\n  control-enable: no\n')
        for d, path in zones:
            f.write(f"zone:\n  name: {d}\n  zonefile: {path}\n")
    return subprocess.Popen(["taskset", "-c", cpus(threads), NSD, "-d", "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_mailbench(n, port, threads):
    return subprocess.Popen(["taskset", "-c", cpus(threads), MB, "--threads", str(threads), "dns",
                             "-q", "--domains", str(n), "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def server_ready(port):
    for _ in range(100):
        p = subprocess.run(["dig", "+short", "+tries=1", "+time=1", "-p", str(port), "@127.0.0.1",
                            "d0.example.test", "MX"], capture_output=True, text=True)
        if "mx1.d0.example.test" in p.stdout:
            return
        time.sleep(0.1)
    raise SystemExit(f"no DNS server answers on 127.0.0.1:{port}")


def measure(name, threads, start, queries, seconds):
    port = benchlib.free_port()
    proc = start(port, threads)
    try:
        server_ready(port)
        cpu0 = benchlib.tree_cpu(proc.pid)
        client_cpus = "1" if threads == 1 else "0-1"
        out = subprocess.run(["taskset", "-c", client_cpus, "dnsperf", "-s", "127.0.0.1", "-p", str(port),
                              "-d", queries, "-l", str(seconds), "-c", "4", "-q", "200"],
                             capture_output=True, text=True, timeout=seconds + 60).stdout
        cpu = benchlib.tree_cpu(proc.pid) - cpu0
    finally:
        proc.terminate()
        proc.wait()
    num = lambda key: float(re.search(rf"{key}:\s+([\d.]+)", out).group(1))  # noqa: E731
    done, lost = num("Queries completed"), num("Queries lost")
    return {"server": name, "threads": threads, "qps": num("Queries per second"), "completed": int(done),
            "lost": int(lost), "cpu_s": cpu, "cpu_us_per_q": cpu / max(done, 1) * 1e6,
            "latency_ms": num("Average Latency \\(s\\)") * 1000}


def main():
    n = benchlib.arg("--domains", 254)
    seconds = benchlib.arg("--seconds", 10)
    rounds = benchlib.arg("--rounds", 3)
    out_dir = benchlib.arg("--out", "")
    for tool in ("dnsperf", "taskset", "dig"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install dnsperf bind9-dnsutils util-linux)")
    fetch_nsd()
    tmp = benchlib.scratch("mailbench-dns-")
    zones = zone_files(n, tmp)
    queries = query_file(n, tmp)
    servers = {
        "mailbench": lambda port, threads: start_mailbench(n, port, threads),
        "nsd": lambda port, threads: start_nsd(zones, port, tmp, threads),
    }
    configs = [(s, t) for t in (1, 2) for s in ("mailbench", "nsd")]
    rows = []
    for r in range(rounds):
        for name, threads in configs if r % 2 == 0 else configs[::-1]:
            rows.append(measure(name, threads, servers[name], queries, seconds))
    nsd_version = subprocess.run([NSD, "-v"], capture_output=True, text=True).stderr.split("\n")[0]
    lines = [f"# mailbench dns vs {nsd_version.strip()}: {n} zones, MX/A/TXT mix, dnsperf -c 4 -q 200 "
             f"for {seconds} s, {rounds} round(s) of 4 alternating; 1 thread: server on CPU 0, "
             f"dnsperf on CPU 1; 2 threads (NSD server-count 2): server and dnsperf on CPUs 0-1", "",
             f"{'server':<10}{'threads':>8}{'queries/s':>11}{'completed':>11}{'lost':>6}{'cpu s':>8}"
             f"{'cpu us/query':>14}{'avg latency ms':>16}"]
    for x in rows:
        lines.append(f"{x['server']:<10}{x['threads']:>8}{x['qps']:>11.0f}{x['completed']:>11}{x['lost']:>6}"
                     f"{x['cpu_s']:>8.2f}{x['cpu_us_per_q']:>14.2f}{x['latency_ms']:>16.3f}")
    med = {c: {k: statistics.median(x[k] for x in rows if (x["server"], x["threads"]) == c)
               for k in ("qps", "cpu_us_per_q")} for c in configs}
    lines += ["", "medians:"]
    for s, t in configs:
        m = med[(s, t)]
        lines.append(f"  {s:<10}{t} thread(s): {m['qps']:>8.0f} q/s at {m['cpu_us_per_q']:.2f} us/query")
    lines.append("")
    for t in (1, 2):
        mb, nsd = med[("mailbench", t)], med[("nsd", t)]
        lines.append(f"mailbench against nsd on {t} thread(s): {mb['qps'] / nsd['qps']:.2f}x the queries "
                     f"per second, {mb['cpu_us_per_q'] / nsd['cpu_us_per_q']:.2f}x the CPU per query")
    benchlib.emit("\n".join(lines) + "\n", out_dir, "dns_vs_nsd.txt")


if __name__ == "__main__":
    main()
