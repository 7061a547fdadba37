#!/usr/bin/env python3
"""Side-by-side benchmark: smtp-source, postal and `mailbench send` into the same
Postfix smtp-sink, for 1 KB and 25 KB messages, 1/16/64/256 sessions, with and without
connection reuse. Prints messages/s and generator CPU seconds per 10,000 messages
(user+sys of the generator process) and the ratios against smtp-source. Beside them runs
`floor`, the cheapest client of mailbench's design (examples/floor_client.rs: the same
exchange and runtime, precomputed bytes, no parsing or statistics): what the kernel and
the runtime cost per message, the least any client built this way can spend. Then checks
that mailbench holds 10,000 concurrent connections in little memory.

Usage: bench/send_vs_peers.py [--quick] [--no-postal] [--reps N] [--out DIR]
(postal only reports per wall-clock minute, so each postal run takes up to a minute.)
Everything targets 127.0.0.1 and every run is bounded in count and time.
"""
import atexit, json, os, resource, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, flag, free_port, proc_cpu, scratch, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
FLOOR = os.path.join(ROOT, "target", "release", "examples", "floor_client")
QUICK = flag("--quick")
NO_POSTAL = flag("--no-postal")
# Runs per tool and case, in rotating order; the report shows the median. One session is
# the noisiest case (every message is a sleep and a wake-up of each process).
REPS = arg("--reps", 1)
USERS = os.path.join(tempfile.gettempdir(), f"mailbench-bench-users-{os.getpid()}.txt")
OUT = arg("--out", "") or None

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))




def start_sink():
    port = free_port()
    args = ["/usr/sbin/smtp-sink"]
    if os.getuid() == 0:
        args += ["-u", "nobody"]
    p = subprocess.Popen(args + [f"127.0.0.1:{port}", "4096"], stdout=subprocess.DEVNULL)
    wait_port(port, "smtp-sink")
    return p, port


def timed(cmd, timeout=300):
    """Runs cmd; returns (wall seconds, cpu seconds of the child, stdout)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, ru, out.decode(errors="replace"), err.decode(errors="replace"), p.returncode


def run_counted(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, after, out, err, rc = timed(cmd)
    sys_s = after.ru_stime - before.ru_stime
    cpu = (after.ru_utime - before.ru_utime) + sys_s
    return wall, (cpu, sys_s), out, err, rc




def run_postal(port, sessions, size_k, reuse):
    """postal has no message count and prints only at wall-clock minute boundaries (and not
    on SIGINT), so it runs until its first line: the messages from its start to the next
    minute boundary. Its CPU is read from /proc at that moment."""
    # Start at least 10 s before a boundary so the measured stretch is long enough.
    if 60 - time.time() % 60 < 10:
        time.sleep(60 - time.time() % 60 + 0.2)
    cmd = ["stdbuf", "-oL", "postal", "-p", str(port), "-t", str(sessions), "-m", str(size_k), "-M", str(size_k),
           "-c", "1000000" if reuse else "1", "127.0.0.1", USERS]
    t0 = time.time()
    # postal writes postal.log into its working directory: keep it out of the tree.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    msgs, cpu, wall = 0, float("nan"), float("nan")
    try:
        header = p.stdout.readline()
        line = p.stdout.readline().decode(errors="replace")
        wall = time.time() - t0
        cpu = proc_cpu(p.pid)
        parts = line.split(",")
        if header and len(parts) >= 2 and parts[1].isdigit():
            msgs = int(parts[1])
    finally:
        p.kill()
        p.wait()
    return wall, cpu, msgs


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bins", "--examples"], cwd=ROOT, check=True)
    sink, port = start_sink()
    target = f"127.0.0.1:{port}"
    tmp = scratch("mailbench-bench-")
    atexit.register(lambda: os.path.exists(USERS) and os.remove(USERS))
    with open(USERS, "w") as f:
        f.write("rcpt@example.com\n")
    rows = []
    sizes = [1, 25]
    sessions_list = [1, 16, 64, 256] if not QUICK else [16, 64]
    try:
        for size_k in sizes:
            for reuse in (True, False):
                for sessions in sessions_list:
                    n = 10000 if reuse else 4000
                    if QUICK:
                        n //= 2
                    # smtp-source -l is the payload without its ~100 header bytes.
                    src = ["smtp-source", "-s", str(sessions), "-m", str(n), "-l", str(size_k * 1024 - 100)]
                    if reuse:
                        src.append("-d")
                    mb = [MB, "send", target, "-n", str(n), "-c", str(sessions), "--size", f"{size_k}k", "-q",
                          "--json", os.path.join(tmp, "r.json")]
                    if not reuse:
                        mb += ["--per-conn", "1"]
                    floor = [FLOOR, target, str(sessions), str(n), str(size_k * 1024), "reuse" if reuse else "noreuse"]
                    case = dict(size_k=size_k, reuse=reuse, sessions=sessions)
                    for rep in range(REPS):
                        order = ["smtp-source", "mailbench", "floor"]
                        order = order[rep % 3:] + order[:rep % 3]
                        for tool in order:
                            if tool == "smtp-source":
                                w, c, _, err, rc = run_counted(src + [target])
                                msgs = n if rc == 0 else 0
                            elif tool == "mailbench":
                                w, c, _, err, rc = run_counted(mb)
                                r = json.load(open(os.path.join(tmp, "r.json")))
                                msgs, w = r["summary"]["accepted"], r["duration_s"]
                            else:
                                w, c, out, err, rc = run_counted(floor)
                                msgs = int(out.strip() or 0) if rc == 0 else 0
                            rows.append(dict(tool=tool, rep=rep, msgs=msgs, wall=w, cpu=c[0], sys=c[1],
                                             note=err.strip()[:80], **case))
                    if sessions <= 64 and not NO_POSTAL:
                        w, c, msgs = run_postal(port, sessions, size_k, reuse)
                        rows.append(dict(tool="postal", rep=0, msgs=msgs, wall=w, cpu=c, sys=float("nan"),
                                         note="until its first minute line", **case))
        mem = memory_check(target, tmp)
    finally:
        sink.kill()
    report(rows, mem)


def memory_check(target, tmp):
    path = os.path.join(tmp, "mem.json")
    n_conn = 10000
    cmd = [MB, "send", target, "-c", str(n_conn), "-n", str(2 * n_conn), "--size", "1k", "-q",
           "--connect-timeout", "30s", "--json", path]
    _, cpu, out, err, rc = run_counted(cmd)
    r = json.load(open(path))
    return dict(connections=r["counters"]["connections"], accepted=r["summary"]["accepted"],
                peak_rss_mib=r["self"]["peak_rss_kib"] / 1024, errors=r["summary"]["errors"])


def report(rows, mem):
    lines = []
    p = lines.append
    p("cpu s/10k is user+sys of the generator; kernel s/10k its sys part alone. The floor's kernel")
    p("share against smtp-source's whole CPU is the least ratio any client built this way can reach.")
    p(f"Each figure is the median of {REPS} run(s) per tool, in rotating order.")
    p("")
    p(f"{'size':>5} {'reuse':>5} {'sess':>4}  {'tool':<12} {'msgs':>6} {'msg/s':>9} {'cpu s/10k':>9} {'kernel s/10k':>12}  {'rate vs src':>11} {'cpu vs src':>10} {'kernel vs src cpu':>17}")
    for r in rows:
        r["rate"] = r["msgs"] / r["wall"] if r["wall"] > 0 else 0
        r["cpu10k"] = r["cpu"] / r["msgs"] * 10000 if r["msgs"] else float("nan")
        r["sys10k"] = r["sys"] / r["msgs"] * 10000 if r["msgs"] else float("nan")
    # The median over repetitions, per case and tool, in the order first run.
    groups = {}
    for r in rows:
        groups.setdefault((r["size_k"], r["reuse"], r["sessions"], r["tool"]), []).append(r)

    def median(v):
        v = sorted(v)
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2

    agg = [dict(g[0], rate=median([r["rate"] for r in g]), cpu10k=median([r["cpu10k"] for r in g]),
                sys10k=median([r["sys10k"] for r in g]), reps=len(g)) for g in groups.values()]
    base = {(r["size_k"], r["reuse"], r["sessions"]): r for r in agg if r["tool"] == "smtp-source"}
    for r in agg:
        b = base.get((r["size_k"], r["reuse"], r["sessions"]))
        rr = r["rate"] / b["rate"] if b and b["rate"] else float("nan")
        cr = r["cpu10k"] / b["cpu10k"] if b and b["msgs"] else float("nan")
        kr = r["sys10k"] / b["cpu10k"] if b and b["msgs"] else float("nan")
        p(f"{r['size_k']:>4}k {('yes' if r['reuse'] else 'no'):>5} {r['sessions']:>4}  {r['tool']:<12} {r['msgs']:>6} "
          f"{r['rate']:>9.0f} {r['cpu10k']:>9.3f} {r['sys10k']:>12.3f}  {rr:>10.2f}x {cr:>9.2f}x {kr:>16.2f}x")
    p("")
    p(f"memory: {mem['connections']} connections opened, {mem['accepted']} accepted, "
      f"{mem['errors']} errors, peak RSS {mem['peak_rss_mib']:.1f} MiB")
    text = "\n".join(lines)
    print(text)
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "summary.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(OUT, "raw.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
            f.write(json.dumps(dict(memory=mem)) + "\n")


if __name__ == "__main__":
    main()
