#!/bin/sh
# Validation of the simulator against the executor on this machine (issue 8):
#   1. merak profile (2 ranks, the model's GEMM shapes) -> profile.json
#   2. for each plan: predict (merak sim --cluster profile.json --json --trace)
#      and measure (mpiexec merak run --json --trace; median step time of the
#      steps after the first)
#   3. plot.py: CSV of predicted vs measured step time, per-stage bubble and
#      peak memory; scatter plot; error figures and the ablation (summary.md).
# Usage: experiments/validate/run.sh [OUTDIR]   (from the build directory;
# MERAK=path/to/merak, STEPS=K, RANKS=N to override).  At most 2 ranks:
# the plans never oversubscribe a 2-core machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${MERAK:-./merak}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-5}
ROUNDS=${ROUNDS:-2}
QUIET_WAIT=${QUIET_WAIT:-4}
out=${1:-$here/results-$(hostname)}
mkdir -p "$out/runs"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# the model: sized so that a step of 16 sequences takes about a second on
# 2 ranks of a 2-core machine (fp32, CPU backend)
MODEL="--model gpt-tiny --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 2048"
GBS=${GBS:-16}

# Shared machines: before each measurement wait (up to QUIET_WAIT s) until
# no other process is runnable, and measure each plan ROUNDS times, keeping
# the round with the lowest median (the least disturbed).
quiet() {
  t=0; ok=0
  while [ $t -lt $((QUIET_WAIT * 5)) ] && [ $ok -lt 3 ]; do
    r=$(cut -d' ' -f4 /proc/loadavg); r=${r%/*}
    if [ "$r" -le 1 ]; then ok=$((ok + 1)); else ok=0; fi
    sleep 0.2; t=$((t + 1))
  done
  cut -d' ' -f1,4 /proc/loadavg
}
echo "load before: $(cat /proc/loadavg)" | tee "$out/machine.txt"
{ uname -srm; grep -m1 "model name" /proc/cpuinfo || true; echo "cores: $(nproc)"; } >>"$out/machine.txt"
quiet >/dev/null
timeout 120 "$MPIEXEC" -n 2 "$MERAK" profile $MODEL --out "$out/profile.json" </dev/null | tee "$out/profile.txt"

# name | ranks | layout and schedule flags (shared by sim and run)
cat >"$out/plans.txt" <<'PLANS'
1rank-none|1|--dp 1 --pp 1 --tp 1 --schedule 1f1b --recompute none
1rank-full|1|--dp 1 --pp 1 --tp 1 --schedule 1f1b --recompute full
dp2-none|2|--dp 2 --pp 1 --tp 1 --schedule 1f1b --recompute none
dp2-zero1-none|2|--dp 2 --pp 1 --tp 1 --schedule 1f1b --recompute none --zero 1
pp2-1f1b-none|2|--dp 1 --pp 2 --tp 1 --schedule 1f1b --recompute none
pp2-gpipe-none|2|--dp 1 --pp 2 --tp 1 --schedule gpipe --recompute none
pp2-zbh1-none|2|--dp 1 --pp 2 --tp 1 --schedule zb-h1 --recompute none
pp2-1f1b-full|2|--dp 1 --pp 2 --tp 1 --schedule 1f1b --recompute full
pp2-merak-full|2|--dp 1 --pp 2 --tp 1 --schedule merak --recompute full
pp2-merak-sa0.5|2|--dp 1 --pp 2 --tp 1 --schedule merak --recompute stage-aware:0.5
pp2-interleaved-none|2|--dp 1 --pp 2 --tp 1 --schedule interleaved --vpp 2 --recompute none
tp2-none-ov0|2|--dp 1 --pp 1 --tp 2 --schedule 1f1b --recompute none --tp-overlap 0
tp2-none-ov1|2|--dp 1 --pp 1 --tp 2 --schedule 1f1b --recompute none --tp-overlap 1
tp2-none-ov2|2|--dp 1 --pp 1 --tp 2 --schedule 1f1b --recompute none --tp-overlap 2
PLANS

while IFS='|' read -r name n flags; do
  [ -n "$name" ] || continue
  echo "== $name: $flags" >&2
  "$MERAK" sim --cluster "$out/profile.json" $MODEL --dtype fp32 --gbs $GBS $flags --json \
    --trace "$out/runs/$name.sim-trace.json" >"$out/runs/$name.sim.json"
  if [ "$n" = 1 ]; then launch=""; else launch="$MPIEXEC -n $n"; fi
  best=""
  for r in $(seq 1 $ROUNDS); do
    load=$(quiet)
    timeout 300 $launch "$MERAK" run $MODEL --gbs $GBS $flags --steps $STEPS --json \
      --trace "$out/runs/$name.r$r.run-trace.json" >"$out/runs/$name.r$r.run.json" </dev/null
    echo "$load" >"$out/runs/$name.r$r.load"
    med=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['step_time_s'])" "$out/runs/$name.r$r.run.json")
    echo "   round $r: median step $med s (load, runnable: $load)" >&2
    if [ -z "$best" ] || [ "$("$PYTHON" -c "print(int($med < $best))")" = 1 ]; then
      best=$med
      cp "$out/runs/$name.r$r.run.json" "$out/runs/$name.run.json"
      cp "$out/runs/$name.r$r.run-trace.json" "$out/runs/$name.run-trace.json"
      cp "$out/runs/$name.r$r.load" "$out/runs/$name.load"
    fi
    rm -f "$out/runs/$name.r$r.run-trace.json"
  done
  "$MERAK" trace diff "$out/runs/$name.sim-trace.json" "$out/runs/$name.run-trace.json" --json \
    >"$out/runs/$name.diff.json" || echo "(trace diff failed for $name)" >&2
done <"$out/plans.txt"
echo "load after: $(cat /proc/loadavg)" | tee -a "$out/machine.txt"
"$PYTHON" "$here/plot.py" "$out"
