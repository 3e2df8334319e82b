#!/bin/sh
# Validation of the simulator against the executor on this machine (issues 8, 15):
#   ROUNDS times: 1. merak profile (2 ranks, the model's GEMM shapes and its
#   own training step: src/profile/profile_step.c) -> profile.rR.json;
#   2. for each plan: predict with that round's profile (merak sim --cluster
#   profile.rR.json --json --trace) and measure (mpiexec merak run --json
#   --trace; median step time of the steps after the first).
#   Each plan keeps its least disturbed round (the lowest measured median)
#   with that round's prediction: profile and run saw the same minutes of
#   the machine.  3. plot.py: CSV of predicted vs measured step time,
#   per-stage bubble and peak memory; scatter plot; error figures and the
#   ablation (summary.md).
# Usage: experiments/validate/run.sh [OUTDIR]   (from the build directory;
# MERAK=path/to/merak, STEPS=K, ROUNDS=R, ONLY=REGEX to override).  Results go
# to OUTDIR.tmp.PID first and replace OUTDIR only when every step succeeded.
# At most 2 ranks: the plans never oversubscribe a 2-core machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${MERAK:-./merak}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-5}
ROUNDS=${ROUNDS:-2}
QUIET_WAIT=${QUIET_WAIT:-4}
final=${1:-$here/results-$(hostname)}
out=$final.tmp.$$
rm -rf "$out"
mkdir -p "$out/runs"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# the model: sized so that a step of 16 sequences takes about a second on
# 2 ranks of a 2-core machine (fp32, CPU backend)
MODEL="--model gpt-tiny --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 2048"
GBS=${GBS:-16}

# Shared machines: before each measurement wait (up to QUIET_WAIT s) until
# no other process is runnable; prints "load1 runnable/total".
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
# ONLY=REGEX: the plans whose names match (development; the record runs all)
if [ -n "${ONLY:-}" ]; then grep -E "^(${ONLY})[|]" "$out/plans.txt" >"$out/plans.only" || true; mv "$out/plans.only" "$out/plans.txt"; fi
if [ ! -s "$out/plans.txt" ]; then  # a whole name (or names) must match: ONLY=dp2-zero1-none, ONLY='dp2-.*'
  echo "experiments/validate/run.sh: ONLY=${ONLY:-}: no plan's name matches" >&2; rm -rf "$out"; exit 2
fi

run_plan() { # run_plan NAME RANKS FLAGS ROUND
  name=$1 n=$2 flags=$3 r=$4
  # the executor's loss makes fused's passes (graph.c loss_passes)
  "$MERAK" sim --cluster "$out/profile.r$r.json" $MODEL --dtype fp32 --gbs $GBS $flags --cross-entropy fused --json \
    --trace "$out/runs/$name.r$r.sim-trace.json" >"$out/runs/$name.r$r.sim.json"
  if [ "$n" = 1 ]; then launch=""; else launch="$MPIEXEC -n $n"; fi
  load=$(quiet)
  timeout 300 $launch "$MERAK" run $MODEL --gbs $GBS $flags --steps $STEPS --json \
    --trace "$out/runs/$name.r$r.run-trace.json" >"$out/runs/$name.r$r.run.json" </dev/null
  echo "$load" >"$out/runs/$name.r$r.load"
  field "$out/runs/$name.r$r.run.json" step_time_s >"$out/runs/$name.r$r.meas"
  echo "   round $r: $name: predicted $(field "$out/runs/$name.r$r.sim.json" step_time_s) s, measured (median step)" \
    "$(cat "$out/runs/$name.r$r.meas") s (load, runnable: $load)" >&2
}
field() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: profile (load, runnable: $(quiet))" >&2
  timeout 300 "$MPIEXEC" -n 2 "$MERAK" profile $MODEL --out "$out/profile.r$r.json" </dev/null >"$out/profile.r$r.txt"
  while IFS='|' read -r name n flags; do
    [ -n "$name" ] && run_plan "$name" "$n" "$flags" "$r"
  done <"$out/plans.txt"
done
cp "$out/profile.r1.json" "$out/profile.json"
cp "$out/profile.r1.txt" "$out/profile.txt"

# each plan: its round with the lowest measured median, and that round's prediction
while IFS='|' read -r name n flags; do
  [ -n "$name" ] || continue
  best=$("$PYTHON" -c "import sys; v=[float(open(f).read()) for f in sys.argv[1:]]; print(1 + v.index(min(v)))" \
    $(for r in $(seq 1 "$ROUNDS"); do echo "$out/runs/$name.r$r.meas"; done))
  for k in sim.json sim-trace.json run.json run-trace.json load; do
    cp "$out/runs/$name.r$best.$k" "$out/runs/$name.$k"
  done
  echo "$best" >"$out/runs/$name.round"
  rm -f "$out"/runs/"$name".r*.sim-trace.json "$out"/runs/"$name".r*.run-trace.json
  "$MERAK" trace diff "$out/runs/$name.sim-trace.json" "$out/runs/$name.run-trace.json" --json \
    >"$out/runs/$name.diff.json" || echo "(trace diff failed for $name)" >&2
done <"$out/plans.txt"
echo "load after: $(cat /proc/loadavg)" | tee -a "$out/machine.txt"
"$PYTHON" "$here/plot.py" "$out" >/dev/null
rm -f "$out"/runs/*.sim-trace.json "$out"/runs/*.run-trace.json  # large; the diffs and the CSV keep what they say
# keep the earlier runs filed under the old folder (its subfolders but runs/)
if [ -d "$final" ]; then
  for d in "$final"/*/; do
    [ -d "$d" ] && [ "$(basename "$d")" != runs ] && mv "$d" "$out/"
  done
  rm -rf "$final"
fi
mv "$out" "$final"
echo "wrote $final"
grep -E "^step time \(median|^common-mode|^load" "$final/summary.md"
