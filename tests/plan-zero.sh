#!/bin/sh
# merak plan and ZeRO-2/3 (issue 17): the default search has every ZeRO
# stage and hybrid node groups, the fsdp baseline (ZeRO-3, no PP), the
# baselines that stay at ZeRO-1, and a saved ZeRO-3 plan that merak sim
# --plan runs unchanged.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
"$PY" -c "import json" 2>/dev/null || { echo "no python: skipped"; exit 77; }
m="--model gpt-20b --cluster dgx-a100 --gpus 64 --gbs 512"
expect_ok "fsdp baseline" sh -c "'$MERAK' plan $m --baseline fsdp --top 20 --json --save-plan '$tmpdir/f.json' \
  >'$tmpdir/fsdp.json'"
check "fsdp: every plan ZeRO-3 without pipeline, some with TP, some hybrid" "$PY" -c '
import json, sys
P = [p["plan"] for p in json.load(open(sys.argv[1]))["plans"]]
assert P and all(p["zero"] == 3 and p["pp"] == 1 and p["schedule"] == "1f1b" for p in P), P
assert any(p["tp"] > 1 for p in P) and any(p.get("zero_shard_size") for p in P)
assert all(p["recompute"] in ("none", "full") for p in P)
' "$tmpdir/fsdp.json"
"$MERAK" sim --plan "$tmpdir/f.json" --json >"$tmpdir/sim.json" 2>"$tmpdir/err"
check "merak sim --plan runs the saved ZeRO-3 plan unchanged" "$PY" -c '
import json, sys
a = json.load(open(sys.argv[1]))["plans"][0]; b = json.load(open(sys.argv[2]))
assert a["step_time_s"] == b["step_time_s"] and a["memory_breakdown"] == b["memory_breakdown"], (a, b)
assert "gathered" in b["memory_breakdown"][0]
' "$tmpdir/fsdp.json" "$tmpdir/sim.json"
expect_ok "default search" sh -c "'$MERAK' plan $m --top 100 --json >'$tmpdir/all.json'"
check "the default search ranks ZeRO-2/3 and hybrid plans beside ZeRO-0/1; #1 beats the fsdp baseline's" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1])); P = [p["plan"] for p in d["plans"]]
z = {p["zero"] for p in P}
assert {1, 3} <= z, z
assert d["plans"][0]["step_time_s"] <= json.load(open(sys.argv[2]))["plans"][0]["step_time_s"]
' "$tmpdir/all.json" "$tmpdir/fsdp.json"
for b in megatron-sp deepspeed; do
  "$MERAK" plan $m --baseline $b --top 20 --json >"$tmpdir/$b.json" 2>/dev/null
  check "$b baseline: ZeRO-1 at most, whole DP group" "$PY" -c '
import json, sys
P = [p["plan"] for p in json.load(open(sys.argv[1]))["plans"]]
assert P and all(p["zero"] <= 1 and "zero_shard_size" not in p for p in P)' "$tmpdir/$b.json"
done
expect_fail "unknown baseline names fsdp" "fsdp" -- "$MERAK" plan --model gpt-tiny --baseline fsdp2
finish
