#!/bin/sh
# The step breakdown of `merak sim --json` (issue 21, `explain`): over
# schedules, TP overlap levels, ZeRO 0-3, recompute policies, CP and EP,
# on the ideal cluster and dgx-a100, breakdown_s sums to step_time_s
# (1e-9 relative: the parts are measured on one stage's timeline and the
# bubble is what is left), every part is >= 0, the bubble equals the gaps
# measured in that timeline (idle_s), memory_bytes sums to the worst
# stage's peak, and mfu + the mfu_gap parts = 1.  `--explain` prints the
# same table; the JSON keys do not depend on it.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
"$PY" -c "import json" 2>/dev/null || { echo "no python3: skipped"; exit 77; }

n=0
run() { # run CLUSTER ARGS...: one case into $tmpdir/c$n.json
  n=$((n + 1)); cl=$1; shift
  echo "--cluster $cl $*" >"$tmpdir/c$n.args"
  "$MERAK" sim --cluster "$cl" "$@" --json >"$tmpdir/c$n.json" 2>"$tmpdir/c$n.err" ||
    { echo "FAIL: merak sim --cluster $cl $*"; cat "$tmpdir/c$n.err"; fails=$((fails + 1)); }
}
m="--model gpt2-124m --num-layers 8 --gbs 16"
for cl in ideal dgx-a100; do
  for s in gpipe 1f1b "interleaved --vpp 2" zb-h1 merak merak-pre merak-last; do
    run $cl $m --dp 2 --pp 2 --tp 2 --schedule $s
  done
  for ov in 0 1 2 3; do run $cl $m --pp 2 --tp 4 --tp-overlap $ov --sequence-parallel; done
  for z in 0 1 2 3; do run $cl $m --dp 4 --pp 2 --zero $z; done
  run $cl $m --dp 4 --zero 3 --zero-shard-group node --no-overlap-grad-reduce
  for r in none full selective auto stage-aware:0.5; do run $cl $m --dp 2 --pp 2 --tp 2 --recompute $r; done
  run $cl --model llama-tiny --gbs 8 --dp 2 --cp 2 --pp 2
  run $cl --model gpt2-124m --num-layers 8 --seq-length 4096 --gbs 8 --cp 8 --tp 2
  run $cl --model moe-tiny --gbs 8 --dp 4 --ep 2 --pp 2
  run $cl --model moe-tiny --gbs 8 --dp 4 --ep 4 --zero 1
done
run dgx-a100 --model mixtral-8x7b --seq-length 4096 --gbs 64 --dp 8 --ep 8 --pp 4 --tp 2 --recompute full
run dgx-a100 --model gpt-2.5b --gbs 64 --dp 2 --pp 4 --tp 4 --schedule interleaved --vpp 3 --tp-overlap 2

check "$n cases: breakdown_s sums to step_time_s, bubble = idle_s >= 0, memory sums to the peak, MFU gap to 1" \
  "$PY" - "$tmpdir" "$n" <<'PYEOF'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
bad = 0
for i in range(1, n + 1):
    args = open("%s/c%d.args" % (d, i)).read().strip()
    try:
        j = json.load(open("%s/c%d.json" % (d, i)))
    except ValueError:
        print("  no JSON:", args); bad += 1; continue
    e, T = j["explain"], j["step_time_s"]
    b = e["breakdown_s"]
    want = ["forward", "backward", "recompute", "optimizer", "exposed_tp", "exposed_cp", "exposed_ep",
            "exposed_pp", "exposed_dp", "bubble"]
    errs = []
    if list(b) != want: errs.append("keys %s" % list(b))
    s = sum(b.values())
    if abs(s - T) > 1e-9 * T: errs.append("sum %r != step %r" % (s, T))
    neg = [k for k, v in b.items() if v < -1e-12 * T]
    if neg: errs.append("negative %s" % neg)
    if abs(b["bubble"] - e["idle_s"]) > 1e-9 * T: errs.append("bubble %r != idle %r" % (b["bubble"], e["idle_s"]))
    mem = e["memory_bytes"]; ws = j["worst_stage"]
    if abs(sum(mem.values()) - j["peak_memory_bytes"][ws]) > 1e-9 * j["peak_memory_bytes"][ws]:
        errs.append("memory %r != peak %r" % (sum(mem.values()), j["peak_memory_bytes"][ws]))
    if abs(sum(e["mfu_gap"].values()) - 1) > 1e-9: errs.append("mfu_gap sums to %r" % sum(e["mfu_gap"].values()))
    if not (0 <= e["kernel_efficiency"] <= 1 + 1e-9): errs.append("kernel_efficiency %r" % e["kernel_efficiency"])
    if errs:
        bad += 1; print("  %s: %s" % (args, "; ".join(errs)))
# the parts are measured: something in every kind shows where it exists
def case(pred):
    return [json.load(open("%s/c%d.json" % (d, i)))["explain"]["breakdown_s"] for i in range(1, n + 1)
            if pred(open("%s/c%d.args" % (d, i)).read())]
for kind, pred in [("exposed_tp", lambda a: "dgx" in a and "--tp 4" in a and "overlap 0" in a),
                   ("exposed_cp", lambda a: "dgx" in a and "--cp 8" in a),
                   ("exposed_ep", lambda a: "dgx" in a and "--ep" in a),
                   ("exposed_dp", lambda a: "dgx" in a and "--zero 3" in a),
                   ("recompute", lambda a: "recompute full" in a),
                   ("bubble", lambda a: "gpipe" in a)]:
    if not all(x[kind] > 0 for x in case(pred)):
        bad += 1; print("  %s is 0 where it must show" % kind)
if not all(x["recompute"] == 0 for x in case(lambda a: "recompute none" in a)):
    bad += 1; print("  recompute > 0 without recompute")
sys.exit(1 if bad else 0)
PYEOF

# the ideal cluster: no communication cost, so every exposed part is 0
check "ideal: every exposed part is 0" "$PY" -c '
import json, sys
j = json.load(open(sys.argv[1])); b = j["explain"]["breakdown_s"]
sys.exit(0 if all(b[k] == 0 for k in b if k.startswith("exposed")) else 1)' "$tmpdir/c1.json"

expect_ok "sim --explain prints the table" "$MERAK" sim --cluster dgx-a100 $m --dp 2 --pp 2 --tp 2 --explain
check "the table names the parts, the stage and the MFU gap" sh -c "grep -q 'bubble' '$tmpdir/out' &&
  grep -q 'exposed tp' '$tmpdir/out' && grep -q 'stage' '$tmpdir/out' && grep -q 'MFU' '$tmpdir/out' &&
  grep -q 'kernel efficiency' '$tmpdir/out' && grep -q 'gradients' '$tmpdir/out'"
"$MERAK" sim --cluster dgx-a100 $m --dp 2 --pp 2 --tp 2 >"$tmpdir/plain"
check "without --explain the human output is as before (no breakdown)" sh -c "! grep -q 'step breakdown' '$tmpdir/plain'"
finish
