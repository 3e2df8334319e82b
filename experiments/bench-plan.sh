#!/bin/sh
# Planner search times (issue 5 targets: GPT-20B on 64 GPUs, whole space,
# under 1 s on one core; GPT-175B on 1024 GPUs under 30 s; mpiexec -n 2
# faster than one rank with the same best plan; issue 22: 0.3 s, 1 s and
# 100 MB).  Prints user CPU time (one core), wall time and peak RSS of each
# search, and beside them the figures of the search before issue 22's
# changes (commit 448b1db, the same space and answers), measured with this
# script on the same shared 2-core machine as issue 22's after-figures;
# for the --what-if, Llama-3-70B and mpiexec lines the figures of commit
# a540c9a (before the ranks shared their K best and the alternatives ran
# in parallel), measured the same way.
# Each line is the median of REPS runs (default 3; REPS=1 as before) and
# the largest RSS of them.
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
  "GPT-8.3B, 64 x rtx3090-pcie, --what-if, 1 rank") echo "2.56 s user, 2.62 s wall: serial" ;;
  "GPT-8.3B"*"--what-if"*) echo "not measured" ;;
  "GPT-8.3B"*) echo "11.01 s, 2 ranks" ;;
  "Llama-3-70B, 256 x dgx-h100, 1 rank") echo "16.5 s" ;;
  "Llama-3-70B, 256 x dgx-h100, mpiexec -n 2") echo "1.88 s user, 1.17 s wall: own K best" ;;
  "GPT-175B, 1024 x dgx-a100, mpiexec -n 2") echo "0.55 s user, 0.42 s wall: own K best" ;;
  # issue 35's figures (before its new schedules, on the issue's machine)
  "Llama-3-70B, 256 x dgx-h100, gbs 512, top 1") echo "1.84 s wall" ;;
  "Llama-3.1-405B, 16384 x dgx-h100, top 1") echo "2.65 s wall" ;;
  "Mixtral-8x22B, 1024 x dgx-h100, top 1") echo "2.94 s wall, 167 MB" ;;
  *) echo "not measured" ;;
  esac
}
REPS=${REPS:-3}
run() { # name, command...: the median of REPS runs' user and wall times, their largest RSS
  name=$1; shift
  : >"$tmp/ts"
  for i in $(seq "$REPS"); do
    /usr/bin/time -f "%U %e %M" -o "$tmp/t" "$@" >"$tmp/out.json" 2>/dev/null </dev/null
    cat "$tmp/t" >>"$tmp/ts"
  done
  set -- $(/usr/bin/python3 -c 'import statistics, sys
r = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
print(statistics.median(x[0] for x in r), statistics.median(x[1] for x in r), int(max(x[2] for x in r)))' "$tmp/ts")
  best=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["plans"][0]; q=p["plan"]; print("%d candidates, %s%d simulated; best dp%d pp%d tp%d %s %.4f s%s" % (d["evaluated"], "%d settled, " % d["settled"] if "settled" in d else "", d["simulated"], q["dp"], q["pp"], q["tp"], q["schedule"], p["step_time_s"], "; alternatives %.2f s" % d["explain_search_time_s"] if "explain_search_time_s" in d else ""))' "$tmp/out.json")
  printf '%-44s user %6.2f s  wall %6.2f s  RSS %4d MB  (before: %s)  %s\n' "$name" "$1" "$2" $(($3 / 1024)) \
    "$(before "$name")" "$best"
}
export OPENBLAS_NUM_THREADS=1
run "GPT-20B, 64 x rtx3090-pcie, gbs 512" "$MERAK" plan --model gpt-20b --gpus 64 --json
run "GPT-175B, 1024 x dgx-a100, gbs 1536" "$MERAK" plan --model gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536 --json
run "GPT-8.3B, 64 x rtx3090-pcie, 1 rank" "$MERAK" plan --model gpt-8.3b --gpus 64 --json
run "GPT-8.3B, 64 x rtx3090-pcie, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-8.3b --gpus 64 --json
run "GPT-175B, 1024 x dgx-a100, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536 --json
llama="--model llama-3-70b --cluster dgx-h100 --gpus 256 --gbs 512 --seq-length 8192 --json"
run "Llama-3-70B, 256 x dgx-h100, 1 rank" "$MERAK" plan $llama
run "Llama-3-70B, 256 x dgx-h100, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan $llama
# issue 35's targets: each < 0.5 s wall on one core and < 100 MB, with the
# new schedules in the space; mpiexec -n 2 at least 1.6x faster on the
# largest (405B)
run "Llama-3-70B, 256 x dgx-h100, gbs 512, top 1" "$MERAK" plan --model llama-3-70b --gpus 256 --cluster dgx-h100 \
  --gbs 512 --top 1 --json
l405="--model llama-3.1-405b --gpus 16384 --cluster dgx-h100 --gbs 2048 --seq-length 8192 --top 1 --json"
run "Llama-3.1-405B, 16384 x dgx-h100, top 1" "$MERAK" plan $l405
run "Llama-3.1-405B, 16384 x dgx-h100, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan $l405
run "Mixtral-8x22B, 1024 x dgx-h100, top 1" "$MERAK" plan --model mixtral-8x22b --gpus 1024 --cluster dgx-h100 \
  --gbs 1024 --seq-length 4096 --top 1 --json
# --what-if: 14 more searches (5 baselines, 8 clusters) over the rank's
# cores (threads) and over the ranks; user time counts every thread
run "GPT-8.3B, 64 x rtx3090-pcie, --what-if, 1 rank" "$MERAK" plan --model gpt-8.3b --gpus 64 --what-if --json
run "GPT-8.3B, 64 x rtx3090-pcie, --what-if, mpiexec -n 2" "$MPIEXEC" -n 2 "$MERAK" plan --model gpt-8.3b --gpus 64 --what-if --json
# CALLGRIND=1: instructions of each rank's whole process (stable where
# seconds are not): one rank, then each of two ranks
if [ "${CALLGRIND:-0}" = 1 ]; then
  cg() { # the Collected line of each process's log, in pid order
    "$@" >/dev/null 2>&1; for f in "$tmp"/cg.log.*; do grep -h Collected "$f" | awk '{printf " %s", $4}'; done
    rm -f "$tmp"/cg.*; }
  vg="valgrind --tool=callgrind --callgrind-out-file=$tmp/cg.out.%p --log-file=$tmp/cg.log.%p"
  for m in "gpt-175b --cluster dgx-a100 --gpus 1024 --gbs 1536" "gpt-20b --gpus 64"; do
    printf '%-52s instructions, 1 rank:' "$m"; cg $vg "$MERAK" plan --model $m
    printf ';  2 ranks:'; cg "$MPIEXEC" -n 2 $vg "$MERAK" plan --model $m; echo
  done
fi
