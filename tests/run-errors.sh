#!/bin/sh
# `merak run` on one rank (no mpiexec) with bad input: exit 2, one line.
. "$top_srcdir/tests/lib.sh"
expect_fail "layout larger than the world" "2 but there are 1 ranks" -- "$MERAK" run --dp 2
expect_fail "unknown schedule" "unknown schedule" -- "$MERAK" run --schedule foo
expect_fail "unknown recompute policy" "recompute" -- "$MERAK" run --recompute sometimes
expect_fail "gbs not a multiple of dp*mbs" "not divisible by dp" -- "$MERAK" run --mbs 3 --gbs 4
expect_fail "plan with layout flags" "combine" -- "$MERAK" run --plan p.json --tp 1
expect_fail "unknown option" "unknown option" -- "$MERAK" run --bogus 1
expect_fail "unknown backend" "unknown backend" -- "$MERAK" run --backend tpu
expect_fail "zero stage 4" "zero must be at most 3" -- "$MERAK" run --zero 4
expect_fail "unknown ZeRO sharding group" "must be dp or node" -- "$MERAK" run --zero 3 --zero-shard-group rack
expect_fail "bad --save-interval" "save-interval" -- "$MERAK" run --save-interval x
expect_fail "vpp with a schedule other than interleaved" "interleaved" -- "$MERAK" run --vpp 2 --schedule 1f1b
expect_fail "a bert model" "GPT" -- "$MERAK" run --model bert-large --num-layers 2 --hidden-size 64 --num-attention-heads 4
expect_fail "cp not splitting the sequence into 2cp chunks" "must split into 2 x cp = 6 equal chunks" -- "$MERAK" run --cp 3
expect_fail "cross entropy torch (merak sim's PyTorch memory)" "run computes the vocab-parallel cross entropy" -- "$MERAK" run --cross-entropy torch
expect_fail "unknown cross entropy" "must be vocab-parallel, torch, fused or fused-te" -- "$MERAK" run --cross-entropy native
expect_fail "cross entropy fused-te (Transformer Engine's kernels)" "cross_entropy fused-te is for merak sim" -- "$MERAK" run --cross-entropy fused-te
expect_fail "dropout asked for (the executor has none)" "--hidden-dropout 0.1: the executor trains without dropout" -- \
  "$MERAK" run --hidden-dropout 0.1 --attention-dropout 0
expect_ok "no dropout asked for" "$MERAK" run --steps 1 --attention-dropout 0 --hidden-dropout 0
expect_ok "--steps 0 is a valid no-op" "$MERAK" run --steps 0
expect_ok "--help" "$MERAK" run --help
# one rule for a plan's dtype, whoever gives it (issue 32): fp8 refused from
# --dtype and from a plan alike; a 16-bit dtype rounds the cpu backend's GEMM
# operands (issue 37), without a warning
"$MERAK" plan --model gpt-tiny --gpus 1 --gbs 4 --dtype fp8 --cluster dgx-h100 --save-plan "$tmpdir/p8.json" \
  >/dev/null 2>&1
expect_fail "an fp8 plan" "no fp8 path: the plan's dtype fp8 is for merak sim and merak plan" -- \
  "$MERAK" run --plan "$tmpdir/p8.json" --steps 1
expect_fail "--dtype fp8" "no fp8 path: --dtype fp8 is for merak sim and merak plan" -- "$MERAK" run --dtype fp8
"$MERAK" run --dtype bf16 --steps 1 --quiet --json >"$tmpdir/bf16.json" 2>"$tmpdir/bf16.err"; rc=$?
check "--dtype bf16 on the cpu backend (rc=$rc): \"dtype\": \"bf16\", nothing on stderr" test $rc -eq 0 -a \
  ! -s "$tmpdir/bf16.err" -a -n "$(grep '"dtype":"bf16"' "$tmpdir/bf16.json")"
# a plan's partition must be what its stage bounds are
sed 's/"partition": "explicit"/"partition": "uniform"/' "$top_srcdir/tests/fuzz/corpus/plan/accept-partition-explicit.json" \
  >"$tmpdir/pu.json"
expect_fail "stage bounds that contradict 'uniform'" "partition 'uniform' splits the layers \\[0, 5, 10\\], but stage_bounds are \\[0, 3, 10\\]" -- \
  "$MERAK" sim --plan "$tmpdir/pu.json"
finish
