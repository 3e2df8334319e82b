#!/bin/sh
# ZeRO-1: losses of plain DP within 1e-5; Adam state 1/dp (lower peak
# memory); a ZeRO checkpoint continues without ZeRO with the same losses.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
run() { n=$1; shift; timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --gbs 8 --json --steps 4 --lr-decay-iters 4 "$@"; }
mem0() { sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$1"; }
for l in "--dp 2 --pp 2 --tp 2" "--dp 4 --pp 2 --schedule zb-h1"; do
  run 8 $l >"$tmpdir/plain.json" 2>"$tmpdir/e" || { echo "FAIL: plain $l"; cat "$tmpdir/e"; fails=$((fails + 1)); continue; }
  expect_ok "zero 1: $l" run 8 $l --zero 1
  check "zero 1 = plain DP (1e-5): $l" same_losses "$tmpdir/out" "$tmpdir/plain.json"
  check "zero 1 lowers stage 0's peak memory: $l ($(mem0 "$tmpdir/out") < $(mem0 "$tmpdir/plain.json"))" \
    test "$(mem0 "$tmpdir/out")" -lt "$(mem0 "$tmpdir/plain.json")"
done
run 2 --dp 2 >"$tmpdir/p2.json" 2>/dev/null
expect_ok "zero 1 save at step 2" run 2 --dp 2 --zero 1 --steps 2 --save "$tmpdir/z.st"
expect_ok "continue without zero" run 2 --dp 2 --steps 2 --load "$tmpdir/z.st"
sed 's/"losses":\[[^,]*,[^,]*,/"losses":[/' "$tmpdir/p2.json" >"$tmpdir/tail.json"
check "zero checkpoint continues with plain DP's losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
finish
