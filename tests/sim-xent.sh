#!/bin/sh
# The loss's passes over the logits (issue 38, fourteenth session; graph.c
# loss_passes): each --cross-entropy implementation's forward and backward
# bytes a logit are kernels of their own at the device's HBM bandwidth.
# One stage without communication, so the step's difference between two
# implementations is exactly m micro-batches x N x V x (their difference
# in bytes) / bandwidth: bf16 vocab-parallel 38 + 14, torch 18 + 22,
# fused 22 + 6, fused-te 8 + 14 (dgx-a100: 1800 GB/s).  The ideal cluster
# (matmuls only) does not change; the plan file carries the choice.
. "${top_srcdir:-.}/tests/lib.sh"
S="--model gpt2-124m --vocab-size 51200 --dp 1 --pp 1 --tp 1 --mbs 1 --gbs 8 --dtype bf16"
for x in vocab-parallel torch fused fused-te; do
  $MERAK sim $S --cluster dgx-a100 --cross-entropy $x --json >"$tmpdir/$x.json" || echo "FAIL: merak sim --cross-entropy $x"
  $MERAK sim $S --cluster ideal --cross-entropy $x --json >"$tmpdir/i-$x.json" || echo "FAIL: ideal $x"
done
check "each loss's passes: the steps differ by m N V (bytes) / bandwidth" "$PYTHON" -c "
import json
b = {'vocab-parallel': 52, 'torch': 40, 'fused': 28, 'fused-te': 22}
t = {x: json.load(open('$tmpdir/%s.json' % x))['step_time_s'] for x in b}
m, N, V, bw = 8, 1024, 51200, 1800e9
for x in b:
    want = m * N * V * (b[x] - b['fused-te']) / bw
    got = t[x] - t['fused-te']
    print('  %-14s step %.6f s, %+.6f s against fused-te (want %+.6f)' % (x, t[x], got, want))
    assert abs(got - want) <= 1e-6 * t[x], (x, got, want)"
check "the ideal cluster: the same step whatever the loss" "$PYTHON" -c "
import json
s = {json.load(open('$tmpdir/i-%s.json' % x))['step_time_s'] for x in ('vocab-parallel', 'torch', 'fused', 'fused-te')}
assert len(s) == 1, s"
check "the plan carries the loss (absent: vocab-parallel)" "$PYTHON" -c "
import json
p = [json.load(open('$tmpdir/%s.json' % x))['plan'] for x in ('vocab-parallel', 'fused', 'fused-te')]
assert 'cross_entropy' not in p[0] and p[1]['cross_entropy'] == 'fused' and p[2]['cross_entropy'] == 'fused-te', p"
"$PYTHON" -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2], 'w'))" \
  "$tmpdir/fused.json" "$tmpdir/fused.plan.json"
"$PYTHON" -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2], 'w'))" \
  "$tmpdir/fused-te.json" "$tmpdir/te.plan.json"
expect_ok "a fused plan file simulates" $MERAK sim --plan "$tmpdir/fused.plan.json" --json
check "--plan gives the fused step" "$PYTHON" -c "
import json
a = json.load(open('$tmpdir/fused.json'))['step_time_s']; b = json.load(open('$tmpdir/out'))['step_time_s']
assert a == b, (a, b)"
expect_fail "an unknown loss" "must be vocab-parallel, torch, fused or fused-te" -- $MERAK sim $S --cross-entropy native
expect_fail "merak run refuses TE's loss" "cross_entropy fused-te is for merak sim" -- \
  $MERAK run --steps 1 --plan "$tmpdir/te.plan.json"
# merak run's own loss is vocab-parallel's memory with fused's passes: it takes either plan
$MERAK sim --model gpt-tiny --gbs 8 --cross-entropy fused --json >"$tmpdir/tiny.json" || echo "FAIL: sim gpt-tiny fused"
"$PYTHON" -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2], 'w'))" \
  "$tmpdir/tiny.json" "$tmpdir/tiny.plan.json"
expect_ok "merak run takes a fused plan" $MERAK run --steps 1 --plan "$tmpdir/tiny.plan.json" --json
finish
