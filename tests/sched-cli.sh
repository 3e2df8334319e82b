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
# zb-h2, zb-v, dualpipev (issue 35): without recompute at p 4, m 8 zb-h2
# takes zb-h1's 3m + p - 1 = 27 with stage 0 holding 2p - 1 = 7; the V
# schedules show two chunks per stage placed in a V (stage s: virtual
# stages s and 2p-1-s), split B_IN / B_W, every stage holding 2p (zb-v)
# or 2p + 1 (dualpipev) chunk slots; torchtitan's names give the same
expect_ok "zb-h2" "$MERAK" sched --schedule zb-h2 --pp 4 --micro-batches 8 --recompute none --verify
check "zb-h2: makespan 27, stage 0 holds 7" sh -c "grep -q '^makespan 27\$' '$tmpdir/out' &&
  grep -q '^stage 0: .*max in flight 7\$' '$tmpdir/out'"
for s in zb-v:8 dualpipev:9; do
  k=${s%%:*}; held=${s#*:}
  expect_ok "$k --json" "$MERAK" sched --schedule "$k" --pp 4 --micro-batches 8 --recompute none --verify --json
  check "$k: two chunks in a V, split backward, $held slots held" "$PYTHON" -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["verified"] is True and o["vpp"] == 2 and o["placement"] == "v"
assert o["virtual_stages"] == [[s, 7 - s] for s in range(4)], o["virtual_stages"]
for st in o["streams"]:
    assert {i["chunk"] for i in st if i["op"] == "F"} == {0, 1}
    ops = {i["op"] for i in st}
    assert "B_IN" in ops and "B_W" in ops and "B" not in ops
# the V bottom hands chunk 0 to chunk 1 locally: stage 3 sends no chunk-0 activation
assert not [i for i in o["streams"][3] if i["op"] == "SEND_ACT" and i["chunk"] == 0]
# stage 0 holds the embedding and the head: it loads every micro-batch once
assert sum(i["op"] == "LOAD" for i in o["streams"][0]) == 8
assert o["max_inflight"] == [int(sys.argv[2])] * 4, o["max_inflight"]
' "$tmpdir/out" "$held"
done
"$MERAK" sched --schedule ZBVZeroBubble --pp 4 --micro-batches 8 >"$tmpdir/a" 2>&1
"$MERAK" sched --schedule zb-v --pp 4 --micro-batches 8 >"$tmpdir/b" 2>&1
check "ZBVZeroBubble is zb-v" cmp -s "$tmpdir/a" "$tmpdir/b"
"$MERAK" sched --schedule DualPipeV --pp 4 --micro-batches 8 >"$tmpdir/a" 2>&1
"$MERAK" sched --schedule dualpipev --pp 4 --micro-batches 8 >"$tmpdir/b" 2>&1
check "DualPipeV is dualpipev" cmp -s "$tmpdir/a" "$tmpdir/b"
expect_fail "zb-v runs two chunks only" "runs vpp 2 exactly" -- "$MERAK" sched --schedule zb-v --pp 4 --micro-batches 8 --vpp 4
expect_fail "dualpipev needs m >= 2p" "at least 2 x pp = 8 micro-batches" -- "$MERAK" sched --schedule dualpipev --pp 4 --micro-batches 6
# dualpipev's F&B pairs: per rank r, 2(m-2p+r+1) in step 4 (the last
# rank's first apart) and p-r-1 in step 5, each an overlapped B_IN
# (text "+") right after another micro-batch's F
expect_ok "dualpipev pairs" "$MERAK" sched --schedule dualpipev --pp 4 --micro-batches 8 --json
check "dualpipev: 5, 6, 7, 7 overlapped pairs" "$PYTHON" -c '
import json, sys
o = json.load(open(sys.argv[1]))
n = []
for st in o["streams"]:
    comp = [i for i in st if i["op"] in ("F", "F_PRE", "B", "B_IN", "B_W", "R")]
    for a, b in zip(comp, comp[1:]):
        if b.get("overlap"):
            assert b["op"] == "B_IN" and a["op"] == "F" and (a["mb"], a["chunk"]) != (b["mb"], b["chunk"]), (a, b)
    n.append(sum(1 for i in st if i.get("overlap")))
assert n == [5, 6, 7, 7], n
' "$tmpdir/out"
"$MERAK" sched --schedule dualpipev --pp 4 --micro-batches 8 >"$tmpdir/t" 2>&1
check "dualpipev text marks the pairs" sh -c "grep -q 'B_IN[0-9]*\.[01]+ ' '$tmpdir/t'"
finish
