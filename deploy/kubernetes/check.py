#!/usr/bin/env python3
"""Checks the Kubernetes manifests offline (no cluster is needed, none is reachable here).

1. Schema: every document against the Kubernetes OpenAPI schemas bundled in the
   kubernetes-validate package, strictly (unknown fields and wrong types fail).
2. Meaning, which the schema lets through (an enum typo such as `completionMode: Indexd`
   is a valid string): an agents' Job is Indexed, runs all its agents at once
   (completions == parallelism == the N of --shard auto/N), never retries an agent
   (backoffLimit 0, restartPolicy Never), gives every agent the shared --start-at and
   --run-id, and names each agent's results file by its index variable.

Usage: check.py FILE.yaml...   Exit 0 when all hold; otherwise one line per problem, exit 1.
"""
import sys

import kubernetes_validate
import yaml

KUBERNETES = "1.30.0"


def meaning(doc):
    """Problems of an agents' Job (a Job whose container runs `send --shard`)."""
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    problems = []
    for c in pod.get("containers", []):
        args = [str(a) for a in c.get("args", [])]
        if "--shard" not in args:
            continue
        shard = args[args.index("--shard") + 1] if args.index("--shard") + 1 < len(args) else ""
        if spec.get("completionMode") != "Indexed":
            problems.append(f"completionMode is {spec.get('completionMode')!r}, not 'Indexed': pods get no JOB_COMPLETION_INDEX")
        if not shard.startswith("auto/"):
            problems.append(f"--shard {shard}: give auto/N so that each pod takes its index from JOB_COMPLETION_INDEX")
        else:
            n = shard.split("/", 1)[1]
            if str(spec.get("completions")) != n or str(spec.get("parallelism")) != n:
                problems.append(
                    f"completions {spec.get('completions')} and parallelism {spec.get('parallelism')} must both equal the {n} agents of --shard {shard} (all run at once)"
                )
        if spec.get("backoffLimit") != 0:
            problems.append(f"backoffLimit is {spec.get('backoffLimit')}, not 0: a retried agent would send its stripe again, late")
        if pod.get("restartPolicy") != "Never":
            problems.append(f"restartPolicy is {pod.get('restartPolicy')!r}, not 'Never': a restarted agent would send its stripe again")
        for flag in ("--start-at", "--run-id"):
            if flag not in args:
                problems.append(f"{flag} is missing: agents must share it")
        json_at = args.index("--json") + 1 if "--json" in args else None
        if json_at is None or "$(JOB_COMPLETION_INDEX)" not in args[json_at]:
            problems.append("--json must name each agent's file by $(JOB_COMPLETION_INDEX), or the agents overwrite each other")
    return problems


def main(paths):
    problems = []
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            name = f"{path}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
            try:
                kubernetes_validate.validate(doc, KUBERNETES, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = ".".join(str(p) for p in e.path)
                problems.append(f"{name}: {where}: {e.message}")
            if doc.get("kind") == "Job":
                problems += [f"{name}: {p}" for p in meaning(doc)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
