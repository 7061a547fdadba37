#!/usr/bin/env bash
# Runs one split send on a Slurm cluster: a fresh run id and a start START_IN seconds
# ahead (default 60: time for every task to be scheduled), the agents as a job array of
# send.sbatch, the merge as a job that depends on all of them; waits for the merge and
# prints the merged summary. Extra sbatch options come from the environment, as sbatch
# reads them (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...).
#
# Usage: deploy/slurm/run.sh AGENTS MTA_HOST:PORT RESULTS_DIR [SEND FLAGS...]
#   e.g. deploy/slurm/run.sh 4 mta.test:25 /shared/mb/run1 --rate 4000/s -z 10m -c 256
set -euo pipefail

die() {
  echo "run.sh: $*" >&2
  exit 1
}
[ $# -ge 3 ] ||
  die "usage: $0 AGENTS MTA_HOST:PORT RESULTS_DIR [SEND FLAGS...] (RESULTS_DIR on a file system every node mounts)"
agents=$1 target=$2 results=$3
shift 3
[[ $agents =~ ^[1-9][0-9]*$ ]] || die "AGENTS $agents: give a whole number of agents, 1 or more"
lead=${START_IN:-60}
[[ $lead =~ ^[0-9]+$ ]] || die "START_IN=$lead: give whole seconds"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$results"
results=$(cd "$results" && pwd)
if compgen -G "$results/agent-*.json" >/dev/null; then
  die "$results already holds agent-*.json: give each run an empty RESULTS_DIR"
fi
run_id=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
start_at=$(date -u -d "+$lead seconds" +%Y-%m-%dT%H:%M:%S.%3NZ)
echo "run id $run_id, $agents agents, start at $start_at, target $target, results in $results"
array=$(sbatch --parsable --array="0-$((agents - 1))" --output="$results/%x-%A_%a.out" \
  "$here/send.sbatch" "$results" "$run_id" "$start_at" "$target" "$@")
array=${array%%;*} # "id;cluster" on a federation
echo "agents: job array $array (squeue -j $array; scancel $array stops them)"
# sbatch --wait returns the merge's exit code (3: a --threshold failed on the merged run),
# but 0 when the merge was cancelled unstarted because an agent failed: its log says which.
set +e
merge=$(sbatch --parsable --wait --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$results/%x-%j.out" "$here/merge.sbatch" "$results")
code=$?
set -e
log="$results/mailbench-merge-${merge%%;*}.out"
[ -s "$log" ] ||
  die "an agent failed, so the merge did not run: see $results/mailbench-send-${array}_*.out"
cat "$log"
exit $code
