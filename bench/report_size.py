#!/usr/bin/env python3
"""`mailbench report` on a one-hour relay results file: generation time, HTML size and the
time headless Chromium takes to draw it (the page records it in `data-render-ms`).

The file is made from a real `relay --lab postfix` run (a two-level concurrency sweep, so
every section has data) whose series is stretched to 3,600 one-second intervals with a
random walk on every figure, plus error rows, thresholds and warnings. Targets: under 2 MB
and under one second to draw.

Usage: bench/report_size.py [--reps 5] [--out DIR]
"""
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, "target", "release", "mailbench")
CHROMIUM = "/usr/bin/chromium-headless-shell"


def one_hour(real, seed):
    """The real run's document with its series stretched to 3,600 intervals."""
    rnd = random.Random(seed)
    doc = json.loads(json.dumps(real))
    template = [p for p in real["series"] if "sut" in p] or real["series"]
    walk = 1.0
    series = []
    for i in range(3600):
        walk = min(1.5, max(0.5, walk + rnd.uniform(-0.03, 0.03)))
        p = json.loads(json.dumps(template[i % len(template)]))
        p["t_s"], p["dt_s"] = float(i + 1), 1.0
        for k in ("msgs_per_sec", "p50_ms", "p99_ms", "lag_p99_ms", "e2e_p99_ms", "cpu_pct"):
            if isinstance(p.get(k), (int, float)):
                p[k] = p[k] * walk
        p["delivered"] = int(p.get("delivered", 0) * walk)
        p["backlog"] = int(abs(p.get("backlog", 0) * walk))
        p["queue"] = float(p["backlog"])
        p["rejected"] = rnd.randint(0, 3)
        if "sut" in p:
            for k in ("cpu_user_pct", "cpu_sys_pct", "read_kib_s", "write_kib_s"):
                p["sut"][k] *= walk
        series.append(p)
    doc["series"] = series
    doc["duration_s"] = 3600.0
    doc["errors"] = [
        {"class": "rejected_4xx", "phase": "rcpt", "code": 451, "count": 1234,
         "sample": "451 4.3.0 Temporary lookup failure"},
        {"class": "timeout", "phase": "data_end", "code": 0, "count": 5},
    ]
    doc["thresholds"] = [
        {"expr": "p99(total)<500ms", "value": 42.0, "ok": True},
        {"expr": "lost==0", "value": 0.0, "ok": True},
    ]
    doc["self"]["warnings"] = ["example warning kept with the run"]
    return doc


def render_ms(html):
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={benchlib.scratch('chromium-')}", "--virtual-time-budget=20000",
         "--dump-dom", "file://" + html],
        capture_output=True, text=True, check=True).stdout
    body = re.search(r"<body[^>]*>", out).group(0)
    status = re.search(r'data-report-status="([^"]*)"', body).group(1)
    ms = int(re.search(r'data-render-ms="(\d+)"', body).group(1))
    charts = int(re.search(r'data-charts="(\d+)"', body).group(1))
    return status, ms, charts


def main():
    reps = benchlib.arg("--reps", 5)
    out_dir = benchlib.arg("--out", "")
    tmp = benchlib.scratch("mb-report-")
    real_path = os.path.join(tmp, "real.json")
    subprocess.run(
        [MB, "relay", "--lab", "postfix", "-q", "-n", "3000", "-c", "4,16", "--size", "4k",
         "--interval", "200ms", "--json", real_path], check=True, stdout=subprocess.DEVNULL)
    real = json.load(open(real_path))
    files = []
    for seed in (1, 2):
        path = os.path.join(tmp, f"hour{seed}.json")
        json.dump(one_hour(real, seed), open(path, "w"))
        files.append(path)
    lines = ["# report: a one-hour relay results file (3,600 one-second intervals, every section)",
             "", f"{'input':<26}{'json MB':>9}{'html MB':>9}{'generate s':>12}{'draw ms':>9}{'charts':>8}"]
    for name, inputs in (("one run", files[:1]), ("two runs overlaid", files)):
        html = os.path.join(tmp, name.replace(" ", "-") + ".html")
        gen = []
        for _ in range(reps):
            t = time.perf_counter()
            subprocess.run([MB, "report", *inputs, "-o", html], check=True, stdout=subprocess.DEVNULL)
            gen.append(time.perf_counter() - t)
        draws = [render_ms(html) for _ in range(3)]
        assert all(s == "ok" for s, _, _ in draws), draws
        json_mb = sum(os.path.getsize(f) for f in inputs) / 1e6
        lines.append(f"{name:<26}{json_mb:>9.2f}{os.path.getsize(html) / 1e6:>9.2f}"
                     f"{statistics.median(gen):>12.3f}{statistics.median(d[1] for d in draws):>9.0f}"
                     f"{draws[0][2]:>8}")
    lines += ["", f"medians of {reps} generations and 3 draws; targets: html under 2 MB, drawn under 1,000 ms"]
    text = "\n".join(lines) + "\n"
    benchlib.emit(text, out_dir, "report_size.txt")


if __name__ == "__main__":
    main()
