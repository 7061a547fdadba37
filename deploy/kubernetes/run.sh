#!/usr/bin/env bash
# Runs one split send on a cluster: fills in a fresh run id, a start a minute ahead (time
# for every agent's pod to be scheduled and pull the image) and the MTA to load, applies
# the agents' Indexed Job, waits for it, runs the merge Job and prints the merged summary.
# Usage: deploy/kubernetes/run.sh MTA_HOST:PORT [NAMESPACE]
set -euo pipefail
target=${1:?usage: $0 MTA_HOST:PORT [NAMESPACE]}
ns=${2:-default}
here=$(dirname "$0")
run_id=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
start_at=$(date -u -d '+60 seconds' +%Y-%m-%dT%H:%M:%SZ)
echo "run id $run_id, start at $start_at, target $target"
kubectl -n "$ns" apply -f "$here/results-pvc.yaml"
kubectl -n "$ns" delete job mailbench-send mailbench-merge --ignore-not-found
sed -e "s/RUN_ID_HERE/$run_id/" -e "s/START_AT_HERE/$start_at/" -e "s/TARGET_HERE/$target/" \
  "$here/send-job.yaml" | kubectl -n "$ns" apply -f -
kubectl -n "$ns" wait --for=condition=complete --timeout=2h job/mailbench-send
kubectl -n "$ns" apply -f "$here/merge-job.yaml"
kubectl -n "$ns" wait --for=condition=complete --timeout=10m job/mailbench-merge
kubectl -n "$ns" logs job/mailbench-merge
