#!/bin/sh
# Plan files: format_version, unknown keys refused at every level, and the
# `plan` object of `merak sim --json` / `merak plan --json` is itself a plan
# file that `merak sim --plan` runs to the same step time.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
M="--model gpt-tiny --cluster dgx-a100 --gbs 32"

# edit SRC DST PYTHON-STATEMENT: load plan p from SRC, run the statement, write DST
edit() {
  "$PY" -c "import json, sys
p = json.load(open(sys.argv[1]))
$3
json.dump(p, open(sys.argv[2], 'w'))" "$1" "$2"
}
step() { "$PY" -c "import json, sys; print(repr(json.load(open(sys.argv[1]))['step_time_s']))" "$1"; }
# runs_as SRC PYTHON-STATEMENT DESCRIPTION REF.json: the edited plan runs to REF's step time
runs_as() {
  edit "$1" "$tmpdir/edited.json" "$2"
  expect_ok "$3" $MERAK sim --plan "$tmpdir/edited.json" --json
  check "... same step time as $(basename "$4")" [ "$(step "$4")" = "$(step "$tmpdir/out")" ]
}

# sim --json: the plan object carries the version and runs unchanged
expect_ok "sim --json" $MERAK sim $M --dp 2 --pp 2 --tp 2 --schedule zb-h1 --json
cp "$tmpdir/out" "$tmpdir/sim.json"
edit "$tmpdir/sim.json" "$tmpdir/p.json" "p = p['plan']"
check "plan object starts with format_version 1" "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
assert list(p)[0] == 'format_version' and p['format_version'] == 1, list(p)[:2]" "$tmpdir/p.json"
expect_ok "sim --plan (from sim --json)" $MERAK sim --plan "$tmpdir/p.json" --json
check "same step time as the sim it came from" [ "$(step "$tmpdir/sim.json")" = "$(step "$tmpdir/out")" ]

# plan --json: every entry's plan object is a plan file
expect_ok "plan --json" $MERAK plan --model gpt-tiny --cluster dgx-a100 --gpus 4 --gbs 16 --top 2 --json
cp "$tmpdir/out" "$tmpdir/plans.json"
edit "$tmpdir/plans.json" "$tmpdir/p0.json" "p = p['plans'][0]['plan']"
expect_ok "sim --plan (from plan --json)" $MERAK sim --plan "$tmpdir/p0.json" --json
check "same step time as the planner's" [ "$("$PY" -c "import json, sys
print(repr(json.load(open(sys.argv[1]))['plans'][0]['step_time_s']))" "$tmpdir/plans.json")" = "$(step "$tmpdir/out")" ]

# a file of the releases before versioning (no format_version) is version 1
runs_as "$tmpdir/p.json" "del p['format_version']" "plan without format_version (read as version 1)" "$tmpdir/sim.json"

# refused: other versions, unknown keys at every level, contradictions
edit "$tmpdir/p.json" "$tmpdir/e1.json" "p['format_version'] = 99"
expect_fail "format_version 99" "e1.json: plan format_version 99 is not supported \(this merak reads version 1\)" -- \
  $MERAK sim --plan "$tmpdir/e1.json"
edit "$tmpdir/p.json" "$tmpdir/e2.json" "p['format_version'] = '1'"
expect_fail "format_version not an integer" "field 'format_version' must be an integer" -- \
  $MERAK sim --plan "$tmpdir/e2.json"
edit "$tmpdir/p.json" "$tmpdir/e3.json" "p['shedule'] = 'merak'"
expect_fail "misspelt top-level key" "e3.json: unknown field 'shedule'" -- $MERAK sim --plan "$tmpdir/e3.json"
edit "$tmpdir/p.json" "$tmpdir/e4.json" "p['model']['hiden_size'] = 64"
expect_fail "unknown key in model" "e4.json: model: unknown field 'hiden_size'" -- $MERAK sim --plan "$tmpdir/e4.json"
edit "$tmpdir/p.json" "$tmpdir/e5.json" "p['model']['json_path'] = 'x.json'"
expect_fail "json_path on a gpt model" "model: unknown field 'json_path'" -- $MERAK sim --plan "$tmpdir/e5.json"
edit "$tmpdir/p.json" "$tmpdir/e6.json" "p['micro_batches'] = 3"
expect_fail "micro_batches contradicting the batch" "'micro_batches' is 3, but .* = 16" -- \
  $MERAK sim --plan "$tmpdir/e6.json"
expect_fail "run --plan reads the same way" "unknown field 'shedule'" -- $MERAK run --plan "$tmpdir/e3.json" --steps 0

# overlap_grad_reduce: absent means on (files from before the field); only
# --no-overlap-grad-reduce writes it (false), and the file runs to the same
# time; it costs time on a real cluster with DP, none on the ideal one
key() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['plan'].get('overlap_grad_reduce', '-'))" "$1"; }
D="$M --dp 2 --pp 2 --tp 2 --schedule zb-h1 --json"
check "default plan: no overlap_grad_reduce key" [ "$(key "$tmpdir/sim.json")" = "-" ]
expect_ok "sim --no-overlap-grad-reduce" $MERAK sim $D --no-overlap-grad-reduce
cp "$tmpdir/out" "$tmpdir/nov.json"
check "... writes overlap_grad_reduce false" [ "$(key "$tmpdir/nov.json")" = "False" ]
check "... a longer step on dgx-a100 (DP all-reduce exposed)" "$PY" -c "import json, sys
a, b = (json.load(open(f))['step_time_s'] for f in sys.argv[1:])
assert b > a, (a, b)" "$tmpdir/sim.json" "$tmpdir/nov.json"
runs_as "$tmpdir/nov.json" "p = p['plan']" "sim --plan with overlap_grad_reduce false" "$tmpdir/nov.json"
runs_as "$tmpdir/p.json" "p['overlap_grad_reduce'] = True" "overlap_grad_reduce true" "$tmpdir/sim.json"
edit "$tmpdir/p.json" "$tmpdir/e7.json" "p['overlap_grad_reduce'] = 1"
expect_fail "overlap_grad_reduce not a boolean" "'overlap_grad_reduce' must be true or false" -- \
  $MERAK sim --plan "$tmpdir/e7.json"

# grad_reduce_dtype: written only when given; an fp16 plan with
# --accumulate-allreduce-grads-in-fp32 (Megatron-LM's) has bf16's fp32
# gradients (twice the bytes), a bf16 plan with --grad-reduce-dtype bf16
# fp16's; a 16-bit type that is not the plan's is refused
F="$M --dp 2 --pp 2 --tp 2 --dtype fp16 --json"
expect_ok "sim --dtype fp16" $MERAK sim $F
cp "$tmpdir/out" "$tmpdir/f16.json"
expect_ok "sim --dtype fp16 --accumulate-allreduce-grads-in-fp32" $MERAK sim $F --accumulate-allreduce-grads-in-fp32
cp "$tmpdir/out" "$tmpdir/f16a.json"
check "... written when set, twice the gradient bytes" "$PY" -c "import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert 'grad_reduce_dtype' not in a['plan'] and b['plan']['grad_reduce_dtype'] == 'fp32'
assert b['memory_breakdown'][0]['grads'] == 2 * a['memory_breakdown'][0]['grads']" "$tmpdir/f16.json" "$tmpdir/f16a.json"
runs_as "$tmpdir/f16a.json" "p = p['plan']" "sim --plan with grad_reduce_dtype fp32" "$tmpdir/f16a.json"
expect_ok "sim --grad-reduce-dtype bf16 (a bf16 plan)" $MERAK sim $M --dp 2 --pp 2 --tp 2 --grad-reduce-dtype bf16 --json
check "... bf16 gradients: fp16's bytes" "$PY" -c "import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b['plan']['grad_reduce_dtype'] == 'bf16' and b['memory_breakdown'][0]['grads'] == a['memory_breakdown'][0]['grads']" \
  "$tmpdir/f16.json" "$tmpdir/out"
expect_fail "fp16 gradients of a bf16 plan" "fp16 gradients do not go with a bf16 plan" -- \
  $MERAK sim $M --dp 2 --grad-reduce-dtype fp16
# merak plan searches with it: every plan carries it, a 16-bit type not the dtype's is refused
expect_ok "plan --grad-reduce-dtype bf16" $MERAK plan --model gpt-tiny --gpus 4 --gbs 16 --top 3 --grad-reduce-dtype bf16 --json
check "... every plan has bf16 gradients" "$PY" -c "import json, sys
j = json.load(open(sys.argv[1]))
assert j['plans'] and all(p['plan']['grad_reduce_dtype'] == 'bf16' for p in j['plans'])" "$tmpdir/out"
expect_fail "plan: fp16 gradients of a bf16 search" "fp16 gradients do not go with a bf16 plan" -- \
  $MERAK plan --model gpt-tiny --gpus 4 --gbs 16 --grad-reduce-dtype fp16
edit "$tmpdir/f16a.json" "$tmpdir/e8.json" "p = p['plan']; p['grad_reduce_dtype'] = 'fp8'"
expect_fail "grad_reduce_dtype fp8" "'grad_reduce_dtype' must be fp32, bf16 or fp16" -- $MERAK sim --plan "$tmpdir/e8.json"
I="--model gpt-tiny --cluster ideal --gbs 32 --dp 4 --pp 2 --json"
expect_ok "ideal, overlap" $MERAK sim $I
cp "$tmpdir/out" "$tmpdir/i1.json"
expect_ok "ideal, no overlap" $MERAK sim $I --no-overlap-grad-reduce
check "ideal cluster: the same step time either way (DP costs 0)" [ "$(step "$tmpdir/i1.json")" = "$(step "$tmpdir/out")" ]

# the committed plan files carry the version and load
# the baselines' and families' tables keep their columns where a layout is
# longer than the header's 24 characters (EP with DeepEP, CP)
$MERAK plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq-length 4096 --top 1 \
  --moe-enable-deepep --explain >"$tmpdir/ex.txt" 2>&1
check "explain tables: a long layout keeps the schedule column aligned" "$PYTHON" -c '
import re, sys
lines = open(sys.argv[1]).read().split("\n")
n = 0
for i, l in enumerate(lines):
    if re.match(r"  (system|family) +GPUs  layout", l):
        col = l.index("schedule")
        for r in lines[i + 1:]:
            if not r.startswith("  ") or "GPUs  layout" in r: break
            m = re.search(r"\) +(1f1b|interleaved|gpipe|merak|zb-\S+|dualpipev|looped-bfs) ", r)
            if m: n += 1; assert r.index(m.group(1), m.start()) == col, (r, col)
assert n >= 2 and any("DeepEP)" in l for l in lines), n' "$tmpdir/ex.txt"
for f in "$top_srcdir"/experiments/merak-paper/results/gpt-1.5b-*.plan.json; do
  check "$(basename "$f"): format_version 1" grep -q '"format_version": 1,' "$f"
  expect_ok "$(basename "$f") loads" $MERAK sim --plan "$f"
done
finish
