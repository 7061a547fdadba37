#!/usr/bin/env bash
# Runs one send agent in the mailbench image against a sink on this host, beside a second
# agent on the host itself (one split run: --shard 0/2 here, 1/2 in the container, the same
# --run-id and --start-at), merges the two results files, and checks the merge exactly:
# the merged sent/accepted equal the agents' sum and what the sink counted, and every
# latency histogram of the merge is the agents' added bucket by bucket.
# Usage: deploy/container/agent-check.sh [MESSAGES]   (default 1000)
# Environment: IMAGE (default localhost/mailbench:latest), MAILBENCH (the host's binary,
# default target/release/mailbench), PORT (the sink's, default 25925), RUNTIME_FLAGS
# (default: what deploy/container/build.sh found this host needs).
set -euo pipefail

die() {
  echo "agent-check.sh: $*" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
n=${1:-1000}
[[ $n =~ ^[1-9][0-9]*$ ]] || die "MESSAGES $n: give a whole number, 1 or more"
image=${IMAGE:-localhost/mailbench:latest}
mb=${MAILBENCH:-$repo/target/release/mailbench}
port=${PORT:-25925}
[ -x "$mb" ] || die "no host mailbench at $mb: cargo build --release, or set MAILBENCH"
podman image exists "$image" || die "no image $image: run deploy/container/build.sh first"
# The same limits and runtime as build.sh (see there why).
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
nproc=$(cat /proc/sys/kernel/pid_max)
flags=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
if ! timeout 2m podman run --rm "${flags[@]}" --entrypoint /bin/true "$image" >/dev/null 2>&1; then
  global=(--runtime runc)
else
  global=()
fi

out=$(mktemp -d /tmp/mailbench-agent-check.XXXXXX)
chmod 0777 "$out" # the image runs as nobody
sink_pid=
cleanup() { [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true; }
trap cleanup EXIT

"$mb" sink --listen "127.0.0.1:$port" --exit-after-idle 5s -z 5m --json "$out/sink.json" -q \
  >"$out/sink.out" 2>&1 &
sink_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$sink_pid" 2>/dev/null || die "the sink exited at start: $(tail -1 "$out/sink.out")"
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || die "the sink does not listen on 127.0.0.1:$port after 10 s"

run_id=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
start_at=$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%S.%3NZ) # time for the container to start
echo "run $run_id, $n messages from 2 agents (host 0/2, container 1/2) at $start_at, results in $out"
timeout 5m podman "${global[@]}" run --rm "${flags[@]}" --network host -v "$out:/out" "$image" \
  send "127.0.0.1:$port" -n "$n" --shard 1/2 --run-id "$run_id" --start-at "$start_at" \
  --json /out/agent-1.json -q >"$out/agent-1.out" 2>&1 &
container=$!
timeout 5m "$mb" send "127.0.0.1:$port" -n "$n" --shard 0/2 --run-id "$run_id" \
  --start-at "$start_at" --json "$out/agent-0.json" -q >"$out/agent-0.out" 2>&1 ||
  die "the host agent failed: $(tail -1 "$out/agent-0.out")"
wait "$container" || die "the container agent failed: $(tail -1 "$out/agent-1.out")"
timeout 1m tail --pid="$sink_pid" -f /dev/null || die "the sink did not stop 5 s after the last message"
sink_pid=
"$mb" merge "$out/agent-0.json" "$out/agent-1.json" -o "$out/merged.json" >"$out/merge.out" 2>&1 ||
  die "merge failed: $(tail -1 "$out/merge.out")"

python3 - "$out" "$n" <<'PY'
import collections, json, sys
out, n = sys.argv[1], int(sys.argv[2])
load = lambda f: json.load(open(f"{out}/{f}.json"))
a, b, m, sink = load("agent-0"), load("agent-1"), load("merged"), load("sink")
bad = []
for k in ("sent", "accepted", "connections", "rcpts_accepted"):
    if m["summary"][k] != a["summary"][k] + b["summary"][k]:
        bad.append(f"merged {k} {m['summary'][k]} != host {a['summary'][k]} + container {b['summary'][k]}")
if m["summary"]["accepted"] != sink["summary"]["messages"] or m["summary"]["accepted"] != n:
    bad.append(f"merged accepted {m['summary']['accepted']}, sink counted {sink['summary']['messages']}, asked {n}")
for name, h in m["latency"].items():
    want = collections.Counter()
    for agent in (a, b):
        for v, c in agent["latency"].get(name, {}).get("buckets", []):
            want[v] += c
    got = collections.Counter({v: c for v, c in h["buckets"]})
    if got != want:
        bad.append(f"latency {name}: merged buckets differ from the agents' sum")
print(f"host agent accepted {a['summary']['accepted']}, container agent {b['summary']['accepted']}, "
      f"merged {m['summary']['accepted']}, sink counted {sink['summary']['messages']}; "
      f"{len(m['latency'])} latency histograms compared bucket by bucket")
for line in bad:
    print("FAIL:", line)
sys.exit(1 if bad else 0)
PY
echo "OK: the container's agent and the host's merge exactly ($out)"
