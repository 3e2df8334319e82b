#!/bin/sh
# ZeRO-2 and ZeRO-3 (FSDP) in the executor: the one-rank losses (3 steps,
# 1e-5) and step-1 gradients (per tensor, 1e-5) at dp 4, with pp and tp,
# under zero-bubble and interleaved schedules, TP overlap, without
# overlapped gradient reduction, and hybrid (a sharding group of 2 of dp 4,
# from a plan's zero_shard_size: on one host `--zero-shard-group node` is
# the whole DP group); gpt-tiny and llama-tiny.  The traced step names its
# collectives RS.dp and AG.zero.  Per-stage peak memory falls strictly from
# ZeRO-0 to 1, 2, 3.  Checkpoints (one unsharded file) move between ZeRO
# stages and layouts with the uninterrupted losses; plans with zero 2 and 3
# run under --plan; bad groups are refused with one line.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=${PYTHON:-python3}
EQUIV_TIMEOUT=120
make_reference
equiv 4 1 1 --zero 2
equiv 4 1 1 --zero 3
equiv 2 2 2 --zero 3
equiv 2 2 2 --zero 2 --schedule merak --recompute none
equiv 2 2 1 --zero 3 --schedule zb-h1
equiv 2 2 1 --zero 3 --schedule interleaved --vpp 2 --recompute none
equiv 4 1 1 --zero 2 --no-overlap-grad-reduce
equiv 2 1 2 --zero 3 --tp-overlap 2 --mbs 2 --recompute none

# plans from `merak sim --json` (its "plan" object is a plan file), edited by key
# (the plans are fp32: the references are fp32 runs; a 16-bit plan would round the GEMMs' operands)
plan_of() {
  out=$1; edit=$2; shift 2
  "$MERAK" sim --model "$model" --cluster ideal --gbs 8 --dtype fp32 --json "$@" 2>/dev/null | "$PY" -c '
import json, sys
p = json.load(sys.stdin)["plan"]; p.update(json.loads(sys.argv[2])); json.dump(p, open(sys.argv[1], "w"))' "$out" "$edit"
}
runp() { n=$1; shift; timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --json --steps 3 "$@"; }
model=gpt-tiny
plan_of "$tmpdir/h.plan" '{"zero": 3, "zero_shard_size": 2}' --dp 4
expect_ok "hybrid ZeRO-3 (group 2 of dp 4) runs" runp 4 --plan "$tmpdir/h.plan" --dump-grads "$tmpdir/h.bin"
check "hybrid ZeRO-3: the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
check "hybrid ZeRO-3: the one-rank gradients (1e-5)" "$GRADCMP" "$tmpdir/h.bin" "$tmpdir/ref.bin" 1e-5
plan_of "$tmpdir/h2.plan" '{"zero": 2, "zero_shard_size": 2}' --dp 4
expect_ok "hybrid ZeRO-2 (group 2 of dp 4) runs" runp 4 --plan "$tmpdir/h2.plan"
check "hybrid ZeRO-2: the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
plan_of "$tmpdir/h8.plan" '{"zero": 3, "zero_shard_size": 1}' --dp 2 --pp 2 --tp 2
expect_ok "ZeRO-3 with a group of 1 (dp 2 pp 2 tp 2: all replicas) runs" runp 8 --plan "$tmpdir/h8.plan" \
  --dump-grads "$tmpdir/h8.bin"
check "group of 1: the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
check "group of 1: the one-rank gradients (1e-5)" "$GRADCMP" "$tmpdir/h8.bin" "$tmpdir/ref.bin" 1e-5
plan_of "$tmpdir/h1.plan" '{"zero": 1, "zero_shard_size": 2}' --dp 4
expect_ok "hybrid ZeRO-1 (group 2 of dp 4) runs" runp 4 --plan "$tmpdir/h1.plan"
check "hybrid ZeRO-1: the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
run4() { timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --dp 4 --gbs 8 --json "$@"; }
run4 --steps 3 --zero 3 >"$tmpdir/z3.json" 2>/dev/null
expect_ok "--zero-shard-group node on one host" run4 --steps 3 --zero 3 --zero-shard-group node
check "node on one host: the whole DP group (bitwise --zero 3's losses)" \
  test -n "$(losses_of "$tmpdir/z3.json")" -a "$(losses_of "$tmpdir/out")" = "$(losses_of "$tmpdir/z3.json")"
expect_ok "a plan with zero 3 runs under --plan" runp 4 --plan "$(plan_of "$tmpdir/z3.plan" '{"zero": 3}' --dp 4; echo "$tmpdir/z3.plan")"
check "plan zero 3: bitwise the losses of --zero 3" test "$(losses_of "$tmpdir/out")" = "$(losses_of "$tmpdir/z3.json")"
# a plan the planner chose (the fsdp baseline: ZeRO-3 data parallelism) runs as saved
expect_ok "merak plan --baseline fsdp saves a ZeRO-3 plan" "$MERAK" plan --model gpt-tiny --cluster dgx-a100 --gpus 4 \
  --gbs 8 --baseline fsdp --save-plan "$tmpdir/fsdp.plan"
check "... which is ZeRO-3" grep -q '"zero": 3' "$tmpdir/fsdp.plan"
expect_ok "merak run --plan runs the planner's ZeRO-3 plan" runp 4 --plan "$tmpdir/fsdp.plan"

# the traced step: gradient reduce-scatters and parameter gathers by name
expect_ok "traced ZeRO-3 run" run4 --steps 2 --zero 3 --trace "$tmpdir/t.json"
check "trace: RS.dp and AG.zero events" test "$(grep -c '"RS.dp"' "$tmpdir/t.json")" -gt 0 -a \
  "$(grep -c '"AG.zero"' "$tmpdir/t.json")" -gt 0

# peak memory at dp 4 (stage 0): ZeRO-0 > 1 > 2 > 3
mem0() { sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$1"; }
for z in 0 1 2 3; do run4 --steps 1 --zero $z >"$tmpdir/m$z.json" 2>/dev/null; done
check "peak memory falls with the ZeRO stage: $(mem0 "$tmpdir/m0.json") > $(mem0 "$tmpdir/m1.json") > $(mem0 "$tmpdir/m2.json") > $(mem0 "$tmpdir/m3.json")" \
  test "$(mem0 "$tmpdir/m0.json")" -gt "$(mem0 "$tmpdir/m1.json")" -a "$(mem0 "$tmpdir/m1.json")" -gt "$(mem0 "$tmpdir/m2.json")" \
  -a "$(mem0 "$tmpdir/m2.json")" -gt "$(mem0 "$tmpdir/m3.json")" -a -n "$(mem0 "$tmpdir/m3.json")"

# without the prefetch (--no-zero3-prefetch) each layer is gathered as it
# starts: the same losses bit for bit, and the peak lower by what merak
# sim says (one layer fewer held whole: its fp32 weights)
run4 --steps 1 --zero 3 --no-zero3-prefetch >"$tmpdir/m3n.json" 2>/dev/null
check "no prefetch: bitwise the losses of --zero 3" \
  test -n "$(losses_of "$tmpdir/m3n.json")" -a "$(losses_of "$tmpdir/m3n.json")" = "$(losses_of "$tmpdir/m3.json")"
simpeak() { "$MERAK" sim --model gpt-tiny --cluster ideal --dtype fp32 --dp 4 --gbs 8 --zero 3 --json "$@" |
  "$PY" -c 'import json, sys; print(int(json.load(sys.stdin)["peak_memory_bytes"][0]))'; }
drop=$(( $(simpeak) - $(simpeak --no-zero3-prefetch) ))
check "no prefetch: the peak $(mem0 "$tmpdir/m3n.json") lower than $(mem0 "$tmpdir/m3.json") by merak sim's $drop bytes" \
  test "$drop" -gt 0 -a "$(( $(mem0 "$tmpdir/m3.json") - $(mem0 "$tmpdir/m3n.json") ))" = "$drop"

# checkpoints: 2 steps saved, 2 resumed, against 4 uninterrupted (one rank)
runn() { n=$1; shift; timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --gbs 8 --json --lr-decay-iters 4 "$@"; }
"$MERAK" run --gbs 8 --json --lr-decay-iters 4 --steps 4 >"$tmpdir/full.json" 2>/dev/null
sed 's/"losses":\[[^,]*,[^,]*,/"losses":[/' "$tmpdir/full.json" >"$tmpdir/tail.json"
expect_ok "ZeRO-3 dp 4 saves at step 2" runn 4 --dp 4 --zero 3 --steps 2 --save "$tmpdir/z3.st"
expect_ok "one rank resumes it" runn 1 --steps 2 --load "$tmpdir/z3.st"
check "ZeRO-3 checkpoint continues on one rank with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
"$MERAK" run --gbs 8 --lr-decay-iters 4 --steps 2 --save "$tmpdir/one.st" 2>/dev/null
check "ZeRO-3 and one-rank files agree (1e-5)" same_checkpoints "$tmpdir/z3.st" "$tmpdir/one.st"
expect_ok "ZeRO-3 dp 2 pp 2 tp 2 resumes the one-rank file" runn 8 --dp 2 --pp 2 --tp 2 --zero 3 --steps 2 --load "$tmpdir/one.st"
check "... with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
expect_ok "ZeRO-2 dp 2 pp 2 tp 2 saves at step 2" runn 8 --dp 2 --pp 2 --tp 2 --zero 2 --steps 2 --save "$tmpdir/z2.st"
expect_ok "ZeRO-1 dp 4 resumes it" runn 4 --dp 4 --zero 1 --steps 2 --load "$tmpdir/z2.st"
check "ZeRO-2 -> ZeRO-1 continues with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
runn 4 --dp 4 --zero 3 --steps 4 >"$tmpdir/z3full.json" 2>/dev/null
expect_ok "ZeRO-3 dp 4 resumes its own file" runn 4 --dp 4 --zero 3 --steps 2 --load "$tmpdir/z3.st"
check "same layout: bitwise the uninterrupted ZeRO-3 losses" \
  test "$(losses_of "$tmpdir/out")" = "$(losses_of "$tmpdir/z3full.json" | cut -d' ' -f3-)"

# bad input: one line, exit 2, every rank
expect_fail "--zero 4" 'zero must be at most 3' -- timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --dp 2 --zero 4
expect_fail "--zero-shard-group other" 'must be dp or node' -- \
  timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --dp 2 --zero 3 --zero-shard-group rack
plan_of "$tmpdir/bad.plan" '{"zero": 3, "zero_shard_size": 3}' --dp 4
expect_fail "a sharding group that does not divide dp" 'group 3 does not divide dp 4' -- runp 4 --plan "$tmpdir/bad.plan"

# llama-tiny (GQA, RoPE, SwiGLU, untied head)
RUN_COMMON="$RUN_COMMON --model llama-tiny"
make_reference
equiv 4 1 1 --zero 2
equiv 4 1 1 --zero 3
equiv 2 2 2 --zero 3
equiv 2 2 2 --zero 2 --schedule zb-h1
finish
