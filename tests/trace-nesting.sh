#!/bin/sh
# Simulator traces are properly nested (issue 20): on every track (pid,
# tid) two complete events are disjoint or one holds the other; concurrent
# events of one stream go to lanes of their own (tid = stream + 10 x lane,
# merak/trace.h) that `merak trace summary|diff` read as their stream.
# `merak trace check` is the checker; it must catch a partial overlap.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}

# the checker: a partial overlap on one track fails (exit 1, names both),
# containment and the same overlap on two lanes pass
X='{"ph":"X","pid":0,"tid":1,"args":{"stage":0,"mb":0}'
printf '[%s,"name":"SEND_ACT0","ts":0,"dur":10}, %s,"name":"SEND_ACT1","ts":5,"dur":10}]\n' "$X" "$X" >"$tmpdir/bad.json"
"$MERAK" trace check "$tmpdir/bad.json" >"$tmpdir/out" 2>"$tmpdir/err"
check "a partial overlap: exit 1" [ $? -eq 1 ]
check "... one line naming both events" sh -c "[ \$(wc -l <$tmpdir/err) -eq 1 ] &&
  grep -q \"rank 0 track 1 (p2p): 'SEND_ACT1' .* starts inside 'SEND_ACT0'\" $tmpdir/err"
printf '[%s,"name":"OPT","ts":0,"dur":10}, %s,"name":"AR.dp","ts":2,"dur":8}, %s,"name":"F","ts":10,"dur":1}]\n' \
  "$X" "$X" "$X" >"$tmpdir/nest.json"
expect_ok "containment and touching events pass" "$MERAK" trace check "$tmpdir/nest.json"
sed 's/"tid":1,\(.*\)"tid":1/"tid":1,\1"tid":11/' "$tmpdir/bad.json" >"$tmpdir/lanes.json"
expect_ok "the overlap on two lanes of p2p passes" "$MERAK" trace check "$tmpdir/lanes.json"
expect_ok "... which summary reads as one p2p stream" "$MERAK" trace summary "$tmpdir/lanes.json"
check "... SEND_ACT: 2 events" grep -q "SEND_ACT  *2 " "$tmpdir/out"

cases=
# sim CASE ARGS...: trace a plan and check it
sim() {
  c=$1; shift
  cases="$cases $c"
  if ! "$MERAK" sim --cluster dgx-a100 "$@" --trace "$tmpdir/$c.json" >"$tmpdir/$c.out" 2>&1; then
    echo "FAIL: $c: merak sim $*"; cat "$tmpdir/$c.out"; fails=$((fails + 1)); return
  fi
  expect_ok "$c nested" "$MERAK" trace check "$tmpdir/$c.json"
}
T="--model gpt-tiny --gbs 32"
sim 1f1b $T --dp 2 --pp 2 --tp 2 --schedule 1f1b
sim interleaved $T --dp 2 --pp 2 --tp 2 --schedule interleaved --vpp 2
sim zb $T --dp 2 --pp 2 --tp 2 --schedule zb-h1
sim merak $T --dp 2 --pp 4 --schedule merak --recompute stage-aware:0.5
sim no-overlap $T --dp 2 --pp 2 --no-overlap-grad-reduce
sim sp $T --dp 2 --pp 2 --tp 2 --sequence-parallel --tp-overlap 1
G="--model gpt2-124m --gbs 32 --dp 2 --pp 2"
sim zero1-tied $G --zero 1
sim zero2-tied $G --zero 2 --schedule zb-h1
sim zero3-tied $G --zero 3
sim cp --model gpt-tiny --gbs 8 --cp 2 --pp 2 --tp 2
sim ep --model moe-tiny --gbs 16 --dp 4 --ep 2 --pp 2

# ZeRO-1 with a tied embedding: the last bucket's RS.dp and AR.tied start
# together on stage 0 (they overlapped on one track before lanes)
check "zero1-tied: AR.tied on dp's second lane (tid 13, 'dp #2')" sh -c \
  "grep -q '\"name\":\"AR.tied\",\"pid\":0,\"tid\":13' $tmpdir/zero1-tied.json &&
   grep -q '\"tid\":13,\"name\":\"thread_name\",\"args\":{\"name\":\"dp #2\"}' $tmpdir/zero1-tied.json"
check "every track's events in start order in the file; stream = tid % 10" "$PY" -c '
import json, sys
for path in sys.argv[1:]:
    last = {}
    for e in json.load(open(path))["traceEvents"]:
        if e["ph"] != "X": continue
        k = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(k, 0), (path, e)
        assert e["tid"] % 10 < 5 and e["tid"] < 1000, (path, e)
        last[k] = e["ts"]
' $(for c in $cases; do echo "$tmpdir/$c.json"; done)
# summary reads the lanes as their stream: its per-kind counts and totals
# are the python sums over all the trace'"'"'s events
expect_ok "zero1-tied summary" "$MERAK" trace summary "$tmpdir/zero1-tied.json"
check "... AR.tied counted once per stage, RS.dp all buckets" "$PY" -c '
import json, re, sys
X = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
rows = {l.split()[0]: l.split()[1:] for l in open(sys.argv[2]) if len(l.split()) == 3}
for k in ("AR.tied", "RS.dp", "AG.dp"):
    d = [e["dur"] for e in X if re.sub(r"[0-9]+$", "", e["name"]) == k]
    assert int(rows[k][0]) == len(d) and abs(float(rows[k][1]) - sum(d) / 1e3) < 1e-3, (k, rows[k], len(d))
' "$tmpdir/zero1-tied.json" "$tmpdir/out"
expect_ok "diff of a laned trace against itself" "$MERAK" trace diff "$tmpdir/zero1-tied.json" "$tmpdir/zero1-tied.json"
finish
