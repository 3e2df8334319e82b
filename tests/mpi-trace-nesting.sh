#!/bin/sh
# merak run --trace is properly nested (issue 20): the p2p track held a
# SEND_ACT1 starting inside SEND_ACT0 (sends in flight together) and the
# dp track several bucket all-reduces at once; they now take lanes of
# their own (tid = stream + 10 x lane, "p2p #2"), which `merak trace
# summary|diff` read as their stream.  `merak trace check` is the checker.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
# run N CASE ARGS...: trace the last of two steps, check the nesting
run() {
  n=$1; c=$2; shift 2
  if ! timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run --model gpt-tiny --gbs 32 --steps 2 --json "$@" \
      --trace "$tmpdir/$c.json" >"$tmpdir/$c.out" 2>&1; then
    echo "FAIL: $c: merak run $*"; cat "$tmpdir/$c.out"; fails=$((fails + 1)); return
  fi
  expect_ok "$c: every track nested" "$MERAK" trace check "$tmpdir/$c.json"
}
run 2 pp2 --pp 2
run 4 pp2-dp2 --pp 2 --dp 2
run 4 pp2-dp2-zb --pp 2 --dp 2 --schedule zb-h1 --zero 1
run 4 pp2-tp2 --pp 2 --tp 2 --tp-overlap 1
check "pp2-dp2: several sends or reductions in flight took a second lane" \
  grep -q '"name":"thread_name","args":{"name":"\(p2p\|dp\) #2"}' "$tmpdir/pp2-dp2.json"
check "lane tids map to their stream (tid % 10 < 5); events in start order per track" "$PY" -c '
import json, sys
for p in sys.argv[1:]:
    last = {}
    for e in json.load(open(p))["traceEvents"]:
        if e["ph"] != "X": continue
        assert e["tid"] % 10 < 5, (p, e)
        k = (e["pid"], e["tid"]); assert e["ts"] >= last.get(k, 0), (p, e); last[k] = e["ts"]
' "$tmpdir/pp2.json" "$tmpdir/pp2-dp2.json" "$tmpdir/pp2-dp2-zb.json" "$tmpdir/pp2-tp2.json"
expect_ok "summary of the laned trace" "$MERAK" trace summary "$tmpdir/pp2-dp2.json"
check "... counts every SEND_ACT and AR.dp, whatever its lane" "$PY" -c '
import json, sys
X = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
rows = {l.split()[0]: l.split()[1:] for l in open(sys.argv[2]) if len(l.split()) == 3}
for k in ("SEND_ACT", "AR.dp"):
    n = sum(1 for e in X if e["name"].rstrip("0123456789") == k)
    assert int(rows[k][0]) == n, (k, rows[k], n)
' "$tmpdir/pp2-dp2.json" "$tmpdir/out"
"$MERAK" sim --model gpt-tiny --cluster dgx-a100 --gbs 32 --pp 2 --dp 2 --trace "$tmpdir/pred.json" >/dev/null
expect_ok "trace diff of sim vs the laned run" "$MERAK" trace diff "$tmpdir/pred.json" "$tmpdir/pp2-dp2.json" --json
check "... matched events > 0" "$PY" -c "import json; assert json.load(open('$tmpdir/out'))['matched_events'] > 0"
finish
