#!/usr/bin/env python3
"""Side-by-side sink benchmark: the same drivers (smtp-source -s 64 -d, and
`mailbench send -c 64` with pipelining) against Postfix's smtp-sink, Postal's bhm and
`mailbench sink`, for 1 KB and 25 KB messages. Prints messages/s and the sink's CPU seconds
per 10,000 messages, with ratios against smtp-sink. `floor` is mailbench's design with
nothing of its own (examples/floor_sink.rs: one thread, a task per connection, replies
batched per read, canned replies, no statistics): the kernel's and the runtime's share of
the CPU per message, the least a receiver built this way can spend. Then the loopback ceiling (a minimal
pipelined client+server in one process, examples/loopback_probe.rs) next to
`mailbench send` → `mailbench sink`; then 20,000 idle connections held by `mailbench sink`, and
its memory as 500,000 short connections come and go (100,000 with --quick).

A failed cell says what the sink answered. bhm (Debian's postal 0.76) offers SIZE in its
EHLO reply yet answers `501 Bad address syntax` to `MAIL FROM:<a@b> SIZE=n`, which RFC 1870
§6 has a client send when SIZE is offered: `mailbench send` → bhm fails on every message
(smtp-source sends no SIZE parameter and gets through).

Usage: bench/sink_vs_peers.py [--quick] [--out DIR]. Loopback only; every run is bounded.
"""
import json, os, resource, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, flag, free_port, proc_cpu, proc_sys, scratch, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
PROBE = os.path.join(ROOT, "target", "release", "examples", "loopback_probe")
FLOOR = os.path.join(ROOT, "target", "release", "examples", "floor_sink")
QUICK = flag("--quick")
OUT = arg("--out", "") or None
N = 10000 if QUICK else 20000

# 20,000 client sockets here and as many in the sink: raise the limit (root may).
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (100000, 100000))
except (ValueError, OSError):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))






def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start_sink(kind, tmp):
    port = free_port()
    if kind == "smtp-sink":
        args = ["/usr/sbin/smtp-sink"] + (["-u", "nobody"] if os.getuid() == 0 else []) + [f"127.0.0.1:{port}", "4096"]
    elif kind == "bhm":
        users = os.path.join(tmp, "users.txt")
        with open(users, "w") as f:
            f.write("rcpt@example.com\n")
        args = ["bhm", "-p", str(port), "-b", "127.0.0.1", "-t", "300", users]
    elif kind == "floor":
        args = [FLOOR, str(port)]
    else:
        args = [MB, "sink", "--listen", f"127.0.0.1:{port}", "-q", "--max-connections", "100000"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def drive(driver, port, size_k, n):
    target = f"127.0.0.1:{port}"
    if driver == "smtp-source":
        cmd = ["smtp-source", "-s", "64", "-d", "-m", str(n), "-l", str(size_k * 1024 - 100), "-t", "rcpt@example.com", target]
    else:
        cmd = [MB, "send", target, "-c", "64", "-n", str(n), "--size", f"{size_k}k", "--to", "rcpt@example.com", "-q"]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return time.monotonic() - t0, r.returncode, refusal(r.stdout)


def refusal(summary):
    """The first refusal mailbench's error table quotes (class, phase, code, count, then the
    server's words), so that a failed cell says what the peer answered."""
    for line in summary.splitlines():
        words = line.split()
        if len(words) > 4 and words[0].startswith("rejected_"):
            return f"{words[1]} refused: {' '.join(words[4:])}"
    return ""


HOLDER = """
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
for s in socks[::100]:
    s.recv(100)
print("ready", flush=True)
sys.stdin.read()
"""


def idle_connections(count):
    """Opens `count` idle connections from child processes (each under its own descriptor
    limit) and reads the sink's resident memory."""
    p, port = start_sink("mailbench", scratch("mailbench-idle-"))
    holders = []
    try:
        per = 5000
        for i in range(0, count, per):
            h = subprocess.Popen([sys.executable, "-c", HOLDER, str(port), str(min(per, count - i))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            holders.append(h)
        for h in holders:
            if h.stdout.readline().strip() != "ready":
                raise SystemExit("could not open the idle connections")
        time.sleep(1)
        rss = proc_rss_kib(p.pid)
        with open(f"/proc/{p.pid}/status") as f:
            pass
        open_conns = len(os.listdir(f"/proc/{p.pid}/fd"))
    finally:
        for h in holders:
            h.kill()
            h.wait()
        p.kill()
        p.wait()
    return rss, open_conns


def churn_rss(total):
    """mailbench sink's RSS as short connections (one message each, from smtp-source, which
    opens a session per message) pile up: a sink that kept every finished connection would
    grow with their number. smtp-source's messages carry no trace header, so nothing is
    remembered per message either."""
    tmp = scratch("mailbench-churn-")
    p, port = start_sink("mailbench", tmp)
    points = []
    try:
        done = 0
        step = total // 5
        while done < total:
            subprocess.run(["smtp-source", "-m", str(step), "-s", "32", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, check=True, timeout=900)
            done += step
            points.append((done, proc_rss_kib(p.pid)))
    finally:
        p.kill()
        p.wait()
    return points


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "mailbench", "--examples"], cwd=ROOT, check=True)
    tmp = scratch("mailbench-sinkbench-")
    rows = []
    for size_k in (1, 25):
        for driver in ("smtp-source", "mailbench"):
            for kind in ("smtp-sink", "bhm", "mailbench", "floor"):
                p, port = start_sink(kind, tmp)
                try:
                    c0, s0 = proc_cpu(p.pid), proc_sys(p.pid)
                    wall, rc, why = drive(driver, port, size_k, N)
                    cpu, sys_s = proc_cpu(p.pid) - c0, proc_sys(p.pid) - s0
                finally:
                    p.kill()
                    p.wait()
                rows.append(dict(size_k=size_k, driver=driver, sink=kind, msgs=N if rc == 0 else 0,
                                 wall=wall, cpu=cpu, sys=sys_s, rc=rc, why=why))
    lines = []
    out = lines.append
    out("sink cpu s/10k is user+sys of the sink; kernel s/10k its sys part alone. The floor's kernel share")
    out("against smtp-sink's whole CPU is the least ratio any receiver built this way can reach.")
    out("")
    out(f"{'size':>5} {'driver':<12} {'sink':<10} {'msg/s':>9} {'sink cpu s/10k':>14} {'kernel s/10k':>12} {'cpu vs smtp-sink':>16} {'kernel vs smtp-sink cpu':>23}")
    base = {(r["size_k"], r["driver"]): r for r in rows if r["sink"] == "smtp-sink"}
    for r in rows:
        r["rate"] = r["msgs"] / r["wall"] if r["msgs"] else 0
        r["cpu10k"] = r["cpu"] / r["msgs"] * 10000 if r["msgs"] else float("nan")
        r["sys10k"] = r["sys"] / r["msgs"] * 10000 if r["msgs"] else float("nan")
        b = base[(r["size_k"], r["driver"])]
        ratio = r["cpu10k"] / b["cpu10k"] if b["msgs"] and b["cpu10k"] else float("nan")
        kratio = r["sys10k"] / b["cpu10k"] if b["msgs"] and b["cpu10k"] else float("nan")
        note = "" if r["rc"] == 0 else f"  (driver exit {r['rc']}{': ' + r['why'] if r['why'] else ''})"
        out(f"{r['size_k']:>4}k {r['driver']:<12} {r['sink']:<10} {r['rate']:>9.0f} {r['cpu10k']:>14.3f} {r['sys10k']:>12.3f} "
            f"{ratio:>15.2f}x {kratio:>22.2f}x{note}")
    out("")
    probe_data = float(subprocess.run([PROBE, "data", "64", "200000", "1024"], capture_output=True, text=True).stdout)
    probe_bdat = float(subprocess.run([PROBE, "bdat", "64", "200000", "1024"], capture_output=True, text=True).stdout)
    pair = {}
    for mode, extra in (("data", []), ("bdat", ["--chunking"])):
        p, port = start_sink("mailbench", tmp)
        try:
            path = os.path.join(tmp, "pair.json")
            subprocess.run([MB, "send", f"127.0.0.1:{port}", "-c", "64", "-n", "200000", "--size", "1k", "-q", "--json", path] + extra,
                           stdout=subprocess.DEVNULL, check=True, timeout=600)
            pair[mode] = json.load(open(path))["summary"]["msgs_per_sec"]
        finally:
            p.kill()
            p.wait()
    out(f"loopback probe (64 conns, 1 KB): DATA {probe_data:.0f} msg/s, whole transaction in one write {probe_bdat:.0f} msg/s")
    out(f"mailbench send -> mailbench sink: DATA (pipelined groups) {pair['data']:.0f} msg/s = {pair['data'] / probe_data * 100:.0f} % of the DATA probe, "
        f"{pair['data'] / probe_bdat * 100:.0f} % of the one-write probe; BDAT {pair['bdat']:.0f} msg/s = {pair['bdat'] / probe_bdat * 100:.0f} % of the one-write probe")
    print("\n".join(lines), flush=True)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    count = min(20000, limit - 64)
    rss, fds = idle_connections(count)
    more = f"{count} idle connections ({fds} descriptors open in the sink): mailbench sink RSS {rss / 1024:.1f} MiB"
    if count < 20000:
        more += f" (the descriptor limit here is {limit}, so 20,000 cannot be opened)"
    print(more)
    lines.append(more)
    churn = churn_rss(100_000 if QUICK else 500_000)
    more = "mailbench sink RSS after smtp-source's short sessions (one message each): " + ", ".join(
        f"{n:,}: {kib / 1024:.1f} MiB" for n, kib in churn)
    print(more)
    lines.append(more)
    text = "\n".join(lines)
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "sink-summary.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(OUT, "sink-raw.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
