#!/bin/sh
# --export megatron (issue 36): a plan as Megatron-LM's launch command,
# stdout holding only `torchrun ... pretrain_gpt.py ARGS`; the round trip
# `merak sim --gpus N ARGS` accepts every token and predicts the same
# step; what Megatron-LM cannot run is exit 2 naming it.
. "$top_srcdir/tests/lib.sh"
step() { "$PYTHON" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["step_time_s"]))' "$1"; }
# roundtrip NAME CLUSTER GPUS SIM-ARGS...: export, rerun the export's own args, compare the steps
roundtrip() {
  name=$1; cl=$2; n=$3; shift 3
  "$MERAK" sim --cluster $cl "$@" --json >"$tmpdir/a.json" 2>/dev/null
  "$MERAK" sim --cluster $cl "$@" --export megatron >"$tmpdir/cmd" 2>"$tmpdir/err"
  check "$name: one torchrun command on stdout" sh -c "[ \$(wc -l <'$tmpdir/cmd') -eq 1 ] &&
    grep -q '^torchrun --nnodes [0-9]* --nproc-per-node [0-9]* pretrain_gpt.py --tensor-model-parallel-size' '$tmpdir/cmd' &&
    grep -q 'note: Megatron-LM' '$tmpdir/err'"
  args=$(sed 's/.*pretrain_gpt\.py//' "$tmpdir/cmd")
  eval "\"\$MERAK\" sim --cluster $cl --gpus $n $args --json" >"$tmpdir/b.json" 2>"$tmpdir/err2"
  check "$name: merak sim --gpus $n of the export predicts the same step" test "$(step "$tmpdir/a.json")" = "$(step "$tmpdir/b.json")"
}
roundtrip "gpt interleaved, full recompute" dgx-a100 24 --model gpt-2.5b --dp 2 --pp 3 --tp 4 --gbs 48 \
  --schedule interleaved --vpp 2 --recompute full
roundtrip "llama GQA, SP, distributed optimizer, cp 2, no recompute" dgx-h100 32 --model llama-3-8b --dp 4 --cp 2 \
  --pp 2 --tp 2 --gbs 64 --sequence-parallel --zero 1 --recompute none
roundtrip "mixtral, ep 4, selective" dgx-h100 32 --model mixtral-8x7b --dp 4 --ep 4 --pp 2 --tp 4 --gbs 64 \
  --seq-length 4096 --recompute selective
roundtrip "uneven first and last stages, fp16" dgx-a100 16 --model gpt-20b --dp 1 --pp 4 --tp 4 --gbs 16 \
  --decoder-first-pipeline-num-layers 10 --decoder-last-pipeline-num-layers 10 --dtype fp16
# merak plan: the best plan in Megatron-LM's space, exported; its step is the round trip's
"$MERAK" plan --model llama-3-8b --cluster dgx-h100 --gpus 16 --gbs 64 --export megatron >"$tmpdir/cmd" 2>"$tmpdir/err"
want=$(sed -n 's/.*step \([0-9.e+-]*\) s,.*/\1/p' "$tmpdir/err")
args=$(sed 's/.*pretrain_gpt\.py//' "$tmpdir/cmd")
eval "\"\$MERAK\" sim --cluster dgx-h100 --gpus 16 $args --json" >"$tmpdir/b.json" 2>/dev/null
check "plan --export: only the command on stdout, its step (${want:-none}) is the round trip's" "$PYTHON" -c '
import json, sys
got = json.load(open(sys.argv[2]))["step_time_s"]
assert float(sys.argv[1]) == float("%.9g" % got), (sys.argv[1], got)' "$want" "$tmpdir/b.json"
check "plan --export: nothing else on stdout" sh -c "[ \$(wc -l <'$tmpdir/cmd') -eq 1 ]"
# what Megatron-LM cannot run
S="--model gpt-tiny --cluster dgx-a100 --pp 2 --gbs 8"
expect_fail "a zero-bubble schedule" "cannot run this plan: a schedule other than 1f1b and interleaved" -- \
  "$MERAK" sim $S --schedule zb-v --export megatron
expect_fail "ZeRO-3" "ZeRO-2/3 or a hybrid shard" -- "$MERAK" sim $S --dp 2 --zero 3 --export megatron
expect_fail "stage-aware recompute" "per-stage recompute counts" -- "$MERAK" sim $S --recompute stage-aware:0.5 --export megatron
expect_fail "sub-pipelined TP" "sub-pipelined TP" -- "$MERAK" sim $S --tp 2 --tp-overlap 1 --export megatron
expect_fail "fp32" "fp32 training" -- "$MERAK" sim $S --dtype fp32 --export megatron
expect_fail "torchtitan not written yet" "only megatron is written yet" -- "$MERAK" sim $S --export torchtitan
expect_fail "plan --export torchtitan" "only megatron is written yet" -- "$MERAK" plan --model gpt-tiny --gpus 2 --export torchtitan
expect_fail "--gpus that does not divide" "--gpus 6 is not a multiple of tp x pp x cp = 4" -- \
  "$MERAK" sim --model gpt-tiny --pp 2 --tp 2 --gpus 6
finish
