#!/bin/sh
# The memory model's closed forms on `merak sim --json` (sim/memory.c),
# from the layer figures of `merak model --json` (gpt-tiny, bf16, tp 1):
#  - full recompute keeps one input per transformer block (Megatron-LM's
#    per-layer checkpoint; Korthikanti et al. 2022: 2sbh per layer), not one
#    per attention and one per MLP;
#  - recomputing a block rebuilds its attention and MLP at once (working);
#  - no DP gradient bucket: gradients are reduced in place (dp 2 = dp 1);
#  - the received activation is the stage's stored input, not a buffer.
. "${top_srcdir:-.}/tests/lib.sh"
# the closed forms below are the materialised attention core's (s x s scores kept)
M="--attention-backend unfused --model gpt-tiny --cluster dgx-a100 --dtype bf16 --pp 2 --mbs 1 --gbs 8 --schedule 1f1b"
$MERAK model --model gpt-tiny --json >"$tmpdir/model.json" || { echo "FAIL: merak model"; exit 1; }
for dp in 1 2; do
  for rec in full none; do
    $MERAK sim $M --dp $dp --recompute $rec --json >"$tmpdir/$rec-$dp.json" 2>"$tmpdir/err" ||
      { echo "FAIL: merak sim --dp $dp --recompute $rec"; cat "$tmpdir/err"; exit 1; }
  done
done
closed() { # closed NAME PYTHON-ASSERTION: m = model layers by name, s = sim JSON of full-1
  check "$1" "$PYTHON" -c "
import json, sys
m = {l['name']: l for l in json.load(open('$tmpdir/model.json'))['layers']}
s = json.load(open('$tmpdir/full-1.json'))
n = json.load(open('$tmpdir/none-1.json'))
d = json.load(open('$tmpdir/full-2.json'))
st = s['memory_breakdown']
ok = $2
if not ok: print('  breakdown', st, file=sys.stderr)
sys.exit(0 if ok else 1)"
}
# stage 0 of 4 layers on pp 2: the embedding and blocks 0 and 1, 2 micro-batches in flight (1F1B)
closed "full recompute stores one block input per block (stage 0: 2 x (embedding + 2 x 2sbh))" \
  "st[0]['activations'] == 2 * (m['embedding']['act_bytes'] + 2 * m['attention.0']['ckpt_bytes'])"
closed "without recompute every layer's activations are stored (stage 0)" \
  "n['memory_breakdown'][0]['activations'] == 2 * (m['embedding']['act_bytes'] + 2 * (m['attention.0']['act_bytes'] + m['mlp.0']['act_bytes']))"
closed "a recomputed block holds its attention and MLP at once (working >= both, less the stored input)" \
  "st[0]['working'] >= m['attention.0']['act_bytes'] + m['mlp.0']['act_bytes'] - m['attention.0']['ckpt_bytes']"
closed "no DP gradient bucket: buffers equal at dp 2 and dp 1" \
  "[x['buffers'] for x in d['memory_breakdown']] == [x['buffers'] for x in st]"
closed "p2p buffers: stage 0 sends an activation and receives its gradient, stage 1 sends a gradient" \
  "st[0]['buffers'] == 2 * m['mlp.1']['out_bytes'] and st[1]['buffers'] == m['attention.2']['ckpt_bytes']"
# issue 34: the loss's forward scratch.  While the softmax runs the 16-bit
# logits and their fp32 copy are live beside the kept fp32 softmax: on
# llama-3-8b at 32K tokens (FSDP over 8, full recompute, one sequence) the
# working set at the peak is N x V x (2 + 4) bytes (V = 128256, split over
# tp: 2 halves it), and at least what it was without the scratch (the
# LM head's backward: logits gradient and the loss's)
L="--model llama-3-8b --cluster dgx-h100 --seq-length 32768 --zero 3 --recompute full --mbs 1 --json"
$MERAK sim $L --dp 8 --gbs 8 >"$tmpdir/l1.json" && $MERAK sim $L --dp 4 --tp 2 --gbs 4 >"$tmpdir/l2.json" ||
  echo "FAIL: merak sim llama-3-8b"
check "loss forward scratch: working at the peak = N V (2 + 4) / tp" "$PYTHON" -c "
import json, sys
for f, tp in (('$tmpdir/l1.json', 1), ('$tmpdir/l2.json', 2)):
    w = json.load(open(f))['memory_breakdown'][0]['working']
    want = 32768 * 128256 * 6 / tp
    assert abs(w - want) <= 1e-9 * want, (f, w, want)"
# --cross-entropy torch (PyTorch's F.cross_entropy on fp32 logits): its
# backward holds two fp32 logits-sized gradients beside the saved
# log-probabilities, so the working set at the peak is at least 8 N V
# bytes (the vocab-parallel default: the 6 N V forward scratch); the
# plan file carries the choice and gives the same peak under --plan
$MERAK sim $L --dp 8 --gbs 8 --cross-entropy torch >"$tmpdir/lt.json" || echo "FAIL: merak sim --cross-entropy torch"
"$PYTHON" -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2], 'w'))" \
  "$tmpdir/lt.json" "$tmpdir/lt.plan.json"
$MERAK sim --plan "$tmpdir/lt.plan.json" --json >"$tmpdir/lt2.json" || echo "FAIL: merak sim --plan (torch)"
check "cross entropy torch: working >= 8 N V, the plan says torch, --plan the same peak" "$PYTHON" -c "
import json
t, d, r = (json.load(open(f)) for f in ('$tmpdir/lt.json', '$tmpdir/l1.json', '$tmpdir/lt2.json'))
w = t['memory_breakdown'][0]['working']
assert w >= 32768 * 128256 * 8, w
assert t['peak_memory_bytes'][0] > d['peak_memory_bytes'][0]
assert t['plan']['cross_entropy'] == 'torch' and 'cross_entropy' not in d['plan']
assert r['peak_memory_bytes'] == t['peak_memory_bytes']"
# --recompute selective-op (torchtitan's op-level policy): every block is
# checkpointed and also keeps the attention kernel's context and fp32
# log-sum-exp and every second matmul's output (Llama: wq, wv, w1, w2 of
# wq wk wv wo w1 w3 w2).  llama-tiny (h 64, 4 heads, 2 K/V groups: kv 32,
# ffn 192), one sequence of 64, bf16, flash, pp 1, one micro-batch:
# activations = full recompute's + 4 blocks x N x (h + kv + h + f + h) x 2
# + 4 x heads x N x 4; its recompute is cheaper than full's; merak run
# refuses it
T="--model llama-tiny --cluster dgx-a100 --dtype bf16 --attention-backend flash --mbs 1 --gbs 1 --json"
$MERAK sim $T --recompute full >"$tmpdir/sf.json" && $MERAK sim $T --recompute selective-op >"$tmpdir/so.json" ||
  echo "FAIL: merak sim llama-tiny selective-op"
check "selective-op keeps wq, wv, the context, w1, w2 and the lse per block" "$PYTHON" -c "
import json
f, o = (json.load(open(x)) for x in ('$tmpdir/sf.json', '$tmpdir/so.json'))
N, h, kv, ff, heads = 64, 64, 32, 192, 4
want = 4 * (N * (h + kv + h + ff + h) * 2 + heads * N * 4)
d = o['memory_breakdown'][0]['activations'] - f['memory_breakdown'][0]['activations']
assert abs(d - want) <= 1e-9 * want, (d, want)
assert o['plan']['recompute'] == 'selective-op'"
B="--model llama-3-8b --cluster dgx-h100 --dp 8 --zero 3 --mbs 2 --gbs 16 --json"
$MERAK sim $B --recompute full >"$tmpdir/bf.json" && $MERAK sim $B --recompute selective-op >"$tmpdir/bo.json" ||
  echo "FAIL: merak sim llama-3-8b selective-op"
check "selective-op recomputes less than full (llama-3-8b)" "$PYTHON" -c "
import json
f, o = (json.load(open(x))['explain']['breakdown_s']['recompute'] for x in ('$tmpdir/bf.json', '$tmpdir/bo.json'))
assert 0 < o < 0.5 * f, (o, f)"
expect_fail "run refuses selective-op" "selective-op" -- "$MERAK" run --recompute selective-op
# --optimizer-cpu-offload (Megatron-Core's): the optimizer term leaves the
# device for the host (o + 4 bytes a parameter there: the master copy and
# moments, an fp32 gradient copy), a node's 8 GPUs share the host memory,
# and the step's OPT is the host link both ways (bf16's fp32 gradients
# down, its weights up: 4 + 2 bytes a parameter) plus 28 bytes a parameter
# at the node's host bandwidth shared by its 8 GPUs (dgx-h100: 56.7 GB/s a
# link, 614.4 GB/s); a cluster without host figures refuses it
O="--model llama-3-70b --cluster dgx-h100 --dp 8 --tp 8 --gbs 64 --json"
$MERAK sim $O >"$tmpdir/o0.json" && $MERAK sim $O --optimizer-cpu-offload >"$tmpdir/o1.json" ||
  echo "FAIL: merak sim --optimizer-cpu-offload"
check "offload: no optimizer on the device, 16/12 of it x 8 GPUs on the host, the OPT time's closed form" "$PYTHON" -c "
import json
a, b = (json.load(open(f)) for f in ('$tmpdir/o0.json', '$tmpdir/o1.json'))
ma, mb = a['memory_breakdown'][0], b['memory_breakdown'][0]
assert mb['optimizer'] == 0 and abs(b['peak_memory_bytes'][0] - (a['peak_memory_bytes'][0] - ma['optimizer'])) < 1e-6 * ma['optimizer']
assert abs(b['host_memory_bytes'] - 8 * ma['optimizer'] * 16 / 12) <= 1e-9 * b['host_memory_bytes']
assert b['host_limit_bytes'] == 2048e9 and b['plan']['optimizer_cpu_offload'] is True and 'host_memory_bytes' not in a
P = ma['optimizer'] / 12
want = 4e-6 + 6 * P / (0.9 * 63e9) + 28 * P * 8 / 614.4e9  # fp32 gradients down, bf16 weights up
got = b['explain']['breakdown_s']['optimizer']
assert abs(got - want) <= 1e-6 * want, (got, want)"
expect_fail "offload on a cluster without host figures" "gives no host memory" -- \
  $MERAK sim --model gpt-tiny --cluster rtx3090-pcie --optimizer-cpu-offload
expect_fail "run refuses optimizer offload" "optimizer-cpu-offload is for merak sim" -- $MERAK run --optimizer-cpu-offload
# --cpu-offloading-num-layers N (Megatron-Core's activation offload):
# the first N blocks' stored activations go to the host, one block's stays
# in flight, so on the device N = 0 -> 16 -> 31 each drop 15 blocks'
# worth (equal differences: the blocks are alike), the host holds N blocks
# per GPU (x 8 a node: host/N constant), and the copies lengthen the step;
# Megatron-Core's rules refuse pp > 1, recompute and N >= the blocks
A="--model llama-3-8b --cluster dgx-h100 --dp 8 --gbs 64 --mbs 2 --recompute none --zero 1 --json"
for n in 0 16 31; do $MERAK sim $A --cpu-offloading-num-layers $n >"$tmpdir/a$n.json" 2>/dev/null || echo "FAIL: sim offload $n"; done
check "activation offload: -15 blocks on the device per step of 15, N blocks on the host, a longer step" "$PYTHON" -c "
import json
a = {n: json.load(open('$tmpdir/a%d.json' % n)) for n in (0, 16, 31)}
act = {n: a[n]['memory_breakdown'][0]['activations'] for n in a}
d1, d2 = act[0] - act[16], act[16] - act[31]
assert d1 > 0 and abs(d1 - d2) <= 1e-9 * d1, (d1, d2)
h16, h31 = a[16]['host_memory_bytes'] / 16, a[31]['host_memory_bytes'] / 31
assert abs(h16 - h31) <= 1e-9 * h16 and abs(h16 - 8 * d1 / 15) <= 1e-6 * h16, (h16, h31, d1)
assert a[0]['step_time_s'] < a[16]['step_time_s'] < a[31]['step_time_s']
assert a[16]['plan']['cpu_offloading_num_layers'] == 16 and 'cpu_offloading_num_layers' not in a[0]['plan']"
expect_fail "activation offload with pp 2" "Megatron-Core's rules" -- $MERAK sim --model llama-3-8b --cluster dgx-h100 \
  --pp 2 --recompute none --cpu-offloading-num-layers 4
expect_fail "activation offload with recompute" "Megatron-Core's rules" -- $MERAK sim --model llama-3-8b \
  --cluster dgx-h100 --cpu-offloading-num-layers 4
expect_fail "activation offload of every block" "fewer layers than the model's 32" -- $MERAK sim --model llama-3-8b \
  --cluster dgx-h100 --recompute none --cpu-offloading-num-layers 32
expect_fail "run refuses activation offload" "cpu-offloading-num-layers is for merak sim" -- \
  $MERAK run --recompute none --cpu-offloading-num-layers 1
finish
