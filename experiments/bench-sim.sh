#!/bin/sh
# Simulator speed: one step of GPT-20B on 64 GPUs (dp 2, pp 8, tp 4, m 64)
# and of GPT-175B on 1024 GPUs (dp 8, pp 16, tp 8, m 256) on dgx-a100, one
# core.  Prints wall time per simulated step (best of N runs of the whole
# `merak sim` process: graph, schedule, simulation) and events per second.
# Targets: GPT-20B under 20 ms, GPT-175B under 1 s.
MERAK=${MERAK:-./merak}
N=${N:-5}
now() { date +%s.%N; }
bench() { # NAME ARGS...
  name=$1; shift
  best=
  for i in $(seq "$N"); do
    t0=$(now); out=$(taskset -c 0 "$MERAK" sim "$@" --json 2>/dev/null || "$MERAK" sim "$@" --json); t1=$(now)
    t=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
  done
  ev=$(echo "$out" | sed -n 's/.*"events": \([0-9]*\).*/\1/p')
  step=$(echo "$out" | sed -n 's/.*"step_time_s": \([0-9.e+-]*\).*/\1/p')
  printf '%-34s %8.1f ms  %8d events  %10.0f events/s  (simulated step %.3f s)\n' "$name" \
    "$(echo "$best * 1000" | bc -l)" "$ev" "$(echo "$ev / $best" | bc -l)" "$step"
}
bench "GPT-20B, 64 GPUs, m 64" --model gpt-20b --cluster dgx-a100 --dp 2 --pp 8 --tp 4 --gbs 128
bench "GPT-20B, 64 GPUs, m 64, merak+TP3" --model gpt-20b --cluster dgx-a100 --dp 2 --pp 8 --tp 4 --gbs 128 \
  --schedule merak --recompute stage-aware:0.8 --tp-overlap 3
bench "GPT-175B, 1024 GPUs, m 256" --model gpt-175b --cluster dgx-a100 --dp 8 --pp 16 --tp 8 --gbs 2048
bench "GPT-175B, 1024 GPUs, m 256, zb-h1" --model gpt-175b --cluster dgx-a100 --dp 8 --pp 16 --tp 8 --gbs 2048 \
  --schedule zb-h1
bench "GPT-175B, 1024 GPUs, interleaved v3" --model gpt-175b --cluster dgx-a100 --dp 8 --pp 16 --tp 8 --gbs 2048 \
  --schedule interleaved --vpp 3
