#!/bin/sh
# Sizes at and past their maxima (include/merak/limits.h): every product
# is checked in 64 bits, a value above its maximum is one line naming the
# flag and the maximum (exit 2), work is capped up front, and the maxima
# still admit published runs scaled to 100,000 GPUs.
. "$top_srcdir/tests/lib.sh"

# the SIGFPE of issue 13: 65536 x 65536 wrapped to 0 in int
expect_fail "dp x mbs beyond 32 bits" "not divisible by dp 65536 x micro-batch 65536" -- \
  "$MERAK" sim --model gpt-tiny --dp 65536 --mbs 65536 --gbs 8
expect_fail "dp x mbs x micro-batches beyond the global batch maximum" "above 268435456 sequences" -- \
  "$MERAK" sim --model gpt-tiny --dp 65536 --mbs 65536 --micro-batches 2
"$MERAK" plan --model gpt-tiny --gpus 4 --gbs 8 --top 1 --save-plan "$tmpdir/p.json" >/dev/null 2>&1
sed -e 's/"dp": [0-9]*/"dp": 65536/' -e 's/"micro_batch_size": [0-9]*/"micro_batch_size": 65536/' \
  "$tmpdir/p.json" >"$tmpdir/big.json"
expect_fail "a plan file with dp x mbs beyond 32 bits" "not divisible|at most|more than" -- \
  "$MERAK" sim --plan "$tmpdir/big.json"
sed -e 's/"pp": [0-9]*/"pp": 1073741824/' -e 's/"vpp": [0-9]*/"vpp": 1073741824/' "$tmpdir/p.json" >"$tmpdir/pp.json"
expect_fail "a plan file with pp x vpp beyond 32 bits" "at most|virtual stages|array of" -- \
  "$MERAK" sim --plan "$tmpdir/pp.json"

# sizes above their maxima: the flag and the maximum, told apart from "not an integer"
expect_fail "hidden 2^30" "--hidden-size must be at most 131072, got 1073741824" -- \
  "$MERAK" model --hidden-size 1073741824 --num-attention-heads 1
expect_fail "vocabulary 2^31-1" "--vocab-size must be at most 4194304" -- "$MERAK" model --vocab-size 2147483647
expect_fail "2^31-1 GPUs" "--gpus must be at most 1048576" -- "$MERAK" plan --gpus 2147483647
expect_fail "dp 2^31-1" "--dp must be at most 1048576" -- "$MERAK" sim --dp 2147483647 --gbs 2147483647
expect_fail "vpp 2^31-1" "--vpp must be at most 512" -- \
  "$MERAK" sched --schedule interleaved --vpp 2147483647 --pp 2 --micro-batches 4
expect_fail "gbs beyond 32 bits" "--gbs must be at most 268435456, got 99999999999" -- \
  "$MERAK" sim --model gpt-tiny --gbs 99999999999
expect_fail "gbs beyond 64 bits" "--gbs must be at most" -- "$MERAK" sim --gbs 9223372036854775808
expect_fail "gbs not an integer" "--gbs must be an integer >= 1, got '12x'" -- "$MERAK" sim --gbs 12x
expect_fail "layers 2^31-1" "--num-layers must be at most 1024" -- "$MERAK" model --num-layers 2147483647
expect_fail "a JSON model above a maximum" "field 'vocab_size' must be at most 4194304" -- \
  "$MERAK" model --model "$top_srcdir/tests/models/bounds-vocab.json"
expect_fail "1024 virtual stages: the real limit" "1024 virtual stages; at most 512" -- \
  "$MERAK" sim --model gpt-tiny --num-layers 1024 --pp 64 --vpp 16 --schedule interleaved --gbs 64

# runaway work is refused up front, naming the cap
expect_fail "a 10^5-stage schedule" "--pp must be at most 512" -- "$MERAK" sched --pp 100000 --micro-batches 100000
expect_fail "more than merak sched prints" "the most merak sched prints" -- \
  "$MERAK" sched --pp 64 --micro-batches 1024
expect_fail "2^31-1 micro-batches" "--micro-batches must be at most 65536" -- \
  "$MERAK" sim --micro-batches 2147483647
expect_fail "a schedule above its cap" "units, the most a schedule may have" -- \
  "$MERAK" sim --model gpt-175b --pp 64 --gbs 65536
expect_fail "plan gbs 2*10^9" "--gbs must be at most 268435456" -- "$MERAK" plan --gbs 2000000000
expect_fail "a batch no layout can schedule" "too long a step" -- \
  "$MERAK" plan --model gpt-tiny --gpus 8 --gbs 268435456
expect_fail "top 2^31-1" "--top must be at most 1000" -- "$MERAK" plan --top 2147483647
# no candidate at all (UBSan: qsort(NULL, 0)): the closest plan is named
expect_fail "nothing fits" "no plan fits" -- "$MERAK" plan --model gpt-175b --gpus 8 --gbs 8

# the maxima admit a published configuration scaled to 100,000 GPUs
expect_ok "100,000 GPUs, seq 131072, vocabulary 250,680, hidden 25,600, vpp 20, 1024 micro-batches" \
  "$MERAK" sim --model gpt-tiny --num-layers 128 --hidden-size 25600 --num-attention-heads 160 \
  --seq-length 131072 --vocab-size 250680 --tp 8 --pp 4 --vpp 20 --dp 3125 --mbs 1 --gbs 3200000 \
  --cluster dgx-a100
check "... and ran them all: 100000 GPUs" grep -q "100000 GPUs" "$tmpdir/out"
expect_ok "a schedule at its cap (2^21 units)" "$MERAK" sim --model gpt-175b --pp 32 --gbs 65536
finish
