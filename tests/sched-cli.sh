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
finish
