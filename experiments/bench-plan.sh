#!/bin/sh
# Planner search times (issue 5 targets: GPT-20B on 64 GPUs, whole space,
# under 1 s on one core; GPT-175B on 1024 GPUs under 30 s; mpiexec -n 2
# faster than one rank with the same best plan).  Prints user CPU time (one
# core) and wall time of each search.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
MERAK=${MERAK:-$top/merak}
MPIEXEC=${MPIEXEC:-mpiexec}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() { # name, command...
  name=$1; shift
  /usr/bin/time -f "%U %e" -o "$tmp/t" "$@" >"$tmp/out.json" 2>/dev/null
  set -- $(cat "$tmp/t")
  best=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["plans"][0]; q=p["plan"]; print("%d candidates, %d simulated; best dp%d pp%d tp%d %s %.4f s" % (d["evaluated"], d["simulated"], q["dp"], q["pp"], q["tp"], q["schedule"], p["step_time_s"]))' "$tmp/out.json")
  printf '%-44s user %6.2f s  wall %6.2f s  %s\n' "$name" "$1" "$2" "$best"
}
export OPENBLAS_NUM_THREADS=1
run "GPT-20B, 64 x rtx3090-pcie, gbs 512" "$MERAK" plan --model gpt-20b --gpus 64 --json
run "GPT-175B, 1024 x dgx-a100, gbs 1536" "$MERAK" plan --model gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536 --json
run "GPT-8.3B, 64 x rtx3090-pcie, 1 rank" "$MERAK" plan --model gpt-8.3b --gpus 64 --json
run "GPT-8.3B, 64 x rtx3090-pcie, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-8.3b --gpus 64 --json
