#!/bin/sh
# `merak sched`: golden makespans, --json with exactly one object, --verify.
. "$top_srcdir/tests/lib.sh"

for pair in 1f1b:44 merak-pre:41 merak-last:39 merak:38; do
  s=${pair%%:*}; want=${pair#*:}
  expect_ok "sched $s" "$MERAK" sched --schedule "$s" --pp 4 --micro-batches 8
  check "$s makespan $want" grep -q "^makespan $want\$" "$tmpdir/out"
done
expect_ok "sched --json" "$MERAK" sched --schedule zb-h1 --pp 4 --micro-batches 8 --verify --json
check "json is one object with the contract keys" "$PYTHON" -c '
import json, sys
o = json.load(open(sys.argv[1]))
for k in ("schedule", "stages", "micro_batches", "vpp", "recompute", "makespan", "streams", "max_inflight"):
    assert k in o, k
assert o["verified"] is True and o["schedule"] == "zb-h1" and len(o["streams"]) == 4
ops = {i["op"] for st in o["streams"] for i in st}
assert "B_IN" in ops and "B_W" in ops and "B" not in ops
assert set(o["streams"][0][0]) == {"op", "mb", "chunk", "peer", "ckpt"}
' "$tmpdir/out"
check "json leaves stderr empty" test ! -s "$tmpdir/err"
expect_ok "interleaved default vpp" "$MERAK" sched --schedule interleaved --pp 2 --micro-batches 4 --verify
check "interleaved verified" grep -q "^verified: complete" "$tmpdir/out"
expect_ok "help" "$MERAK" sched --help
# looped-bfs (issue 35): the closed form (v m + p - 1)(F + B) with unit
# costs F 1, B 2 at p 4, m 8, v 2 without recompute and at p 3, m 4, v 3
# (m not a multiple of p), every stage holding all m v slots; torchtitan's
# name gives the same streams
for c in "4 8 2 57" "3 4 3 42"; do
  set -- $c
  $MERAK sched --schedule looped-bfs --pp $1 --micro-batches $2 --vpp $3 --recompute none >"$tmpdir/lb" 2>&1
  check "looped-bfs p $1 m $2 v $3: makespan $4, $(($2 * $3)) in flight" sh -c \
    "grep -q '^makespan $4\$' '$tmpdir/lb' && [ \$(grep -c 'max in flight $(($2 * $3))\$' '$tmpdir/lb') -eq $1 ]"
done
$MERAK sched --schedule LoopedBFS --pp 4 --micro-batches 8 --vpp 2 --recompute none >"$tmpdir/lb2" 2>&1
$MERAK sched --schedule looped-bfs --pp 4 --micro-batches 8 --vpp 2 --recompute none >"$tmpdir/lb1" 2>&1
check "LoopedBFS is looped-bfs (the same output, its name printed canonically)" cmp -s "$tmpdir/lb1" "$tmpdir/lb2"
finish
