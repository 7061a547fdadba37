#!/usr/bin/env python3
"""The same lab MTA, the same messages, sessions and queue, measured twice in one run:
by `mailbench relay --lab MTA`, and by the classic method (smtp-source into a lab MTA
whose relay is smtp-sink, the queue polled until empty). Prints both MPMs, both tools'
CPU seconds, the MTA's own CPU seconds (its process tree, exited children included, taken
the same way for both), and how far each count is from the MTA's own log.

Usage: bench/relay_vs_classic.py [--mta postfix|exim|opensmtpd|sendmail] [-n 10000]
       [--size-k 25] [--sessions 64] [--rounds 8] [--queue tmpfs|disk] [--out DIR]
Both relay smtp-source's own message (caught once by a storing sink), as the method asks
for the same messages. Each round runs both methods on fresh labs, alternating which goes first, because two runs
of the same method on this shared machine differ by up to 20 %; the verdict is the median
of the per-round ratios (an even number of rounds balances the order; 8 rounds, as 4 gave
medians from 0.95x to 1.11x on this machine). Needs root and Postfix. Loopback only; every run is bounded.
"""
import json, os, resource, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, free_port, proc_cpu, scratch, tree_cpu, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")


N, SIZE_K, SESSIONS, ROUNDS = arg("-n", 10000), arg("--size-k", 25), arg("--sessions", 64), arg("--rounds", 8)
OUT, MTA, QUEUE = arg("--out", ""), arg("--mta", "postfix"), arg("--queue", "tmpfs")


def count_files(top, keep):
    n = 0
    for _, _, files in os.walk(top):
        n += sum(1 for f in files if keep(f))
    return n


# Per MTA: its log's name and delivery lines, how to count its queue (from the lab's
# directory), and its daemon's pid file. The same readings the labs make.
MTAS = {
    "postfix": dict(log="maillog", sent=lambda l: "status=sent" in l,
                    queued=lambda d, q: sum(count_files(os.path.join(q, s), lambda f: True)
                                            for s in ("incoming", "active", "deferred")),
                    pid=lambda d, q: os.path.join(q, "pid", "master.pid")),
    "exim": dict(log="mainlog", sent=lambda l: " => " in l or " -> " in l,
                 queued=lambda d, q: count_files(os.path.join(q, "input"), lambda f: f.endswith("-H")),
                 pid=lambda d, q: os.path.join(d, "daemon.pid")),
    "opensmtpd": dict(log="maillog", sent=lambda l: "mta delivery" in l and 'result="Ok"' in l,
                      queued=lambda d, q: sum(count_files(os.path.join(q, s), lambda f: f == "message")
                                              for s in ("incoming", "queue")),
                      pid=lambda d, q: os.path.join(d, "daemon.pid")),
    "sendmail": dict(log="maillog", sent=lambda l: "stat=Sent" in l,
                     queued=lambda d, q: count_files(q, lambda f: f.startswith("qf")),
                     pid=lambda d, q: os.path.join(d, "daemon.pid")),
}




def cpu_children():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime




def smtp_source_message(tmp):
    """The message smtp-source sends, caught by a storing mailbench sink, so that both
    methods relay the same content (mailbench adds only its trace header)."""
    port = free_port()
    store = os.path.join(tmp, "caught")
    sink = subprocess.Popen([MB, "sink", "--listen", f"127.0.0.1:{port}", "-q", "--store", f"dir:{store}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, "mailbench sink")
        subprocess.run(["smtp-source", "-m", "1", "-l", str(SIZE_K * 1024 - 100), f"127.0.0.1:{port}"], check=True)
    finally:
        sink.terminate()
        sink.wait()
    [name] = os.listdir(store)
    raw = open(os.path.join(store, name), "rb").read()
    body = b"".join(l for l in raw.splitlines(keepends=True) if not l.startswith(b"X-Mailbench-"))
    path = os.path.join(tmp, "smtp-source.eml")
    open(path, "wb").write(body)
    return path


def mailbench_relay(tmp, body):
    path = os.path.join(tmp, "relay.json")
    c0 = cpu_children()
    subprocess.run([MB, "relay", "--lab", MTA, "--queue", QUEUE, "-n", str(N), "-c", str(SESSIONS), "--body", body,
                    "-q", "--json", path], check=True, stdout=subprocess.DEVNULL)
    with_lab = cpu_children() - c0
    r = json.load(open(path))
    s = r["summary"]
    # The tool's own CPU over the run (injection and drain), as mailbench reports it: the
    # process total above also holds `postfix start/stop` and the lab's setup, which the
    # classic method's lab (started outside the measurement) does not count either.
    cpu = r["self"]["cpu_user_s"] + r["self"]["cpu_sys_s"]
    assert cpu <= with_lab, (cpu, with_lab)
    return dict(method="mailbench relay", mpm=s["drain_mpm"], inject_mpm=s["inject_mpm"], delivered=s["delivered"],
                maillog=s["maillog_sent"], tool_cpu=cpu, sut_cpu=r["extra"]["sut"]["cpu_user_s"] + r["extra"]["sut"]["cpu_sys_s"])


def classic(tmp):
    """smtp-source → lab MTA → smtp-sink; MPM = messages / (queue empty − start) × 60."""
    m = MTAS[MTA]
    sink_port = free_port()
    sink = subprocess.Popen(["/usr/sbin/smtp-sink", "-u", "nobody", f"127.0.0.1:{sink_port}", "4096"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lab = subprocess.Popen([MB, "lab", MTA, "--queue", QUEUE, "--relay", f"127.0.0.1:{sink_port}"],
                           stdout=subprocess.PIPE, text=True)
    entry, confdir = None, None
    for line in lab.stdout:
        if line.startswith(f"{MTA} 0:"):
            # "postfix 0: smtpd on ADDR, config DIR" or "exim 0: listens on ADDR, config and log in DIR"
            entry = line.split(" on ")[1].split(",")[0]
            confdir = line.split(" in ")[-1].strip() if " log in " in line else line.split("config ")[1].strip()
        if line.startswith("relaying to"):
            break
    try:
        if MTA == "postfix":
            qdir = [l.split("=", 1)[1].strip() for l in open(os.path.join(confdir, "main.cf"))
                    if l.startswith("queue_directory")][0]
        else:
            qdir = os.path.join(confdir, "queue")
        master = int(open(m["pid"](confdir, qdir)).read().split()[0])
        mta0 = tree_cpu(master)
        c0 = cpu_children()
        t0 = time.monotonic()
        subprocess.run(["smtp-source", "-s", str(SESSIONS), "-m", str(N), "-l", str(SIZE_K * 1024 - 100), "-d", entry],
                       check=True, stdout=subprocess.DEVNULL, timeout=600)
        inject_s = time.monotonic() - t0
        src_cpu = cpu_children() - c0
        # The stopwatch on mailq: poll until the queue is empty.
        while m["queued"](confdir, qdir) > 0 and time.monotonic() - t0 < 600:
            time.sleep(0.05)
        drain_s = time.monotonic() - t0
        mta_cpu = tree_cpu(master) - mta0
        sink_cpu = proc_cpu(sink.pid)
        maillog = sum(1 for l in open(os.path.join(confdir, m["log"]), errors="replace") if m["sent"](l))
    finally:
        lab.send_signal(2)
        lab.wait(timeout=60)
        sink.kill()
        sink.wait()
    return dict(method="classic (smtp-source + smtp-sink + queue poll)", mpm=N / drain_s * 60, inject_mpm=N / inject_s * 60,
                delivered=None, maillog=maillog, tool_cpu=src_cpu + sink_cpu, sut_cpu=mta_cpu)


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    tmp = scratch("mailbench-relaybench-")
    body = smtp_source_message(tmp)
    lines = [f"{N} x {SIZE_K} KiB (smtp-source's message for both; mailbench adds its trace header), "
             f"{SESSIONS} sessions, lab {MTA} with {QUEUE} queue, {ROUNDS} rounds, "
             "both methods in each round (alternating which goes first)", ""]
    lines.append(f"{'round':>5} {'method':<48} {'drain MPM':>10} {'inject MPM':>11} {'tool cpu s':>10} {'MTA cpu s':>9} {'delivered':>9} {'maillog':>8}")
    mpm_ratios, cpu_ratios, mta_ratios, disagreements = [], [], [], []
    for rnd in range(ROUNDS):
        # C M, M C, C M, M C: whichever goes second in a round did better in trials, so
        # an even number of rounds in this order gives both the same share of each place.
        first_classic = rnd % 2 == 0
        a = classic(tmp) if first_classic else mailbench_relay(tmp, body)
        b = mailbench_relay(tmp, body) if first_classic else classic(tmp)
        c, m = (a, b) if first_classic else (b, a)
        for r in (a, b):
            lines.append(f"{rnd + 1:>5} {r['method']:<48} {r['mpm']:>10.0f} {r['inject_mpm']:>11.0f} {r['tool_cpu']:>10.2f} {r['sut_cpu']:>9.2f} "
                         f"{str(r['delivered']):>9} {r['maillog']:>8}")
        mpm_ratios.append(m["mpm"] / c["mpm"])
        cpu_ratios.append(m["tool_cpu"] / c["tool_cpu"])
        mta_ratios.append(m["sut_cpu"] / c["sut_cpu"])
        disagreements.append((N - c["maillog"], m["delivered"] - m["maillog"], N - m["delivered"]))
    def med(v):
        v = sorted(v)
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
    lines.append("")
    lines.append("drain MPM mailbench / classic per round: " + ", ".join(f"{r:.2f}x" for r in mpm_ratios)
                 + f"; median {med(mpm_ratios):.2f}x")
    lines.append("tool CPU mailbench / classic per round: " + ", ".join(f"{r:.2f}x" for r in cpu_ratios)
                 + f"; median {med(cpu_ratios):.2f}x")
    lines.append(f"{MTA} CPU mailbench / classic per round: " + ", ".join(f"{r:.2f}x" for r in mta_ratios)
                 + f"; median {med(mta_ratios):.2f}x")
    lines.append(f"disagreement with {MTA}'s log per round (classic: sent - logged; mailbench: delivered - logged, "
                 "sent - delivered): " + ", ".join(f"{c}/{m}/{l}" for c, m, l in disagreements))
    text = "\n".join(lines)
    print(text)
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        name = "relay-summary.txt" if MTA == "postfix" else f"relay-summary-{MTA}.txt"
        open(os.path.join(OUT, name), "w").write(text + "\n")


if __name__ == "__main__":
    main()
