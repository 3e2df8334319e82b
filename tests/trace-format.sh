#!/bin/sh
# The trace reader: the streamed parse accepts what the format allows,
# refuses bad numbers and bad JSON with one line, and `merak trace summary`
# is linear (a 16,129-rank simulator trace in seconds, not minutes) and
# agrees with an independent computation.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
T="$top_srcdir/tests/traces"

# mk NAME JSON: write a trace file
mk() { printf '%s\n' "$2" >"$tmpdir/$1.json"; }
X='{"ph":"X","name":"F0","pid":0,"tid":0,"ts":0,"dur":10,"args":{"stage":0,"mb":0}}'

# accepted forms: a bare array, other top-level keys around traceEvents
mk bare "[$X]"
expect_ok "a bare array of events" "$MERAK" trace summary "$tmpdir/bare.json"
mk around "{\"displayTimeUnit\":\"ms\", \"otherData\":{\"a\":[1,{\"b\":null}]}, \"traceEvents\":[ $X ,
 {\"ph\":\"C\",\"name\":\"memory\",\"pid\":0,\"ts\":1,\"args\":{\"bytes\":1048576}}], \"z\":-1.5e3}"
expect_ok "traceEvents among other keys" "$MERAK" trace summary "$tmpdir/around.json"
check "... counter gives the peak (1.0 MiB)" grep -q " 1\.0$" "$tmpdir/out"

# refuse NAME DESCRIPTION PATTERN JSON: the trace is one line on stderr, exit 2
refuse() {
  mk "$1" "$4"
  expect_fail "$2" "$3" -- "$MERAK" trace summary "$tmpdir/$1.json"
}

# refused: bad numbers
E='{"ph":"X","name":"F0","pid":0,"tid":0'
refuse negdur "negative duration" "event 0: 'ts' and 'dur' must lie in \[0, 2\^53\]" "[$E,\"ts\":0,\"dur\":-1}]"
refuse hugets "huge timestamp" "'ts' and 'dur' must lie" "[$E,\"ts\":1e300,\"dur\":1}]"
refuse overflow "number beyond a double" "malformed JSON: real number overflow" "[$E,\"ts\":1e400,\"dur\":1}]"
refuse nan "NaN" "malformed JSON" "[$E,\"ts\":NaN,\"dur\":1}]"
refuse negmem "negative counter" "event 1: counter 'bytes' must be a number in \[0, 2\^63\)" \
  "[$X, {\"ph\":\"C\",\"name\":\"memory\",\"pid\":0,\"ts\":1,\"args\":{\"bytes\":-5}}]"
refuse bigstage "stage beyond 2^30" "args.stage must be an integer in \[-1, 2\^30\]" \
  "[$E,\"ts\":0,\"dur\":1,\"args\":{\"stage\":1099511627776}}]"
refuse bigpid "pid beyond 2^20" "no integer 'pid'" \
  '[{"ph":"X","name":"F0","pid":9223372036854775807,"tid":0,"ts":0,"dur":1}]'

# refused: bad JSON anywhere in the file, with its line
refuse dupkey "duplicate top-level key" "dupkey.json:1:[0-9]+: malformed JSON: duplicate object key" \
  "{\"traceEvents\":[$X], \"traceEvents\":[$X]}"
refuse dupinner "duplicate key in an event" "malformed JSON: duplicate object key" "[$E,\"ph\":\"X\",\"ts\":0,\"dur\":1}]"
refuse trailing "text after the document" "malformed JSON: end of file expected" "[$X] x"
refuse comma "trailing comma" "comma.json:2:[0-9]+: malformed JSON" "[$X,
]"
refuse cut "truncated file" "malformed JSON" "{\"traceEvents\":[$X"
refuse badother "bad JSON outside the events" "malformed JSON" "{\"otherData\":{\"a\":}, \"traceEvents\":[$X]}"
refuse empty "empty file" "malformed JSON" ""
refuse noarray "traceEvents not an array" "no traceEvents array" '{"traceEvents":{}}'
refuse scalar "an event that is not an object" "event 0 has no 'ph'" '[1]'
expect_fail "a directory" "cannot read trace" -- "$MERAK" trace summary "$tmpdir"

# the reader's 1 MiB window: numbers, literals, UTF-8 and events cut by its
# edge parse as a whole; an error past it names its true line
check "values across the 1 MiB window edge" "$PY" -c '
import sys
X = "{\"ph\":\"X\",\"name\":\"F\u00e9%d\",\"pid\":0,\"tid\":0,\"ts\":%d,\"dur\":1}"
for k in range(1, 7):
    for tail in ("1234567", "true", "\"\u00e9\u00e9\u00e9\""):
        head = "{\"pad\": \"" + "x" * (2**20 - k - 17) + "\", \"n\": "
        body = head + tail + ", \"traceEvents\": [" + ",\n".join(X % (i, i) for i in range(3000)) + "]}"
        open("%s/edge-%d-%d.json" % (sys.argv[1], k, len(tail)), "w").write(body)
' "$tmpdir"
n=0; for f in "$tmpdir"/edge-*.json; do
  "$MERAK" trace summary "$f" >"$tmpdir/out" 2>"$tmpdir/err" && grep -q "3000 events" "$tmpdir/out" || n=$((n + 1))
done
check "... all 18 cut points read whole" [ $n -eq 0 ]
"$PY" -c '
import sys
X = "{\"ph\":\"X\",\"name\":\"F%d\",\"pid\":0,\"tid\":0,\"ts\":%d,\"dur\":1}"
ev = [X % (i, i) for i in range(40000)]
ev[30000] = ev[30000].replace("\"dur\":1", "\"dur\":1,,")
open(sys.argv[1], "w").write("{\"traceEvents\": [\n" + ",\n".join(ev) + "]}\n")
' "$tmpdir/late.json"
expect_fail "an error 2 MB in names its line" "late.json:30002:[0-9]+: malformed JSON" -- \
  "$MERAK" trace summary "$tmpdir/late.json"

# the summary against an independent computation, on a simulator trace
"$MERAK" sim --model gpt-tiny --cluster dgx-a100 --gbs 32 --dp 2 --pp 2 --tp 2 --schedule zb-h1 --zero 1 \
  --trace "$tmpdir/sim.json" >/dev/null
expect_ok "summary of a simulator trace" "$MERAK" trace summary "$tmpdir/sim.json"
check "summary = python's per-rank busy/idle/peak and per-kind count/total" "$PY" -c '
import json, re, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
X = [e for e in ev if e["ph"] == "X"]
lo = min(e["ts"] for e in X); hi = max(e["ts"] + e["dur"] for e in X); span = hi - lo
want = ["trace: %d ranks, %d events, span %.3f ms" % (len({e["pid"] for e in ev if e["ph"] in "XC"}), len(X), span / 1e3)]
peak = {}
for e in ev:
    if e["ph"] == "C": peak[e["pid"]] = max(peak.get(e["pid"], 0), e["args"]["bytes"])
for r in sorted({e["pid"] for e in X}):
    busy = sum(e["dur"] for e in X if e["pid"] == r and e["tid"] == 0)
    want.append("%d %d %.3f %.1f%% %.1f" % (r, X[[e["pid"] for e in X].index(r)]["args"]["stage"], busy / 1e3,
                100 * (1 - busy / span), peak.get(r, 0) / 2**20))
kinds = {}
for e in X: kinds.setdefault(re.sub(r"[0-9]+$", "", e["name"]), []).append(e["dur"])
got = [" ".join(l.split()) for l in open(sys.argv[2])]
body = [l for l in got if not l.startswith(("rank ", "kind "))]
assert body[:len(want)] == want, (body[:len(want)], want)
rows = {l.split()[0]: l.split()[1:] for l in body[len(want):]}
assert set(rows) == set(kinds), (set(rows), set(kinds))
for k, d in kinds.items():
    assert int(rows[k][0]) == len(d) and abs(float(rows[k][1]) - sum(d) / 1e3) < 1e-3, (k, rows[k], len(d), sum(d))
' "$tmpdir/sim.json" "$tmpdir/out"

# a many-rank trace: 16,129 ranks (dp 32 x pp 64 x tp 8), ~60k events,
# 8 MB.  The quadratic summary took 12 s here, the linear one about 1 (2.4
# under ASan); the timeout only guards against a hang, as timed unit tests
# fail on a loaded machine: the speed figures come from
# experiments/bench-trace.sh.
"$MERAK" sim --model gpt-175b --cluster dgx-a100 --dp 32 --pp 64 --tp 8 --gbs 2048 --trace "$tmpdir/big.json" >/dev/null
expect_ok "16,129-rank trace: summary" timeout 120 "$MERAK" trace summary "$tmpdir/big.json"
check "... lists all 64 stages' ranks" [ "$(grep -c '^  [0-9]' "$tmpdir/out")" -eq 64 ]
expect_ok "16,129-rank trace: diff against itself" timeout 120 "$MERAK" trace diff "$tmpdir/big.json" "$tmpdir/big.json"
finish
