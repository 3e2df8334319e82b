#!/bin/sh
# Planner search times (issue 5 targets: GPT-20B on 64 GPUs, whole space,
# under 1 s on one core; GPT-175B on 1024 GPUs under 30 s; mpiexec -n 2
# faster than one rank with the same best plan; issue 22: 0.3 s, 1 s and
# 100 MB).  Prints user CPU time (one core), wall time and peak RSS of each
# search, and beside them the figures of the search before issue 22's
# changes (commit 448b1db, the same space and answers), measured with this
# script on the same shared 2-core machine as issue 22's after-figures.
# Wall time there is not reliable (4 other jobs ran): compare user times,
# or better instruction counts (valgrind --tool=callgrind; README
# "Search time").  RSS is the process's: a build with the CUDA backend
# maps cuBLAS (~220 MB before the search starts; --without-cuda: 7 MB).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
MERAK=${MERAK:-$top/merak}
MPIEXEC=${MPIEXEC:-mpiexec}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Before issue 22 (448b1db, CUDA build): user s, RSS MB.
before() {
  case $1 in
  GPT-20B*) echo "5.76 s 285 MB" ;;
  GPT-175B*) echo "10.66 s 299 MB" ;;
  "GPT-8.3B, 64 x rtx3090-pcie, 1 rank") echo "10.38 s 344 MB" ;;
  "GPT-8.3B"*) echo "11.01 s, 2 ranks" ;;
  *) echo "not measured" ;;
  esac
}
run() { # name, command...
  name=$1; shift
  /usr/bin/time -f "%U %e %M" -o "$tmp/t" "$@" >"$tmp/out.json" 2>/dev/null
  set -- $(cat "$tmp/t")
  best=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["plans"][0]; q=p["plan"]; print("%d candidates, %s%d simulated; best dp%d pp%d tp%d %s %.4f s" % (d["evaluated"], "%d settled, " % d["settled"] if "settled" in d else "", d["simulated"], q["dp"], q["pp"], q["tp"], q["schedule"], p["step_time_s"]))' "$tmp/out.json")
  printf '%-44s user %6.2f s  wall %6.2f s  RSS %4d MB  (before: %s)  %s\n' "$name" "$1" "$2" $(($3 / 1024)) \
    "$(before "$name")" "$best"
}
export OPENBLAS_NUM_THREADS=1
run "GPT-20B, 64 x rtx3090-pcie, gbs 512" "$MERAK" plan --model gpt-20b --gpus 64 --json
run "GPT-175B, 1024 x dgx-a100, gbs 1536" "$MERAK" plan --model gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536 --json
run "GPT-8.3B, 64 x rtx3090-pcie, 1 rank" "$MERAK" plan --model gpt-8.3b --gpus 64 --json
run "GPT-8.3B, 64 x rtx3090-pcie, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-8.3b --gpus 64 --json
run "GPT-175B, 1024 x dgx-a100, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536 --json
