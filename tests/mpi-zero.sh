#!/bin/sh
# ZeRO-1: losses of plain DP within 1e-5; Adam state 1/dp (lower peak
# memory); a ZeRO checkpoint continues without ZeRO with the same losses.
# `run --plan` runs all of a plan: "zero": 1 as --zero 1 (bitwise), a bf16
# plan with 16-bit GEMM operands as --bf16, fields run cannot honour refused by name
# (ZeRO-2/3 plans: tests/mpi-zero23.sh).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
runs() { n=$1; shift; timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --gbs 8 --json --lr-decay-iters 4 "$@"; }
run() { n=$1; shift; runs $n --steps 4 "$@"; }  # (a flag is given once: runs for other --steps)
mem0() { sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$1"; }
for l in "--dp 2 --pp 2 --tp 2" "--dp 4 --pp 2 --schedule zb-h1"; do
  run 8 $l >"$tmpdir/plain.json" 2>"$tmpdir/e" || { echo "FAIL: plain $l"; cat "$tmpdir/e"; fails=$((fails + 1)); continue; }
  expect_ok "zero 1: $l" run 8 $l --zero 1
  check "zero 1 = plain DP (1e-5): $l" same_losses "$tmpdir/out" "$tmpdir/plain.json"
  check "zero 1 lowers stage 0's peak memory: $l ($(mem0 "$tmpdir/out") < $(mem0 "$tmpdir/plain.json"))" \
    test "$(mem0 "$tmpdir/out")" -lt "$(mem0 "$tmpdir/plain.json")"
done
run 2 --dp 2 >"$tmpdir/p2.json" 2>/dev/null
expect_ok "zero 1 save at step 2" runs 2 --dp 2 --zero 1 --steps 2 --save "$tmpdir/z.st"
expect_ok "continue without zero" runs 2 --dp 2 --steps 2 --load "$tmpdir/z.st"
sed 's/"losses":\[[^,]*,[^,]*,/"losses":[/' "$tmpdir/p2.json" >"$tmpdir/tail.json"
check "zero checkpoint continues with plain DP's losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
# plans from `merak sim --json` (its "plan" object is a plan file), edited by key
PY=${PYTHON:-python3}
plan_of() {
  out=$1; edit=$2; shift 2
  "$MERAK" sim --model gpt-tiny --cluster ideal --gbs 8 --json "$@" 2>/dev/null | "$PY" -c '
import json, sys
p = json.load(sys.stdin)["plan"]; p.update(json.loads(sys.argv[2])); json.dump(p, open(sys.argv[1], "w"))' "$out" "$edit"
}
runp() { n=$1; shift; timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --json --steps 4 --lr-decay-iters 4 "$@"; }
l="--dp 2 --pp 2 --tp 2"
run 8 $l --zero 1 >"$tmpdir/flag.json" 2>/dev/null
plan_of "$tmpdir/z.plan" '{}' $l --zero 1 --dtype fp32
expect_ok "a plan with zero 1 runs" runp 8 --plan "$tmpdir/z.plan"
check "plan zero 1: bitwise the losses of --zero 1" \
  test -n "$(losses_of "$tmpdir/out")" -a "$(losses_of "$tmpdir/out")" = "$(losses_of "$tmpdir/flag.json")"
check "plan zero 1: ZeRO is on (zero 1, stage 0 peak $(mem0 "$tmpdir/out") = --zero 1's)" \
  test "$(mem0 "$tmpdir/out")" = "$(mem0 "$tmpdir/flag.json")" -a -n "$(grep '"zero":1' "$tmpdir/out")"
plan_of "$tmpdir/b.plan" '{}' $l --zero 1 --dtype bf16
expect_ok "a bf16 plan runs" runp 8 --plan "$tmpdir/b.plan"
cp "$tmpdir/out" "$tmpdir/bplan.json"
run 8 $l --zero 1 --bf16 >"$tmpdir/bflag.json" 2>/dev/null
check "bf16 plan: \"dtype\": \"bf16\", no warning" test -n "$(grep '"dtype":"bf16"' "$tmpdir/bplan.json")" -a -z "$(grep warning "$tmpdir/err")"
check "bf16 plan: bitwise the losses of --bf16 (16-bit GEMM operands, not fp32's)" \
  test "$(losses_of "$tmpdir/bplan.json")" = "$(losses_of "$tmpdir/bflag.json")" -a \
  "$(losses_of "$tmpdir/bplan.json")" != "$(losses_of "$tmpdir/flag.json")"
# a plan field combination the executor cannot honour is refused by name
plan_of "$tmpdir/sp.plan" '{"sequence_parallel": true, "tp_overlap": 1}' --tp 2
expect_fail "a plan with sequence parallelism and TP overlap is refused by name" "sequence-parallel with --tp-overlap" \
  -- runp 2 --plan "$tmpdir/sp.plan"
finish
