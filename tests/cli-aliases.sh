#!/bin/sh
# Megatron-LM and DeepSpeed names (src/cli/cli_args.c, mk_aliases): each
# alias gives the same result as our flag; an alias and its flag, or one
# flag twice, is refused by name (exit 2, one line).
. "$top_srcdir/tests/lib.sh"
S="--model gpt-tiny --cluster ideal --json"
# same DESC "ALIAS FLAGS" "OUR FLAGS": merak sim --json prints the same document
same() {
  "$MERAK" sim $S $2 >"$tmpdir/a.json" 2>"$tmpdir/a.err"; ra=$?
  "$MERAK" sim $S $3 >"$tmpdir/b.json" 2>"$tmpdir/b.err"; rb=$?
  check "$1: '$2' = '$3'" sh -c "[ $ra -eq 0 ] && [ $rb -eq 0 ] && cmp -s '$tmpdir/a.json' '$tmpdir/b.json'"
}
same "pipeline" "--pipeline-model-parallel-size 2" "--pp 2"
same "tensor" "--tensor-model-parallel-size 2" "--tp 2"
same "data" "--data-parallel-size 2 --gbs 8" "--dp 2 --gbs 8"
same "context" "--context-parallel-size 2" "--cp 2"
same "micro-batch (Megatron)" "--micro-batch-size 2 --gbs 8" "--mbs 2 --gbs 8"
same "micro-batch (DeepSpeed)" "--train_micro_batch_size_per_gpu 2 --gbs 8" "--mbs 2 --gbs 8"
same "global batch" "--global-batch-size 8" "--gbs 8"
same "gradient accumulation" "--dp 2 --mbs 2 --gradient_accumulation_steps 3" "--dp 2 --mbs 2 --gbs 12"
same "virtual pipeline" "--pp 2 --virtual-pipeline-model-parallel-size 2 --gbs 8" "--pp 2 --vpp 2 --gbs 8"
same "recompute selective" "--recompute-granularity selective" "--recompute selective"
same "recompute full" "--recompute-granularity full --recompute-method uniform" "--recompute full"
same "bf16" "--bf16" "--dtype bf16"
same "fp16" "--fp16" "--dtype fp16"
same "fused cross entropy" "--cross-entropy-loss-fusion" "--cross-entropy fused"
same "distributed optimizer" "--dp 2 --gbs 8 --use-distributed-optimizer" "--dp 2 --gbs 8 --zero 1"
same "zero stage" "--dp 2 --gbs 8 --zero-stage 3" "--dp 2 --gbs 8 --zero 3"
same "max position embeddings" "--seq-length 64 --max-position-embeddings 64" "--seq-length 64"
"$MERAK" sim --model moe-tiny --cluster ideal --json --dp 2 --gbs 8 --expert-model-parallel-size 2 >"$tmpdir/a.json"
"$MERAK" sim --model moe-tiny --cluster ideal --json --dp 2 --gbs 8 --ep 2 >"$tmpdir/b.json"
check "expert parallel: --expert-model-parallel-size = --ep" cmp -s "$tmpdir/a.json" "$tmpdir/b.json"
# the values Megatron-LM has that merak does not: refused by name
expect_fail "recompute-granularity none" "--recompute-granularity must be one of selective\|full, got 'none'" -- \
  "$MERAK" sim $S --recompute-granularity none
expect_fail "recompute-method block (Megatron's default 1 block)" "--recompute-method block --recompute-num-layers 1: merak checkpoints every block" -- "$MERAK" sim $S --recompute-method block
same "recompute none as Megatron says it (block 0)" "--recompute-granularity full --recompute-method block --recompute-num-layers 0" "--recompute none"
expect_fail "recompute-num-layers 2" "uniform --recompute-num-layers 2: merak checkpoints" -- "$MERAK" sim $S --recompute-num-layers 2
expect_fail "max-position-embeddings below the sequence" "--max-position-embeddings 32 is below the sequence length 64" -- \
  "$MERAK" sim $S --max-position-embeddings 32
expect_fail "max-position-embeddings above a learned table" "learned position table has --seq-length rows" -- \
  "$MERAK" sim $S --max-position-embeddings 128
expect_ok "max-position-embeddings above the sequence with rope" "$MERAK" sim --model llama-tiny --cluster ideal \
  --max-position-embeddings 4096
expect_fail "an alias's bad value names the alias" "--train-iters must be a non-negative integer, got 'x'" -- \
  "$MERAK" run --train-iters x
# repeated flags: one line naming the flag, under any of its names
expect_fail "a flag twice" "^merak sim: --pp is given twice: give it once$" -- "$MERAK" sim $S --pp=2 --pp=3
expect_fail "a flag twice, same value" "--pp is given twice" -- "$MERAK" sim $S --pp 2 --pp 2
expect_fail "alias and flag" "--pp and --pipeline-model-parallel-size are the same flag" -- \
  "$MERAK" sim $S --pp 2 --pipeline-model-parallel-size 2
expect_fail "--bf16 with --dtype" "--bf16 and --dtype are the same flag" -- "$MERAK" sim $S --bf16 --dtype fp16
expect_fail "--bf16 with --fp16" "--bf16 and --fp16 are the same flag" -- "$MERAK" sim $S --bf16 --fp16
expect_fail "--cross-entropy-loss-fusion with --cross-entropy" \
  "--cross-entropy-loss-fusion and --cross-entropy are the same flag" -- "$MERAK" sim $S --cross-entropy-loss-fusion --cross-entropy torch
expect_fail "a switch twice" "--json is given twice" -- "$MERAK" sim $S --json
expect_fail "overlap and no-overlap" "--overlap-grad-reduce and --no-overlap-grad-reduce are the same flag" -- \
  "$MERAK" sim $S --overlap-grad-reduce --no-overlap-grad-reduce
expect_fail "model flag twice" "--hidden-size is given twice" -- "$MERAK" model --hidden-size 64 --hidden-size 128
expect_fail "run flag twice" "--steps and --train-iters are the same flag" -- "$MERAK" run --steps 1 --train-iters 1
expect_fail "--dump-grads twice" "^merak run: --dump-grads is given twice: give it once$" -- "$MERAK" run --steps 1 --dump-grads "$tmpdir/a.bin" --dump-grads "$tmpdir/b.bin"
expect_fail "--dump-grads without its file" "^merak run: option .--dump-grads. needs a value$" -- "$MERAK" run --steps 1 --dump-grads
expect_fail "trace --json twice" "--json is given twice" -- "$MERAK" trace summary x --json --json
# --help lists the aliases a subcommand takes
"$MERAK" run --help >"$tmpdir/h.txt"
check "run --help lists --train-iters" grep -q -- "--train-iters .*--steps" "$tmpdir/h.txt"
check "run --help lists --use-distributed-optimizer" grep -q -- "--use-distributed-optimizer .*--zero 1" "$tmpdir/h.txt"
finish
