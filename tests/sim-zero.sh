#!/bin/sh
# ZeRO-2 and ZeRO-3 in merak sim (issue 17): the per-rank memory against
# its closed forms, the collectives a trace shows (AG.zero, RS.dp, AR.dp),
# step times ordered on a bandwidth-bound cluster, the peaks the README
# quotes, saved plans, and bad input.
. "${top_srcdir:-.}/tests/lib.sh"
"${PYTHON:=python3}" -c "import json" 2>/dev/null || { echo "no python: skipped"; exit 77; }
sim() { $MERAK sim --model gpt-tiny --cluster dgx-a100 "$@"; }
for z in 0 1 2 3; do
  expect_ok "gpt-tiny dp 4 --zero $z" sh -c "'$MERAK' sim --model gpt-tiny --cluster dgx-a100 --dp 4 --gbs 4 \
    --zero $z --json >'$tmpdir/z$z.json'"
done
expect_ok "hybrid: dp 16, --zero 3 --zero-shard-group node" sh -c "'$MERAK' sim --model gpt-tiny --cluster dgx-a100 \
  --dp 16 --gbs 16 --zero 3 --zero-shard-group node --json >'$tmpdir/h3.json'"
# P = 220544 parameters (merak model), layers: embedding 20480, attention
# 16768, mlp 33216 (x4), head 128 (+ the tied embedding's 16384 words)
check "memory closed forms (weights, grads, optimizer, gathered per rank)" "$PYTHON" - "$tmpdir" <<'PY'
import json, sys
d = sys.argv[1]
m = [json.load(open("%s/z%d.json" % (d, z)))["memory_breakdown"][0] for z in range(4)]
h = json.load(open(d + "/h3.json"))["memory_breakdown"][0]
P, k, attn, mlp = 220544.0, 4, 16768.0, 33216.0
# bf16: fp32 gradients (g = 4 bytes, Megatron-LM's rule); ZeRO-2/3
# gradients: the shard plus two whole layer gradients (the one being
# written and the one being reduce-scattered; the largest is an mlp)
g = 4
want = [(2 * P, g * P, 12 * P), (2 * P, g * P, 12 * P / k), (2 * P, g * P / k + 2 * g * mlp, 12 * P / k),
        (2 * P / k, g * P / k + 2 * g * mlp, 12 * P / k)]
ok = True
for z in range(4):
    got = (m[z]["weights"], m[z]["grads"], m[z]["optimizer"])
    if any(abs(a - b) > 1e-6 * b for a, b in zip(got, want[z])):
        print("zero %d: got %s, want %s" % (z, got, want[z])); ok = False
    if ("gathered" in m[z]) != (z == 3):
        print("zero %d: 'gathered' key %s" % (z, "present" if "gathered" in m[z] else "missing")); ok = False
# the layer in use and the prefetched one, whole: attention + mlp of a block
if abs(m[3]["gathered"] - 2 * (attn + mlp)) > 1e-6:
    print("gathered", m[3]["gathered"]); ok = False
for z in range(4):
    s = sum(m[z][x] for x in ("weights", "grads", "optimizer", "activations", "working", "buffers", "gathered")
            if x in m[z])
    if abs(s - m[z]["total"]) > 1e-6 * s:
        print("zero %d: parts %g, total %g" % (z, s, m[z]["total"])); ok = False
# hybrid over the 8 ranks of a node: divides by 8, not by dp 16
if abs(h["weights"] - 2 * P / 8) > 1e-6 or abs(h["optimizer"] - 12 * P / 8) > 1e-6:
    print("hybrid", h); ok = False
tot = [x["total"] for x in m]
if not (tot[3] < tot[2] < tot[1] < tot[0]):
    print("peaks not falling with the stage:", tot); ok = False
sys.exit(0 if ok else 1)
PY
# traces: per micro-batch F gathers its 10 layers, B gathers them again
# but the embedding (its backward reads no weights) and reduce-scatters
# each gradient; a full-recompute B replays each block layer under its
# backward's gather (no third gather, as merak run); ZeRO-3 gathers nothing
# after the optimizer
count() { "$PYTHON" -c "
import json, sys
t = json.load(open(sys.argv[1])); ev = t['traceEvents'] if isinstance(t, dict) else t
print(sum(1 for e in ev if e.get('ph') == 'X' and e.get('name') == sys.argv[2]))" "$@"; }
sim --dp 2 --gbs 4 --zero 3 --recompute none --trace "$tmpdir/t0.json" >/dev/null
sim --dp 2 --gbs 4 --zero 3 --recompute full --trace "$tmpdir/t1.json" >/dev/null
sim --dp 2 --pp 2 --gbs 8 --zero 3 --trace "$tmpdir/t2.json" >/dev/null
sim --dp 2 --gbs 4 --zero 2 --trace "$tmpdir/t3.json" >/dev/null
sim --dp 16 --gbs 16 --zero 3 --zero-shard-group node --trace "$tmpdir/t4.json" >/dev/null
check "zero 3, no recompute, m 2: 38 AG.zero, 20 RS.dp, no AG.dp" \
  [ "$(count "$tmpdir/t0.json" AG.zero) $(count "$tmpdir/t0.json" RS.dp) $(count "$tmpdir/t0.json" AG.dp)" = "38 20 0" ]
check "zero 3, full recompute: 38 AG.zero (the replay shares the backward's gather)" \
  [ "$(count "$tmpdir/t1.json" AG.zero)" = 38 ]
check "zero 3, pp 2, m 4: each stage its own 5 layers (76 AG.zero, 40 RS.dp)" \
  [ "$(count "$tmpdir/t2.json" AG.zero) $(count "$tmpdir/t2.json" RS.dp)" = "76 40" ]
check "zero 2, m 2: a bucket per backward (2 RS.dp), one AG.dp" \
  [ "$(count "$tmpdir/t3.json" RS.dp) $(count "$tmpdir/t3.json" AG.dp)" = "2 1" ]
check "hybrid zero 3: each RS.dp followed by the replicas' AR.dp" \
  [ "$(count "$tmpdir/t4.json" RS.dp) $(count "$tmpdir/t4.json" AR.dp)" = "10 10" ]
# a bandwidth-bound cluster (PCIe, one 100 Gb/s NIC): more sharding, more traffic
for z in 0 1 2 3; do
  $MERAK sim --model gpt2-124m --cluster rtx3090-pcie --dp 8 --gbs 32 --zero $z --json >"$tmpdir/b$z.json"
done
# (ZeRO-1 below ZeRO-0: the fp32 gradients' reduce-scatter and the bf16
# weights' all-gather move 4 + 2 bytes a parameter, the all-reduce 2 x 4)
check "rtx3090-pcie: step(zero 3) > step(2) >= step(1), step(1) < step(0)" "$PYTHON" -c "
import json, sys
t = [json.load(open('$tmpdir/b%d.json' % z))['step_time_s'] for z in range(4)]
print(t); sys.exit(0 if t[3] > t[2] >= t[1] and t[1] < t[0] else 1)"
# the README's comparison: ZeRO-3 lowers the peak below ZeRO-1's
peak() { $MERAK sim "$@" --json | "$PYTHON" -c "import json, sys; print(max(json.load(sys.stdin)['peak_memory_bytes']))"; }
for m in "gpt-175b --dp 8 --pp 8 --tp 8 --gbs 512" "llama-2-70b --dp 8 --pp 4 --tp 8 --gbs 512"; do
  p1=$(peak --model $m --cluster dgx-a100 --zero 1); p3=$(peak --model $m --cluster dgx-a100 --zero 3)
  check "${m%% *}: ZeRO-3 peak $p3 < ZeRO-1 peak $p1" "$PYTHON" -c "import sys; sys.exit(0 if $p3 < $p1 else 1)"
done
expect_ok "zero 3 with recompute auto" sim --dp 2 --pp 2 --gbs 8 --zero 3 --recompute auto
expect_ok "zero 3 interleaved, zb-h1" sh -c "'$MERAK' sim --model gpt-tiny --cluster dgx-a100 --dp 2 --pp 2 --gbs 8 \
  --zero 3 --schedule interleaved --vpp 2 >/dev/null && '$MERAK' sim --model gpt-tiny --cluster dgx-a100 --dp 2 \
  --pp 2 --gbs 8 --zero 3 --schedule zb-h1 --no-overlap-grad-reduce >/dev/null"
expect_ok "text output shows the gathered column" sh -c "'$MERAK' sim --model gpt-tiny --cluster dgx-a100 --dp 2 \
  --gbs 4 --zero 3 | grep -q 'buffers  gathered'"
# bad input: one line, exit 2
expect_fail "--zero 4" "at most 3" -- sim --dp 4 --gbs 4 --zero 4
expect_fail "node group not dividing dp" "do not divide dp 12" -- sim --dp 12 --gbs 12 --zero 3 --zero-shard-group node
expect_fail "bad --zero-shard-group" "dp or node" -- sim --dp 4 --gbs 4 --zero 3 --zero-shard-group rack
expect_fail "shard group without ZeRO" "needs --zero" -- sim --dp 16 --gbs 16 --zero-shard-group node
# a plan file: a hybrid zero 3 plan runs from its JSON as from flags; a
# sharding group that does not divide dp is refused
"$PYTHON" -c "
import json, sys
p = json.load(open(sys.argv[1]))['plan']; json.dump(p, open(sys.argv[2], 'w'))
p['zero_shard_size'] = 3; json.dump(p, open(sys.argv[3], 'w'))" "$tmpdir/h3.json" "$tmpdir/h3p.json" "$tmpdir/bad.json"
check "the plan's JSON carries zero 3 and zero_shard_size 8" grep -q '"zero_shard_size": 8' "$tmpdir/h3p.json"
check "merak sim --plan reproduces the hybrid plan" sh -c "'$MERAK' sim --plan '$tmpdir/h3p.json' --json | \
  '$PYTHON' -c 'import json, sys; a = json.load(sys.stdin); b = json.load(open(sys.argv[1])); \
  sys.exit(0 if a[\"step_time_s\"] == b[\"step_time_s\"] and a[\"memory_breakdown\"] == b[\"memory_breakdown\"] else 1)' \
  '$tmpdir/h3.json'"
expect_fail "plan with zero_shard_size 3 of dp 16" "group 3 does not divide dp 16" -- $MERAK sim --plan "$tmpdir/bad.json"
# --fsdp-reshard-after-forward never (issue 34; torchtitan's FSDP under PP):
# each layer gathered once a step, by its chunk's first forward
# (micro-batch 0), and reduced once, by its last backward (micro-batch
# m - 1); the stage's weights whole all step (+ 2 P) and its gradients
# accumulated unsharded in fp32 (+ 4 P); --zero 1 with it, and merak run, refuse
R="--model gpt-tiny --cluster dgx-a100 --dp 2 --pp 2 --zero 3 --gbs 8 --json"
$MERAK sim $R >"$tmpdir/ra.json" && $MERAK sim $R --fsdp-reshard-after-forward never --trace "$tmpdir/rn.trace" \
  >"$tmpdir/rn.json" || echo "FAIL: merak sim --fsdp-reshard-after-forward never"
check "reshard never: one gather (mb 0) and one reduction (mb m-1) per layer, whole weights and fp32 gradients" "$PYTHON" -c "
import json
a, n = (json.load(open(f)) for f in ('$tmpdir/ra.json', '$tmpdir/rn.json'))
ev = [e for e in json.load(open('$tmpdir/rn.trace'))['traceEvents'] if e['ph'] == 'X']
for pid in (0, 2):
    ag = [e['args']['mb'] for e in ev if e['pid'] == pid and e['name'] == 'AG.zero']
    rs = [e['args']['mb'] for e in ev if e['pid'] == pid and e['name'] == 'RS.dp']
    assert len(ag) == len(rs) == 5 and set(ag) == {0} and set(rs) == {3}, (pid, ag, rs)
for s in (0, 1):
    ma, mn = a['memory_breakdown'][s], n['memory_breakdown'][s]
    P = ma['weights']   # zero 3 over dp 2: the weights are 2 P / 2
    assert abs(mn['weights'] - (ma['weights'] + 2 * P)) <= 1e-9 * P, (s, mn['weights'], ma['weights'], P)
    assert abs(mn['grads'] - (ma['grads'] + 4 * P)) <= 1e-9 * P and mn['gathered'] == 0
assert n['plan']['fsdp_reshard_after_forward'] == 'never' and 'fsdp_reshard_after_forward' not in a['plan']"
expect_fail "reshard never without ZeRO-3" "needs --zero 3" -- $MERAK sim --model gpt-tiny --dp 2 --gbs 8 --zero 1 \
  --fsdp-reshard-after-forward never
expect_fail "reshard: unknown value" "must be always or never" -- $MERAK sim --model gpt-tiny --fsdp-reshard-after-forward sometimes
expect_fail "merak run refuses reshard never" "is for merak sim" -- $MERAK run --dp 1 --zero 3 --fsdp-reshard-after-forward never
# --no-zero3-prefetch (DeepSpeed's ZeRO-3 before 0.6.0, which synchronized
# the device before every gather): each gather waits for the layer before it,
# so none is hidden (m 1, reductions after the backward: the step grows by
# exactly what the prefetch hid), and one layer is gathered at a time (the
# largest, an mlp: 2 x 33216 bytes, where the prefetch holds attention +
# mlp); the plan file carries it, and a plan without ZeRO-3 refuses it
N="--model gpt-tiny --cluster dgx-a100 --dp 2 --gbs 2 --zero 3 --recompute none --no-overlap-grad-reduce --json"
$MERAK sim $N >"$tmpdir/pa.json" && $MERAK sim $N --no-zero3-prefetch >"$tmpdir/pn.json" ||
  echo "FAIL: merak sim --no-zero3-prefetch"
check "no prefetch: every gather exposed, the step longer by what the prefetch hid, one layer gathered" "$PYTHON" -c "
import json
a, n = (json.load(open(f)) for f in ('$tmpdir/pa.json', '$tmpdir/pn.json'))
ea, oa, en, on = a['exposed_comm_s']['dp'], a['overlapped_comm_s']['dp'], n['exposed_comm_s']['dp'], n['overlapped_comm_s']['dp']
assert oa > 0 and on == 0 and abs(en - (ea + oa)) <= 1e-12, (ea, oa, en, on)
assert abs(n['step_time_s'] - (a['step_time_s'] + oa)) <= 1e-12, (a['step_time_s'], n['step_time_s'], oa)
assert a['memory_breakdown'][0]['gathered'] == 2 * (16768 + 33216) and n['memory_breakdown'][0]['gathered'] == 2 * 33216
assert n['plan']['zero3_prefetch'] is False and 'zero3_prefetch' not in a['plan']"
# A run's plan saved (NAME.plan.json) and simulated again: the same step;
# NAME.bad.json the plan with --zero Z, which a field of it must refuse.
plan_trip() { # NAME Z WHAT
  "$PYTHON" -c "
import json, sys
p = json.load(open(sys.argv[1]))['plan']; json.dump(p, open(sys.argv[2], 'w'))
p['zero'] = int(sys.argv[4]); json.dump(p, open(sys.argv[3], 'w'))" "$tmpdir/$1.json" "$tmpdir/$1.plan.json" \
    "$tmpdir/$1.bad.json" "$2"
  check "merak sim --plan keeps $3" sh -c "'$MERAK' sim --plan '$tmpdir/$1.plan.json' --json | \
    '$PYTHON' -c 'import json, sys; a = json.load(sys.stdin); b = json.load(open(sys.argv[1])); \
    sys.exit(0 if a[\"step_time_s\"] == b[\"step_time_s\"] else 1)' '$tmpdir/$1.json'"
}
plan_trip pn 1 "the prefetch off"
expect_fail "plan file: zero3_prefetch false with zero 1" "zero3_prefetch false\) needs --zero 3" -- $MERAK sim --plan "$tmpdir/pn.bad.json"
expect_fail "--no-zero3-prefetch without ZeRO-3" "needs --zero 3" -- $MERAK sim --model gpt-tiny --dp 2 --gbs 8 --zero 2 \
  --no-zero3-prefetch
expect_fail "--no-zero3-prefetch twice" "given twice" -- $MERAK sim --model gpt-tiny --dp 2 --zero 3 \
  --no-zero3-prefetch --no-zero3-prefetch
# --zero3-per-param-collectives (DeepSpeed's ZeRO-3 before 0.5.7; the
# closed form is test_sim's): the headline names it, the gathers and
# reductions take longer (the vectors gathered after the step too), the
# memory is the same, the plan file carries it and replays to the same step;
# a plan without ZeRO-3 refuses it, merak run and the exports refuse it
$MERAK sim $N --zero3-per-param-collectives >"$tmpdir/pp.json" &&
  $MERAK sim ${N% --json} --zero3-per-param-collectives >"$tmpdir/pp.txt" || echo "FAIL: merak sim --zero3-per-param-collectives"
check "per-tensor collectives: named, more DP time, the same memory, in the plan" "$PYTHON" -c "
import json
a, q = (json.load(open(f)) for f in ('$tmpdir/pa.json', '$tmpdir/pp.json'))
dp = lambda j: j['exposed_comm_s']['dp'] + j['overlapped_comm_s']['dp']
assert dp(q) > dp(a) and q['step_time_s'] > a['step_time_s'], (dp(a), dp(q))
assert q['peak_memory_bytes'] == a['peak_memory_bytes']
assert q['plan']['zero3_per_param_collectives'] is True and 'zero3_per_param_collectives' not in a['plan']
assert 'ZeRO-3 collectives per parameter tensor' in open('$tmpdir/pp.txt').read()"
plan_trip pp 2 "the per-tensor collectives"
expect_fail "plan file: zero3_per_param_collectives with zero 2" "zero3_per_param_collectives) needs --zero 3" -- \
  $MERAK sim --plan "$tmpdir/pp.bad.json"
expect_fail "--zero3-per-param-collectives without ZeRO-3" "needs --zero 3" -- $MERAK sim --model gpt-tiny --dp 2 --gbs 8 \
  --zero 1 --zero3-per-param-collectives
expect_fail "merak run refuses --zero3-per-param-collectives" "is for merak sim" -- $MERAK run --dp 1 --zero 3 \
  --zero3-per-param-collectives
expect_fail "--export deepspeed refuses it" "a ZeRO-3 collective per parameter" -- $MERAK sim --model gpt-tiny --dp 2 \
  --gbs 8 --zero 3 --zero3-per-param-collectives --export deepspeed
expect_fail "--export torchtitan refuses it" "a collective per parameter" -- $MERAK sim --model llama-3-8b --dp 8 \
  --gbs 8 --zero 3 --zero3-per-param-collectives --export torchtitan
# --overlap-param-gather (Megatron-Core's distributed optimizer): ZeRO-1's
# weight all-gather is issued at the step's start and the first forward
# runs each of its nb buckets' layers as they land.  llama-2-7b, dp 8, one
# micro-batch: 64 gradient buckets (RS.dp), a forward longer than the
# gather, so only the first bucket's share waits and the forward computes
# beside the rest, ag (1 - 1/64), paying the SMs the gather holds, s =
# coll_sms / sms = 16/132 of it (sim/dp_share.c): the step is shorter by
# exactly ag (1 - 1/64)(1 - s), ag the gather's seconds (AG.dp, now at time 0);
# gpt-tiny's one bucket hides nothing (the same step).  Plan files carry
# it; it needs ZeRO-1 with the overlapped reduction; run refuses it.
O="--model llama-2-7b --cluster dgx-h100 --dp 8 --gbs 8 --mbs 1 --zero 1 --recompute none --seq-length 4096 --json"
$MERAK sim $O --trace "$tmpdir/ga.trace" >"$tmpdir/ga.json" &&
  $MERAK sim $O --overlap-param-gather --trace "$tmpdir/gb.trace" >"$tmpdir/gb.json" ||
  echo "FAIL: merak sim --overlap-param-gather"
check "param gather overlap: the step shorter by ag (1 - 1/64)(1 - 16/132), the gather at time 0" "$PYTHON" -c "
import json
a, b = (json.load(open('$tmpdir/%s.json' % x)) for x in ('ga', 'gb'))
ta, tb = (json.load(open('$tmpdir/%s.trace' % x)) for x in ('ga', 'gb'))
ev = lambda t, n: [e for e in (t['traceEvents'] if isinstance(t, dict) else t) if e.get('name') == n]
ga, gb = ev(ta, 'AG.dp'), ev(tb, 'AG.dp')
nb = len(ev(ta, 'RS.dp'))
assert nb == 64 and len(ga) == len(gb) == 1 and gb[0]['ts'] == 0 and ga[0]['ts'] > 0, (nb, ga, gb)
ag = ga[0]['dur'] * 1e-6
assert ag > 0 and abs(gb[0]['dur'] * 1e-6 - ag) <= 1e-12, (ag, gb)
d, s, hid = a['step_time_s'] - b['step_time_s'], 16.0 / 132, ag * (1 - 1.0 / nb)
assert abs(d - hid * (1 - s)) <= 1e-9 * ag, (d, ag)
ea, eb = a['exposed_comm_s']['dp'], b['exposed_comm_s']['dp']
assert abs(eb - (ea - ag + ag / nb + s * hid)) <= 1e-9 * ag, (ea, eb, ag)
assert b['plan']['overlap_param_gather'] is True and 'overlap_param_gather' not in a['plan']"
T="--model gpt-tiny --cluster dgx-a100 --dp 2 --gbs 2 --zero 1 --json"
check "param gather overlap: one bucket hides nothing" sh -c "'$MERAK' sim $T >'$tmpdir/gc.json' &&
  '$MERAK' sim $T --overlap-param-gather >'$tmpdir/gd.json' && '$PYTHON' -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
sys.exit(0 if abs(a[\"step_time_s\"] - b[\"step_time_s\"]) <= 1e-12 * a[\"step_time_s\"] else 1)' '$tmpdir/gc.json' '$tmpdir/gd.json'"
plan_trip gb 2 "the param gather overlap"
expect_fail "plan file: overlap_param_gather with zero 2" "overlap-param-gather needs --zero 1" -- $MERAK sim --plan "$tmpdir/gb.bad.json"
expect_fail "--overlap-param-gather without ZeRO-1" "needs --zero 1" -- $MERAK sim --model gpt-tiny --dp 2 --gbs 8 \
  --overlap-param-gather
expect_fail "--overlap-param-gather with the reduction after the backward" "no-overlap-grad-reduce" -- $MERAK sim \
  --model gpt-tiny --dp 2 --gbs 8 --zero 1 --overlap-param-gather --no-overlap-grad-reduce
expect_fail "merak run refuses --overlap-param-gather" "is for merak sim and merak plan" -- $MERAK run --dp 1 --zero 1 \
  --overlap-param-gather
expect_fail "plan --export deepspeed refuses --overlap-param-gather" "overlap-param-gather is Megatron-Core's" -- \
  $MERAK plan --model gpt-tiny --gpus 2 --gbs 8 --overlap-param-gather --export deepspeed
finish
