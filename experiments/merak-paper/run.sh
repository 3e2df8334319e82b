#!/bin/sh
# The Merak experiment (Lai et al., TPDS 2023, Fig. 8-style): GPT-1.5B, 2.5B,
# 8.3B and 20B on 64 GPUs of rtx3090-pcie (8 nodes x 8), global batch GBS
# (default 512 sequences of 1024 tokens), bf16.  For each model, the best plan
# each system can express is found by `merak plan --baseline`:
#   megatron     uniform partition, 1f1b or interleaved, full recompute, no TP overlap
#   megatron-sp  + sequence parallelism, selective recompute, distributed optimizer
#   deepspeed    parameter-balanced partition, 1f1b, full recompute
#   merak        merak schedule, stage-aware/auto recompute, compute partition
#                (refined), sub-pipelined TP
# Writes OUT/throughput.csv, OUT/speedup.png and, for gpt-8.3b, the simulated
# timelines of megatron, deepspeed and merak (OUT/timeline-*.png).
# Usage: experiments/merak-paper/run.sh [OUT] [GBS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
MERAK=${MERAK:-$top/merak}
PY=${PYTHON:-/usr/bin/python3}
out=${1:-$here/out}
gbs=${2:-512}
mkdir -p "$out"
csv="$out/throughput.csv"
echo "model,system,tokens_per_s,step_time_s,tflops_per_gpu,mfu,dp,pp,tp,vpp,mbs,schedule,recompute,sequence_parallel,tp_overlap,zero,partition" >"$csv"
for model in gpt-1.5b gpt-2.5b gpt-8.3b gpt-20b; do
  for sys in megatron megatron-sp deepspeed merak; do
    "$MERAK" plan --model $model --cluster rtx3090-pcie --gpus 64 --gbs "$gbs" --baseline $sys --top 1 \
      --json --save-plan "$out/$model-$sys.plan.json" >"$out/$model-$sys.json" 2>/dev/null
    "$PY" - "$out/$model-$sys.json" $model $sys >>"$csv" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))["plans"][0]
p = r["plan"]
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], round(r["tokens_per_s"], 1), r["step_time_s"],
      round(r["tflops_per_gpu"], 2), round(r["mfu"], 4), p["dp"], p["pp"], p["tp"], p["vpp"],
      p["micro_batch_size"], p["schedule"], p["recompute"], p["sequence_parallel"], p["tp_overlap"],
      p["zero"], p["partition"]]))
PYEOF
    echo "$model $sys done" >&2
  done
done
for sys in megatron deepspeed merak; do
  "$MERAK" sim --plan "$out/gpt-8.3b-$sys.plan.json" --trace "$out/gpt-8.3b-$sys.trace.json" >/dev/null
  "$PY" "$top/experiments/plot_timeline.py" "$out/gpt-8.3b-$sys.trace.json" -o "$out/timeline-$sys.png" \
    --title "GPT-8.3B, 64 x RTX 3090: $sys" >/dev/null
done
"$PY" "$here/plot.py" "$csv" -o "$out/speedup.png"
