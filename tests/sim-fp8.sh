#!/bin/sh
# FP8 (issue 18): --dtype fp8 in merak sim / merak plan, Transformer-Engine
# style (src/graph/graph.c "fp8 plans", sim/memory.c fp8_copies):
#  - refused (one line, exit 2) where the device has no FP8 tensor cores
#    and by the CPU executor;
#  - a step is 1.05x..2x faster than bf16 (llama-3-70b on dgx-h100);
#  - memory: weights + 2 bytes per linear parameter (FP8 copy and
#    transpose), gradients and optimizer as bf16's; a linear's saved input
#    1 byte an element instead of 2;
#  - nothing changes on `ideal` (all rates equal): the same step;
#  - the planner searches fp8 only when asked;
#  - the new presets are listed and load.
. "${top_srcdir:-.}/tests/lib.sh"
L="--model llama-3-70b --seq-length 8192 --dp 4 --pp 4 --tp 8 --zero 1"
T="--model gpt-tiny --pp 2 --gbs 8 --schedule 1f1b"
for c in dgx-a100 a100-40gb rtx3090-pcie; do
  expect_fail "sim fp8 on $c" "fp8 needs FP8 tensor cores" -- $MERAK sim $T --cluster $c --dtype fp8
done
expect_fail "plan fp8 on dgx-a100" "fp8 needs FP8 tensor cores" -- \
  $MERAK plan --model gpt-tiny --cluster dgx-a100 --gpus 8 --gbs 8 --dtype fp8
expect_fail "sim fp8 on a cluster file without fp8" "fp8 needs FP8 tensor cores" -- \
  $MERAK sim $T --cluster "$top_srcdir/traces/clusters/rtx3090-pcie.json" --dtype fp8
expect_fail "run fp8 on the CPU backend" "no fp8 path: --dtype fp8 is for merak sim" -- $MERAK run --dtype fp8 --steps 1
expect_fail "unknown dtype" "unknown dtype 'fp4'.*fp8" -- $MERAK sim $T --cluster dgx-h100 --dtype fp4

# a cluster file with an fp8 entry takes fp8 plans; one dumped from a preset keeps it
sed 's/"bf16": 1e12}/"bf16": 1e12, "fp8": 2e12}/' "$top_srcdir/traces/clusters/ideal-8.json" >"$tmpdir/fp8.json"
expect_ok "sim fp8 on a cluster file with fp8" $MERAK sim $T --cluster "$tmpdir/fp8.json" --dtype fp8

# the acceptance speed-up, both figures printed
for d in bf16 fp8; do
  $MERAK sim $L --cluster dgx-h100 --dtype $d --json >"$tmpdir/l-$d.json" || { echo "FAIL: llama $d"; exit 1; }
done
check "fp8 speeds llama-3-70b on dgx-h100 by 1.05x..2x" "$PYTHON" -c "
import json
b = json.load(open('$tmpdir/l-bf16.json'))['step_time_s']; f = json.load(open('$tmpdir/l-fp8.json'))['step_time_s']
print('  bf16 %.4f s, fp8 %.4f s: %.3fx' % (b, f, b / f))
assert 1.05 < b / f < 2"

# memory closed forms on gpt-tiny (tp 2: linears split, norms whole)
$MERAK model --model gpt-tiny --json >"$tmpdir/model.json" || { echo "FAIL: merak model"; exit 1; }
for d in bf16 fp8; do
  for rc in full none; do
    $MERAK sim $T --tp 2 --cluster dgx-h100 --dtype $d --recompute $rc --json >"$tmpdir/t-$d-$rc.json" ||
      { echo "FAIL: gpt-tiny $d $rc"; exit 1; }
  done
done
check "fp8 memory: weights + 2 B per linear parameter, grads and optimizer as bf16" "$PYTHON" -c "
import json
m = json.load(open('$tmpdir/model.json')); h = m['hidden_size']
lin = sum(l['params'] - 2 * h for l in m['layers'] if l['kind'] in ('attention', 'mlp'))  # less the layernorm
b = json.load(open('$tmpdir/t-bf16-full.json'))['memory_breakdown']
f = json.load(open('$tmpdir/t-fp8-full.json'))['memory_breakdown']
dw = sum(x['weights'] for x in f) - sum(x['weights'] for x in b)
print('  fp8 copies %g B, closed form %g B' % (dw, 2 * lin / 2))
assert dw == 2 * lin / 2
assert all(x['grads'] == y['grads'] and x['optimizer'] == y['optimizer'] for x, y in zip(b, f))"
check "fp8 activations: a linear's saved input 1 B an element (recompute none)" "$PYTHON" -c "
import json
m = json.load(open('$tmpdir/model.json')); h, ffn, N = m['hidden_size'], m['ffn_hidden_size'], m['seq_length'] * m['mbs']
B = json.load(open('$tmpdir/t-bf16-none.json')); F = json.load(open('$tmpdir/t-fp8-none.json'))
# per block on one TP rank: qkv and fc1 inputs h whole, proj h / 2 and fc2 ffn / 2 split
per = N * (2 * h + h / 2 + ffn / 2) * m['num_layers'] / 2  # a stage's 2 blocks
da = [x['activations'] - y['activations'] for x, y in zip(B['memory_breakdown'], F['memory_breakdown'])]
want = [i * per for i in B['max_inflight']]
print('  saved bytes less', da, 'closed form', want)
assert da == want"

# ideal: every rate equal, no cast cost: fp8 = bf16
for d in bf16 fp8; do $MERAK sim $T --cluster ideal --dtype $d --json >"$tmpdir/i-$d.json" || exit 1; done
check "ideal: fp8 step = bf16 step" "$PYTHON" -c "
import json
a, b = (json.load(open('$tmpdir/i-%s.json' % d))['step_time_s'] for d in ('bf16', 'fp8'))
assert abs(a - b) <= 1e-12 * a, (a, b)"

# the planner: fp8 only when asked
P="--model gpt-tiny --cluster dgx-h100 --gpus 8 --gbs 8 --top 3 --json"
$MERAK plan $P >"$tmpdir/p.json" && $MERAK plan $P --dtype fp8 >"$tmpdir/p8.json" || { echo "FAIL: merak plan"; exit 1; }
check "plan: bf16 unless asked, fp8 when asked" "$PYTHON" -c "
import json, re
a, b = open('$tmpdir/p.json').read(), open('$tmpdir/p8.json').read()
assert '\"fp8\"' not in a and '\"bf16\"' in a, 'default plan'
assert '\"fp8\"' in b and '\"bf16\"' not in b, 'fp8 plan'"

# Hopper's split accumulator (issue 38): an fp8 linear's backward GEMMs take
# fp8_split_acc_scale times their time; the forward and bf16 do not move.
# pp 1: the stage's backward is the sum of its ops; at GPT-175B's width every
# linear is GEMM-bound with the tokens (2048) its smallest dimension, so the
# growth is closed form: m x L x 48 tokens h^2 (dgrad + wgrad) / (P_fp8 eff),
# eff on the 16-bit curve with its half-dimension scaled by P_fp8 / P_bf16
# (sim/cost.c mk_cost_gemm_eff: 128 x 2).
X="--model gpt-175b --num-layers 2 --seq-length 2048 --gbs 8 --mbs 1 --schedule 1f1b --recompute none --json --explain"
for s in 1 2 3; do
  sed "s/\"bf16\": 71e12}/\"bf16\": 71e12, \"fp8\": 142e12}, \"fp8_split_acc_scale\": $s/" \
    "$top_srcdir/traces/clusters/rtx3090-pcie.json" >"$tmpdir/acc$s.json"
  for d in bf16 fp8; do
    $MERAK sim $X --cluster "$tmpdir/acc$s.json" --dtype $d >"$tmpdir/acc$s-$d.json" 2>/dev/null ||
      { echo "FAIL: acc $s $d"; exit 1; }
  done
done
check "fp8 backward linears take fp8_split_acc_scale times their time; forward and bf16 do not" "$PYTHON" -c "
import json
def b(s, d): return json.load(open('$tmpdir/acc%d-%s.json' % (s, d)))['explain']['breakdown_s']
f = [b(s, 'fp8') for s in (1, 2, 3)]; h = [b(s, 'bf16') for s in (1, 2, 3)]
assert f[0]['forward'] == f[1]['forward'] == f[2]['forward']
assert h[0] == h[1] == h[2]
d1, d2 = f[1]['backward'] - f[0]['backward'], f[2]['backward'] - f[0]['backward']
want = 8 * 2 * 48 * 2048 * 12288 ** 2 / (142e12 * 0.75 * 2048 / (2048 + 128 * 142 / 71))
print('  backward +%.6f s at 2, +%.6f at 3; closed form +%.6f' % (d1, d2, want))
assert abs(d1 - want) <= 1e-9 * want and abs(d2 - 2 * want) <= 1e-9 * want, (d1, d2, want)"
expect_fail "fp8_split_acc_scale below 1 refused" "fp8_split_acc_scale must be 0 or in \[1, 16\]" -- \
  $MERAK sim $T --cluster "$(sed 's/_scale": 1/_scale": 0.5/' "$tmpdir/acc1.json" >"$tmpdir/bad.json"; echo "$tmpdir/bad.json")"

# --fp8-recipe (Megatron-Core's): tensorwise (current scaling) reads each cast's input
# once more for its amax: slower than delayed, by under 10% on llama-3-70b; only for
# fp8 plans; mxfp8/blockwise refused; a plan file and the planner keep it
expect_fail "fp8-recipe on a bf16 plan" "--fp8-recipe tensorwise needs --dtype fp8" -- \
  $MERAK sim $T --cluster dgx-h100 --fp8-recipe tensorwise
expect_fail "fp8-recipe mxfp8" "--fp8-recipe must be delayed, tensorwise or torchao" -- \
  $MERAK sim $T --cluster dgx-h100 --dtype fp8 --fp8-recipe mxfp8
$MERAK sim $L --cluster dgx-h100 --dtype fp8 --fp8-recipe tensorwise --json >"$tmpdir/l-cs.json" || exit 1
check "tensorwise 1-10% slower than delayed on llama-3-70b" "$PYTHON" -c "
import json
d = json.load(open('$tmpdir/l-fp8.json'))['step_time_s']; c = json.load(open('$tmpdir/l-cs.json'))['step_time_s']
print('  delayed %.4f s, tensorwise %.4f s' % (d, c))
assert 1.01 < c / d < 1.10"
$MERAK plan --model gpt-tiny --cluster dgx-h100 --gpus 8 --gbs 8 --top 1 --dtype fp8 --fp8-recipe tensorwise \
  --save-plan "$tmpdir/cs.json" >/dev/null || { echo "FAIL: plan tensorwise"; exit 1; }
check "the planner's plan file keeps the recipe" grep -q '"fp8_recipe": "tensorwise"' "$tmpdir/cs.json"
expect_ok "the plan file runs with it" sh -c "$MERAK sim --plan '$tmpdir/cs.json' | grep -q 'fp8 (tensorwise scaling)'"
# torchao (torchtitan's Float8): no FP8 weight copies, so its peak is below TE's tensorwise one by
# their 2 bytes a linear parameter, and its weights cast at every micro-batch's use: a plan file
# keeps it too
$MERAK sim $L --cluster dgx-h100 --dtype fp8 --fp8-recipe torchao --json >"$tmpdir/l-ao.json" || exit 1
check "torchao: weights without TE's FP8 copies, a step within 10% of tensorwise's" "$PYTHON" -c "
import json
c = json.load(open('$tmpdir/l-cs.json')); a = json.load(open('$tmpdir/l-ao.json'))
wc, wa = c['memory_breakdown'][0]['weights'], a['memory_breakdown'][0]['weights']
print('  weights %.3f -> %.3f GB, step %.4f -> %.4f s' % (wc / 1e9, wa / 1e9, c['step_time_s'], a['step_time_s']))
assert wa < wc * 0.7 and 0.9 < a['step_time_s'] / c['step_time_s'] < 1.1"
$MERAK plan --model gpt-tiny --cluster dgx-h100 --gpus 8 --gbs 8 --top 1 --dtype fp8 --fp8-recipe torchao \
  --save-plan "$tmpdir/ao.json" >"$tmpdir/ao.out" || { echo "FAIL: plan torchao"; exit 1; }
check "the planner's headline names the recipe" grep -q "global batch 8, fp8 (torchao's Float8, tensorwise scaling)" \
  "$tmpdir/ao.out"
expect_ok "a torchao plan file runs as torchao's" sh -c "grep -q '\"fp8_recipe\": \"torchao\"' '$tmpdir/ao.json' &&
  $MERAK sim --plan '$tmpdir/ao.json' | grep -q \"fp8 (torchao's Float8\""

# presets
$MERAK models >"$tmpdir/models" || exit 1
for c in dgx-h200 dgx-b200 a100-40gb; do
  check "preset $c listed" grep -q "^  $c " "$tmpdir/models"
  expect_ok "preset $c loads" $MERAK sim $T --cluster $c
done
expect_ok "fp8 on dgx-b200" $MERAK sim $T --cluster dgx-b200 --dtype fp8
expect_ok "fp8 on dgx-h200" $MERAK sim $T --cluster dgx-h200 --dtype fp8
finish
