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
expect_fail "different plans" "different plans" -- "$MERAK" trace diff "$T/a.json" "$T/other.json"
expect_fail "missing file" "cannot read trace" -- "$MERAK" trace summary "$T/none.json"
expect_fail "malformed" "malformed JSON" -- "$MERAK" trace summary "$top_srcdir/tests/models/bad-syntax.json"
expect_fail "unknown action" "unknown action 'merge'" -- "$MERAK" trace merge a b
expect_fail "wrong arity" "takes 2 file" -- "$MERAK" trace diff "$T/a.json"
finish
