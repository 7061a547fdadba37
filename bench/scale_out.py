#!/usr/bin/env python3
"""Scale-out benchmark (issue 16), two parts.

1. N local agents (`send --shard I/N`, one thread each, a shared --start-at and
   --run-id) against one `mailbench sink`, beside one agent with `--threads N` doing the
   same run, in alternating rounds: total accepted messages per minute of each, the ratio,
   and whether the merged counts and the sink's view are exact. Expect roughly equal: the
   point is that splitting and merging cost nothing and lose nothing.
2. `mailbench merge` of 16 agent files of one hour each (3,600 one-second points with
   their histograms; made by examples/hour_agents.rs, since no agent can run an hour
   here): wall time and peak memory of the merge.

Usage: bench/scale_out.py [--agents N] [--messages N] [--rounds N] [--files N] [--out DIR]
Build first: cargo build --release --bins --examples. Everything targets 127.0.0.1.
"""
import json, os, subprocess, sys, time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import arg, emit, free_port, scratch, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
HOUR = os.path.join(ROOT, "target", "release", "examples", "hour_agents")
AGENTS = arg("--agents", 2)
MESSAGES = arg("--messages", 60000)
ROUNDS = arg("--rounds", 3)
FILES = arg("--files", 16)
OUT = arg("--out", "") or None
TMP = scratch("mailbench-scale-")


def load(path):
    with open(path) as f:
        return json.load(f)


def start_sink(run):
    port = free_port()
    json_path = os.path.join(TMP, f"sink-{run}.json")
    p = subprocess.Popen([MB, "sink", "--listen", f"127.0.0.1:{port}", "-q", "--json", json_path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, "mailbench sink")
    return p, port, json_path


def stop_sink(p):
    p.terminate()
    p.wait(timeout=30)


def verdict(sink, sink_json, results_path, run_id):
    """Stops the sink; the run's accepted MPM and whether the generator's and the sink's
    counts are exact (every message accepted, seen once, none missing)."""
    stop_sink(sink)
    r, s = load(results_path), load(sink_json)
    seen = s["extra"]["runs"].get(f"{int(run_id, 16):016x}", {})
    accepted = r["summary"]["accepted"]
    return {
        "mpm": r["summary"]["mpm"],
        "accepted": accepted,
        "exact": (accepted == MESSAGES and seen.get("distinct") == MESSAGES
                  and seen.get("missing_count") == 0 and seen.get("duplicates") == 0),
    }


def send_args(port, run_id, json_path):
    return [MB, "send", f"127.0.0.1:{port}", "-n", str(MESSAGES), "-c", "64", "--size", "1k",
            "--run-id", run_id, "--json", json_path, "-q"]


def split_run(rnd):
    """N agents of one thread each; the merged accepted MPM and the sink's view."""
    sink, port, sink_json = start_sink(f"split-{rnd}")
    run_id = f"5ca1e{rnd:03x}"
    start = (datetime.now(timezone.utc) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    files = [os.path.join(TMP, f"agent-{rnd}-{i}.json") for i in range(AGENTS)]
    procs = [subprocess.Popen([MB, "--threads", "1"] + send_args(port, run_id, f)[1:] +
                              ["--shard", f"{i}/{AGENTS}", "--start-at", start],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i, f in enumerate(files)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"an agent failed: {err.decode()}")
    merged = os.path.join(TMP, f"merged-{rnd}.json")
    t0 = time.time()
    out = subprocess.run([MB, "merge", *files, "-o", merged], capture_output=True, text=True)
    merge_s = time.time() - t0
    if out.returncode != 0:
        raise SystemExit(f"merge failed: {out.stderr}")
    return {**verdict(sink, sink_json, merged, run_id), "merge_s": merge_s}


def threaded_run(rnd):
    """One agent with --threads N."""
    sink, port, sink_json = start_sink(f"one-{rnd}")
    run_id = f"0e{rnd:03x}"
    path = os.path.join(TMP, f"one-{rnd}.json")
    cmd = [MB, "--threads", str(AGENTS)] + send_args(port, run_id, path)[1:]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"the threaded agent failed: {out.stderr}")
    return verdict(sink, sink_json, path, run_id)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def part_one():
    lines = [f"== {AGENTS} agents (--shard I/{AGENTS}, --threads 1 each) vs one agent --threads {AGENTS}: "
             f"{MESSAGES} x 1 KiB, -c 64 in all, one mailbench sink, {ROUNDS} rounds alternating\n",
             f"{'round':>5} {'method':<28} {'accepted MPM':>13} {'exact':>6} {'merge s':>8}\n"]
    split, one = [], []
    for rnd in range(ROUNDS):
        order = [("split", split_run), ("threads", threaded_run)]
        if rnd % 2:
            order.reverse()
        for name, fn in order:
            r = fn(rnd)
            (split if name == "split" else one).append(r)
            label = f"{AGENTS} agents merged" if name == "split" else f"1 agent --threads {AGENTS}"
            ms = f"{r['merge_s']:.3f}" if "merge_s" in r else "-"
            lines.append(f"{rnd + 1:>5} {label:<28} {r['mpm']:>13.0f} {str(r['exact']):>6} {ms:>8}\n")
    ratios = [s["mpm"] / o["mpm"] for s, o in zip(split, one)]
    lines.append(f"agents / threads MPM per round: {', '.join(f'{x:.2f}x' for x in ratios)}; median {median(ratios):.2f}x\n")
    lines.append(f"every count exact: {all(r['exact'] for r in split + one)}\n\n")
    return "".join(lines)


def peak_rss_of(cmd):
    """Runs `cmd`; its wall time and peak RSS (KiB) from GNU time."""
    t0 = time.time()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    wall = time.time() - t0
    if out.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {out.stderr}")
    return wall, int(out.stderr.strip().splitlines()[-1])


def part_two():
    d = os.path.join(TMP, "hour")
    subprocess.run([HOUR, d, str(FILES), "100", "3600"], check=True)
    files = sorted(os.path.join(d, f) for f in os.listdir(d))
    size_mib = sum(os.path.getsize(f) for f in files) / 2**20
    merged = os.path.join(TMP, "hour-merged.json")
    wall, rss = peak_rss_of([MB, "merge", *files, "-o", merged])
    m = load(merged)
    expected = FILES * 100 * 3600
    return (f"== merge of {FILES} agent files of one hour each (3600 points, 100 msgs/s, synthetic: examples/hour_agents.rs), "
            f"{size_mib:.1f} MiB of JSON in all\n"
            f"merge wall {wall:.2f} s, peak RSS {rss / 1024:.1f} MiB; merged accepted {m['summary']['accepted']} "
            f"(expected {expected}), {len(m['series'])} series points, merged file {os.path.getsize(merged) / 2**20:.1f} MiB\n")


def main():
    for p in (MB, HOUR):
        if not os.path.exists(p):
            raise SystemExit(f"{p} is missing: cargo build --release --bins --examples")
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("/usr/bin/time is missing (it measures the merge's peak memory): apt-get install time")
    text = part_one() + part_two()
    emit(text, OUT, "scale_out.txt")


if __name__ == "__main__":
    main()
