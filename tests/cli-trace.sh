#!/bin/sh
# merak trace summary / diff on small hand-made traces.
. "$top_srcdir/tests/lib.sh"
T="$top_srcdir/tests/traces"
PY=${PYTHON:-python3}
expect_ok "summary" "$MERAK" trace summary "$T/a.json"
check "summary lists kinds" grep -q "SEND_ACT" "$tmpdir/out"
"$MERAK" trace diff "$T/a.json" "$T/a.json" --json >"$tmpdir/self.json"
check "a trace against itself: zero error" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["step_rel_err"] == 0 and d["event_mean_abs_rel_err"] == 0 and d["matched_events"] == 6, d
' "$tmpdir/self.json"
"$MERAK" trace diff "$T/a.json" "$T/b.json" --json >"$tmpdir/ab.json"
check "B events 20 vs 25 us: -20% on kind B, step 50 vs 55 us" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
k = d["kinds"]["B"]
assert abs(k["predicted_s"] - 40e-6) < 1e-12 and abs(k["measured_s"] - 50e-6) < 1e-12, k
assert abs(d["step_rel_err"] - (50 - 55) / 55) < 1e-9, d["step_rel_err"]
' "$tmpdir/ab.json"
# a measured rank the prediction lacks is said and counted, not silently skipped
"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
j["traceEvents"] += [dict(e, pid=5) for e in j["traceEvents"] if e.get("pid") == 1]
json.dump(j, open(sys.argv[2], "w"))
' "$T/b.json" "$tmpdir/b5.json"
expect_ok "a measured trace with an extra rank 5" "$MERAK" trace diff "$T/a.json" "$tmpdir/b5.json"
check "the extra rank is named as not compared" grep -q "^unmatched: 1 measured rank(s) the prediction lacks, not compared: 5 " "$tmpdir/out"
"$MERAK" trace diff "$T/a.json" "$tmpdir/b5.json" --json >"$tmpdir/b5d.json"
check "JSON counts it (unmatched_ranks 1; a self-diff 0)" "$PY" -c '
import json, sys
assert json.load(open(sys.argv[1]))["unmatched_ranks"] == 1
assert json.load(open(sys.argv[2]))["unmatched_ranks"] == 0
' "$tmpdir/b5d.json" "$tmpdir/self.json"
expect_fail "different plans" "different plans" -- "$MERAK" trace diff "$T/a.json" "$T/other.json"
expect_fail "missing file" "cannot read trace" -- "$MERAK" trace summary "$T/none.json"
expect_fail "malformed" "malformed JSON" -- "$MERAK" trace summary "$top_srcdir/tests/models/bad-syntax.json"
expect_fail "unknown action" "unknown action 'merge'" -- "$MERAK" trace merge a b
expect_fail "wrong arity" "takes 2 file" -- "$MERAK" trace diff "$T/a.json"
finish
