#!/bin/sh
# Expert parallelism in the simulator and the planner (issue 19): the
# experts' weights, gradients and optimizer state per rank divided by ep
# (the dense parts not), four A2A.ep per MoE layer and micro-batch (two
# forward, two backward; two more for a recompute), the pairwise
# all-to-all's closed form inside a node and across nodes, ep 1 without
# any, the ideal cluster's step at the active FLOPs' time, the imbalance
# factor and the capacity that caps it, the planner searching ep, bad input.
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}

# a cluster with round numbers: intra alpha 10 us, 10 GB/s; inter 100 us,
# 1 GB/s over one NIC; 1 TFLOP/s at efficiency 1, no host or launch cost
mkcl() {
  cat >"$tmpdir/c$1.json" <<EOF
{"name": "ep-test", "gpus_per_node": $1, "max_nodes": 0, "nics_per_node": 1, "ideal": false,
 "intra": {"alpha_s": 1e-5, "beta_Bps": 1e10}, "inter": {"alpha_s": 1e-4, "beta_Bps": 1e9},
 "device": {"name": "t", "matmul_flops": {"fp32": 1e12, "fp16": 1e12, "bf16": 1e12}, "vector_flops": 1e30,
  "mem_bw_Bps": 1e30, "mem_bytes": 1e30, "launch_s": 0, "gemm_eff": 1.0, "gemm_half_dim": 0, "has_bf16": true}}
EOF
}
mkcl 4; mkcl 2

# moe-tiny: 476,736 parameters, of which 4 MoE layers x 4 experts x 3 x 64 x 128
# = 393,216 are routed experts; bf16 Adam: weights 2P, grads 4P (fp32: Megatron-LM's rule), optimizer 12P
for ep in 1 2 4; do
  "$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep $ep --gbs 8 --json >"$tmpdir/m$ep.json"
  check "ep $ep: weights, grads, optimizer of 476736 - 393216 (1 - 1/$ep) parameters" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1])); ep = int(sys.argv[2])
m = d["memory_breakdown"][0]
P = 476736 - 393216 * (1 - 1 / ep)
for k, b in (("weights", 2), ("grads", 4), ("optimizer", 12)):
    assert abs(m[k] - b * P) <= 1e-9 * b * P, (k, m[k], b * P)
assert ("ep" in d["exposed_comm_s"]) == (ep > 1), d["exposed_comm_s"]
assert d["plan"].get("ep", 1) == ep, d["plan"]
' "$tmpdir/m$ep.json" $ep
done

# ZeRO-1 over the 4 DP ranks: the dense optimizer state /4, an EP rank's
# E/2 experts' over the 4/2 ranks that hold them: 12 x 476736 / 4 in all
"$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep 2 --zero 1 --gbs 8 --json >"$tmpdir/z.json"
check "ZeRO-1, ep 2: optimizer 12 x 476736 / 4, weights 2 x (83520 + 393216 / 2)" "$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))["memory_breakdown"][0]
assert abs(m["optimizer"] - 12 * 476736 / 4) <= 1e-6, m
assert abs(m["weights"] - 2 * (83520 + 393216 / 2)) <= 1e-6, m
' "$tmpdir/z.json"

# A2A.ep events: 4 MoE layers x m micro-batches x (2 forward + 2 backward (+ 2 recompute))
for rc in none full; do
  per=4; [ $rc = full ] && per=6
  "$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep 4 --gbs 8 --recompute $rc \
    --trace "$tmpdir/t.json" >"$tmpdir/h" 2>&1
  n=$(grep -c '"name":"A2A.ep"' "$tmpdir/t.json")
  check "$rc: $n A2A.ep = 4 layers x 2 micro-batches x $per" [ "$n" -eq $((4 * 2 * per)) ]
  l=$(grep '"name":"A2A.ep"' "$tmpdir/t.json" | grep -c '"mb":1,"chunk":0,"layer":2}')
  check "$rc: A2A.ep per layer and micro-batch: $l = $per" [ "$l" -eq $per ]
done
check "sim shows the ep (all-to-all) line" grep -q "ep (all-to-all)" "$tmpdir/h"
check "header names ep" grep -q "dp 4 x pp 1 x tp 1 (ep 4)" "$tmpdir/h"

# the all-to-all's closed form: a rank's send buffer S = N k h x 2 bytes
# = 64 x 2 x 64 x 2 = 16384; inside a node of 4: 3 (a_i + S/4 / b_i);
# 2 GPUs per node: 1 (a_i + S/4 / b_i) + 2 (a_e + S/4 / (b_e / 2)), the
# node's two EP ranks sharing its NIC
for gpn in 4 2; do
  "$MERAK" sim --model moe-tiny --cluster "$tmpdir/c$gpn.json" --dp 4 --ep 4 --gbs 8 --recompute none \
    --trace "$tmpdir/t.json" --json >"$tmpdir/r.json"
  check "gpus_per_node $gpn: every A2A.ep lasts the pairwise exchange's time, the exposed ep sum of them" "$PY" -c '
import json, sys
gpn = int(sys.argv[2]); S = 64 * 2 * 64 * 2; n = 4
intra = (1e-5 + S / n / 1e10)
want = 3 * intra if gpn == 4 else intra + 2 * (1e-4 + S / n / 0.5e9)
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "A2A.ep"]
assert ev and all(abs(e["dur"] * 1e-6 - want) <= 1e-9 for e in ev), (ev[0]["dur"], want)
r = json.load(open(sys.argv[3]))
assert abs(r["exposed_comm_s"]["ep"] - len(ev) * want) <= 1e-9, (r["exposed_comm_s"], len(ev) * want)
' "$tmpdir/t.json" $gpn "$tmpdir/r.json"
done

# ZeRO-3 with ep 2: an MoE layer's gather moves its 320 dense parameters
# over the 4 ZeRO ranks and this rank's 2 of the 4 experts (49,152) over
# the 2 ranks that hold them (every 2nd), bf16, rings inside one node: not
# the layer's whole 98,624 (the other experts live on the other EP ranks)
"$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep 2 --zero 3 --gbs 8 --trace "$tmpdir/t.json" \
  >/dev/null 2>&1
check "ZeRO-3, ep 2: an MoE layer gathers its dense part over 4 and its own experts over 2" "$PY" -c '
import json, sys
want = 3 * (1e-5 + 2 * 320 / (4 * 1e10)) + 1 * (1e-5 + 2 * 49152 / (2 * 1e10))
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "AG.zero" and e["args"]["layer"] == 2]
assert ev and all(abs(e["dur"] * 1e-6 - want) <= 1e-12 for e in ev), (ev[0]["dur"] * 1e-6, want)
' "$tmpdir/t.json"

# DeepEP (--moe-enable-deepep): a token crosses once to each other node holding
# one of its k = 2 experts (E = 4, two a node: hit with 1 - (2/4)(1/3) = 5/6), then
# NVLink; the NIC and NVLink parts overlap: a_e + a_i + max(S/k (nn-1) h / (b_e/2),
# S ((ppn-1)/n + (n-ppn)/n (ppn-1)/ppn) / b_i); the plan says so, and run refuses it
"$MERAK" sim --model moe-tiny --cluster "$tmpdir/c2.json" --dp 4 --ep 4 --gbs 8 --recompute none --moe-enable-deepep \
  --trace "$tmpdir/t.json" --json >"$tmpdir/r.json"
check "DeepEP: every A2A.ep lasts the node-deduplicated time, less than the pairwise exchange's" "$PY" -c '
import json, sys
S = 64 * 2 * 64 * 2; n, ppn, k = 4, 2, 2
inter = S / k * 1 * (5 / 6) / 0.5e9
intra = S * ((ppn - 1) / n + (n - ppn) / n * (ppn - 1) / ppn) / 1e10
want = 1e-4 + 1e-5 + max(inter, intra)
pair = (1e-5 + S / n / 1e10) + 2 * (1e-4 + S / n / 0.5e9)
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "A2A.ep"]
assert ev and all(abs(e["dur"] * 1e-6 - want) <= 1e-9 for e in ev), (ev[0]["dur"], want)
assert want < pair
assert json.load(open(sys.argv[2]))["plan"]["moe_deepep"] is True
' "$tmpdir/t.json" "$tmpdir/r.json"
"$PY" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["plan"], open(sys.argv[2], "w"))' \
  "$tmpdir/r.json" "$tmpdir/deepep.json"
"$MERAK" sim --plan "$tmpdir/deepep.json" --cluster "$tmpdir/c2.json" --json >"$tmpdir/b.json" 2>&1
check "DeepEP: a plan file keeps it (the same step)" "$PY" -c '
import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["plan"]["moe_deepep"] is True and a["step_time_s"] == b["step_time_s"], (a["step_time_s"], b["step_time_s"])
' "$tmpdir/r.json" "$tmpdir/b.json"
expect_fail "DeepEP: flex without its backend" "--moe-token-dispatcher-type flex needs its backend: --moe-enable-deepep" -- \
  "$MERAK" sim --model moe-tiny --moe-token-dispatcher-type flex
expect_fail "DeepEP: with the alltoall dispatcher" "the flex dispatcher's backend, not alltoall's" -- \
  "$MERAK" sim --model moe-tiny --moe-token-dispatcher-type alltoall --moe-enable-deepep
expect_fail "DeepEP: allgather (not modelled)" "must be alltoall or flex" -- \
  "$MERAK" sim --model moe-tiny --moe-token-dispatcher-type allgather
expect_fail "DeepEP: a dense model" "--moe-enable-deepep needs a model with experts" -- \
  "$MERAK" sim --model gpt-tiny --moe-enable-deepep
expect_fail "DeepEP: run" "--moe-enable-deepep is for merak sim and merak plan" -- \
  "$MERAK" run --model moe-tiny --moe-enable-deepep --steps 1

# Megatron-Core's --overlap-moe-expert-parallel-comm: each backward merged with the forward just before
# it, each one's all-to-alls behind the other's compute.  At pp 1 with 2 micro-batches (F B F B) and
# compute above the all-to-alls every all-to-all hides: EP exposed 0, the step shorter by what was exposed
X="--model mixtral-8x7b --cluster dgx-h100 --dp 8 --ep 8 --gbs 16 --seq-length 4096 --recompute none --zero 1"
"$MERAK" sim $X --json >"$tmpdir/n.json" 2>/dev/null
"$MERAK" sim $X --overlap-moe-expert-parallel-comm --json >"$tmpdir/o.json" 2>/dev/null
check "a2a overlap: pp 1, F B F B: every all-to-all hidden, the step shorter by exactly what was exposed" "$PY" -c '
import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
ea, eb = a["exposed_comm_s"]["ep"], b["exposed_comm_s"]["ep"]
assert ea > 0 and eb == 0 and b["plan"]["moe_a2a_overlap"] is True, (ea, eb)
assert abs((a["step_time_s"] - b["step_time_s"]) - ea) <= 1e-9 * a["step_time_s"], (a["step_time_s"], b["step_time_s"], ea)
assert abs(b["overlapped_comm_s"]["ep"] - (ea + a["overlapped_comm_s"]["ep"])) <= 1e-12 + 1e-9 * ea
' "$tmpdir/n.json" "$tmpdir/o.json"
# with DeepEP's kernels the hidden all-to-alls hold 20 of the H100's 132 SMs (Megatron-Core's
# moe_deepep_num_sms), and the compute beside them runs on the rest: 20/132 of what hides stays on the
# step, as exposed EP time (one node here: DeepEP's all-to-all is the pairwise one's, ea as above)
"$MERAK" sim $X --moe-enable-deepep --overlap-moe-expert-parallel-comm --json >"$tmpdir/od.json" 2>/dev/null
check "a2a overlap with DeepEP: 20/132 of each hidden all-to-all stays (its SMs taken from the compute)" "$PY" -c '
import json, sys; a, d = (json.load(open(f)) for f in sys.argv[1:])
ea, ed = a["exposed_comm_s"]["ep"], d["exposed_comm_s"]["ep"]
assert abs(ed - ea * 20 / 132) <= 1e-12 + 1e-9 * ea, (ed, ea * 20 / 132)
assert abs((a["step_time_s"] - d["step_time_s"]) - ea * 112 / 132) <= 1e-9 * a["step_time_s"], (a["step_time_s"], d["step_time_s"])
' "$tmpdir/n.json" "$tmpdir/od.json"
"$PY" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["plan"], open(sys.argv[2], "w"))' \
  "$tmpdir/o.json" "$tmpdir/ov.json"
"$MERAK" sim --plan "$tmpdir/ov.json" --cluster dgx-h100 --json >"$tmpdir/b.json" 2>/dev/null
check "a2a overlap: a plan file keeps it (the same step)" "$PY" -c '
import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["plan"]["moe_a2a_overlap"] is True and a["step_time_s"] == b["step_time_s"]' "$tmpdir/o.json" "$tmpdir/b.json"
# interleaved: the steady state's pairs hide, the warm-up's forwards and the cool-down's backwards do not
V="--model mixtral-8x7b --cluster dgx-h100 --dp 8 --ep 8 --pp 4 --gbs 64 --seq-length 4096 --recompute selective"
V="$V --schedule interleaved --vpp 2 --zero 1"
"$MERAK" sim $V --json >"$tmpdir/n.json" 2>/dev/null
"$MERAK" sim $V --overlap-moe-expert-parallel-comm --json >"$tmpdir/o.json" 2>/dev/null
check "a2a overlap, interleaved: less EP exposed, not none; a shorter step" "$PY" -c '
import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
ea, eb = a["exposed_comm_s"]["ep"], b["exposed_comm_s"]["ep"]
assert 0 < eb < ea and b["step_time_s"] < a["step_time_s"], (ea, eb, a["step_time_s"], b["step_time_s"])
' "$tmpdir/n.json" "$tmpdir/o.json"
# the planner: every candidate Megatron-Core can run so overlaps, and its answer is the simulator's
# (Megatron-Core's schedules: with the experts' weight gradients in B_W, DualPipeV would win here)
"$MERAK" plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq-length 4096 --top 1 \
  --schedules 1f1b,interleaved --overlap-moe-expert-parallel-comm --json >"$tmpdir/p.json" 2>/dev/null
"$PY" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["plans"][0]["plan"], open(sys.argv[2], "w"))' \
  "$tmpdir/p.json" "$tmpdir/pp.json"
"$MERAK" sim --plan "$tmpdir/pp.json" --json >"$tmpdir/b.json" 2>/dev/null
check "a2a overlap: plan's best overlaps and merak sim agrees on its step" "$PY" -c '
import json, sys; p, b = (json.load(open(f)) for f in sys.argv[1:])
q = p["plans"][0]
assert q["plan"]["moe_a2a_overlap"] is True and q["step_time_s"] == b["step_time_s"], (q["step_time_s"], b["step_time_s"])
' "$tmpdir/p.json" "$tmpdir/b.json"
for c in "--ep 2 --recompute full:recompute none or selective" "--ep 2 --recompute none --dtype fp32:a 16-bit model" \
         "--ep 1 --recompute none:expert parallelism" \
         "--ep 2 --recompute none --pp 2 --schedule 1f1b:1f1b at pp 1 or the interleaved schedule"; do
  expect_fail "a2a overlap: Megatron-Core's rule (${c%%:*})" "overlap-moe-expert-parallel-comm needs ${c#*:}" -- \
    "$MERAK" sim --model moe-tiny --dp 2 --gbs 8 ${c%%:*} --overlap-moe-expert-parallel-comm
done
expect_fail "--delay-wgrad-compute alone" "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm" -- \
  "$MERAK" sim --model moe-tiny --dp 2 --ep 2 --gbs 8 --delay-wgrad-compute

# gradients: the dense 83,520 parameters' all-reduced over dp 4, the
# experts' over dp / ep ranks (none at ep 4): one bucket, fp32 (bf16's gradients), inside
# one node the ring 2(n-1)(a + S/(n b)) (NCCL's tree is a chain there: sim/collective.c)
for ep in 1 2 4; do
  "$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep $ep --gbs 8 --trace "$tmpdir/t.json" \
    >/dev/null 2>&1
  check "ep $ep: AR.dp of the dense gradients over 4 ranks, the experts' over 4/$ep" "$PY" -c '
import json, sys
ep = int(sys.argv[2])
def ar(n, S):
    if n == 1: return 0
    return 2 * (n - 1) * (1e-5 + S / n / 1e10)
want = ar(4, 4 * 83520) + ar(4 // ep, 4 * 393216 / ep)
got = sum(e["dur"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "AR.dp") * 1e-6
assert abs(got - want) <= 1e-9, (got, want)
' "$tmpdir/t.json" $ep
done

# tp 2 (4 layers x 4 micro-batches x 4): each TP rank runs its own all-to-all of the buffer; with
# sequence parallelism it holds half the tokens, so half the buffer
for sp in "" --sequence-parallel; do
  "$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 2 --tp 2 --ep 2 --gbs 8 --recompute none $sp \
    --trace "$tmpdir/t.json" >/dev/null 2>&1
  check "tp 2 $sp: A2A.ep = 1 (a_i + S/2 / b_i)" "$PY" -c '
import json, sys
S = 64 * 2 * 64 * 2 / (2 if sys.argv[2] else 1)
want = 1e-5 + S / 2 / 1e10
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "A2A.ep"]
assert len(ev) == 4 * 4 * 4 and all(abs(e["dur"] * 1e-6 - want) <= 1e-9 for e in ev), (len(ev), ev[0]["dur"], want)
' "$tmpdir/t.json" "$sp"
done

# ep 1: no all-to-all, no ep line
"$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --gbs 8 --trace "$tmpdir/t.json" >"$tmpdir/h" 2>&1
check "ep 1: no A2A.ep" sh -c "! grep -q A2A.ep '$tmpdir/t.json'"
check "ep 1: no ep line" sh -c "! grep -q 'ep (all-to-all)' '$tmpdir/h'"

# the ideal cluster: the step is the active FLOPs' time (MFU 1) at any ep;
# at ep 4 (one expert a rank) an imbalance of 2 adds the routed experts'
# FLOPs once more to the busiest rank (forward, recompute, backward: 4 x 2
# N k 3 h f per MoE layer and micro-batch), a capacity factor of 1 caps it
# back to the mean; at ep 1 one rank computes every expert, N k whatever
# the routing: no change
ideal() { "$MERAK" sim --model moe-tiny --cluster ideal --gbs 8 "$@" --json; }
ideal >"$tmpdir/i1.json"; ideal --dp 4 --ep 4 >"$tmpdir/i4.json"
ideal --dp 4 --ep 4 --moe-imbalance 2 >"$tmpdir/im.json"
ideal --dp 4 --ep 4 --moe-imbalance 2 --moe-expert-capacity-factor 1 >"$tmpdir/ic.json"
ideal --moe-imbalance 2 >"$tmpdir/i1m.json"
check "ideal: MFU 1 at ep 1 and 4; ep 4, imbalance 2: + routed FLOPs / peak; capacity 1 caps it; ep 1: the same" "$PY" -c '
import json, sys
d1, d4, dm, dc, d1m = (json.load(open(f)) for f in sys.argv[1:6])
for d in (d1, d4):
    assert abs(d["mfu"] - 1) <= 1e-9, d["mfu"]
peak = d4["flops_per_iteration"] / (4 * d4["step_time_s"])   # one GPU'"'"'s (the FLOPs are the 4 GPUs'"'"')
routed = 2 * 4 * 4 * 2 * 64 * 2 * 3 * 64 * 128   # a replica'"'"'s 2 sequences x layers x (F + R + 2 B) x 2 N k 3 h f
assert abs(dm["step_time_s"] - (d4["step_time_s"] + routed / peak)) <= 1e-9 * dm["step_time_s"], dm["step_time_s"]
assert abs(dc["step_time_s"] - d4["step_time_s"]) <= 1e-12 * d4["step_time_s"], dc["step_time_s"]
assert d1m["step_time_s"] == d1["step_time_s"], (d1m["step_time_s"], d1["step_time_s"])
' "$tmpdir/i1.json" "$tmpdir/i4.json" "$tmpdir/im.json" "$tmpdir/ic.json" "$tmpdir/i1m.json"

# a split backward's B_W holds the MoE layers' weight gradients too (their experts' and router's
# GEMMs, one forward-sized GEMM a weight: mk_cost_op_wgrad_time), as torch's pipelining and DualPipe
# split them: on the ideal cluster (matmuls only) each stage's F less its B_W is exactly its two
# attention cores' forward (2 x 2 GEMMs x 2 s^2 hd per head: 4 heads, s 64, hd 16, at 1 TFLOP/s),
# and B_IN + B_W twice F (recompute none)
"$MERAK" sim --model moe-tiny --cluster ideal --pp 2 --gbs 8 --schedule zb-h1 --recompute none --json \
  --trace "$tmpdir/zbw.json" >/dev/null || echo "FAIL: sim moe-tiny zb-h1"
check "zb-h1: B_W = F less the attention cores, B_IN + B_W = 2 F, on every stage" "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
d = {(e.get("pid"), e["name"]): e["dur"] * 1e-6 for e in ev if e.get("ph") == "X"}
core = 2 * 2 * 2 * 64 * 64 * 16 * 4 / 1e12
for s in (0, 1):
    f, bi, bw = d[(s, "F0")], d[(s, "B_IN0")], d[(s, "B_W0")]
    print("  stage", s, "F", f, "B_IN", bi, "B_W", bw)
    assert abs(f - bw - core) <= 1e-5 * f and abs(bi + bw - 2 * f) <= 1e-5 * f, (s, f, bi, bw)  # the trace: 0.1 ns
' "$tmpdir/zbw.json"

# memory: with ep > 1 the busiest rank saves its routed copies' rows times the imbalance (ideal cluster,
# recompute none, pp 1: one micro-batch's 4 layers in flight); at ep 1 one rank saves every assignment
mem() { "$MERAK" sim --model moe-tiny --dtype fp32 --cluster ideal --dp 4 --gbs 8 --recompute none "$@" --json |
  "$PY" -c 'import json,sys; print(int(json.load(sys.stdin)["peak_memory_bytes"][0]))'; }
a=$(mem --ep 4) b=$(mem --ep 4 --moe-imbalance 2) c=$(mem --ep 1) d=$(mem --ep 1 --moe-imbalance 2)
# per layer the routed copies' rows: N k (h + 3 f) fp32 = 64 x 2 x (64 + 384) x 4 bytes (the experts'
# input rows, gate|up and activation: Megatron-Core weighs the activation by the probabilities,
# activation_func_with_probs, so the experts' outputs are not kept), and once the backward's gradients
# at the experts' activation (its largest step: R (f + 2 f), R = N k rows; graph.c moe_costs bwd_grads)
check "memory: ep 4, imbalance 2 adds the routed rows once more ($a -> $b); ep 1 the same ($c, $d)" \
  test $((b - a)) -eq $((4 * 64 * 2 * (64 + 3 * 128) * 4 + 64 * 2 * 3 * 128 * 4)) -a "$c" = "$d"
# the backward's working gradients: the MoE layer's output and input gradients (N h each) and its experts'
# largest step, the activation's (R f in, R 2 f out: gate|up), above the attention's and the head's
w=$("$MERAK" sim --model moe-tiny --dtype fp32 --cluster ideal --gbs 8 --recompute none --json |
  "$PY" -c 'import json,sys; print(int(json.load(sys.stdin)["memory_breakdown"][0]["working"]))')
check "memory: working $w = 2 N h + R 3 f fp32 bytes (the experts' backward gradients)" \
  test "$w" -eq $(((2 * 64 * 64 + 64 * 2 * 3 * 128) * 4))

# a plan file keeps ep and the imbalance
"$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep 2 --gbs 8 --moe-imbalance 1.5 --json \
  >"$tmpdir/p.json"
"$PY" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["plan"], open(sys.argv[2], "w"))' \
  "$tmpdir/p.json" "$tmpdir/plan.json"
check "plan JSON: ep 2, moe_imbalance 1.5" "$PY" -c '
import json, sys; p = json.load(open(sys.argv[1])); assert p["ep"] == 2 and p["moe_imbalance"] == 1.5, p' \
  "$tmpdir/plan.json"
a=$("$MERAK" sim --plan "$tmpdir/plan.json" --cluster "$tmpdir/c4.json" | awk '/^step time/ {print $3}')
b=$("$MERAK" sim --model moe-tiny --cluster "$tmpdir/c4.json" --dp 4 --ep 2 --gbs 8 --moe-imbalance 1.5 |
  awk '/^step time/ {print $3}')
check "sim --plan: step $a = flags' $b" [ "$a" = "$b" ]
"$MERAK" sim --model llama-tiny --dp 2 --json >"$tmpdir/d.json"
check "dense plan JSON has no ep" "$PY" -c '
import json, sys; p = json.load(open(sys.argv[1]))["plan"]; assert "ep" not in p and "moe_imbalance" not in p' \
  "$tmpdir/d.json"

# the planner searches ep (dividing a stage's tp x cp x dp ranks and the
# experts: MoE parallel folding), ep above dp among them; columns by name
cols='$1 == "#" { for (i = 1; i <= NF; i++) c[$i] = i }' # a data row has its fields where the header has
"$MERAK" plan --model moe-tiny --cluster "$tmpdir/c4.json" --gpus 8 --gbs 16 --top 1000 >"$tmpdir/plan" 2>&1
check "plan table: ep and a2a columns" grep -q "  #   dp  ep  pp .* a2a$" "$tmpdir/plan"
check "plan: ep 1, 2 and 4 searched, each dividing tp x dp and the 4 experts, some above dp" awk "$cols"'
  $1 ~ /^[0-9]+$/ { ep = $(c["ep"]); r = $(c["dp"]) * $(c["tp"]); seen[ep] = 1
                    if (r % ep || 4 % ep) bad = 1; if (ep > $(c["dp"])) fold = 1 }
  END { exit !(seen[1] && seen[2] && seen[4] && fold && !bad) }' "$tmpdir/plan"
check "plan: every MoE layout with tp > 1 has sequence parallelism (Megatron-LM asserts it)" awk "$cols"'
  $1 ~ /^[0-9]+$/ { n++; if ($(c["tp"]) > 1) { t++; if ($(c["sp"]) != "on") bad = 1 } }
  END { exit !(n && t && !bad) }' "$tmpdir/plan"
# the acceptance command: Mixtral 8x7B on 64 H100s answers with ep > 1 and
# names the all-to-alls' share of the step
"$MERAK" plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq-length 4096 --top 2 \
  >"$tmpdir/plan" 2>&1
check "mixtral-8x7b plan: the best has ep > 1 and an all-to-all share" awk "$cols"'
  $1 == "1" { f = $(c["ep"]) > 1 && $NF ~ /%$/ && $NF + 0 > 0 } END { exit !f }' "$tmpdir/plan"
"$MERAK" plan --model llama-tiny --cluster "$tmpdir/c4.json" --gpus 8 --gbs 16 --top 3 >"$tmpdir/plan" 2>&1
check "dense plan table: no ep column" sh -c "! grep -q ' ep \\|a2a' '$tmpdir/plan'"

# MoE parallel folding: the EP group is ep consecutive ranks of the stage
# (Megatron-Core's expert grid with expert tensor parallelism 1), so at
# tp 2 an ep of 8 is one DGX node whether dp is 4 or 8: the same
# all-to-alls (the rank's tokens, m alike) cost the same.  EP ranks spaced
# by tp (DP ranks only, as before folding) would span two nodes at dp 8.
epx() { "$MERAK" sim --model mixtral-8x7b --cluster dgx-h100 --tp 2 --ep 8 --sequence-parallel --seq-length 4096 \
  --recompute full "$@" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["exposed_comm_s"]["ep"])'; }
a=$(epx --dp 8 --gbs 16) b=$(epx --dp 4 --gbs 8)
check "folding: ep 8 at tp 2 is one node at dp 8 as at dp 4 (EP exposed $a, $b s)" \
  "$PY" -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a > 0 and abs(a - b) <= 1e-9 * b))' "$a" "$b"

# bad input: one line, exit 2
expect_fail "ep not dividing a stage's ranks" "--ep 4 does not divide a stage's tp x cp x dp = 2 ranks" -- \
  "$MERAK" sim --model moe-tiny --dp 2 --ep 4 --gbs 8
expect_fail "ep not dividing the experts" "--ep 8 does not divide the 4 experts" -- \
  "$MERAK" sim --model moe-tiny --dp 8 --ep 8 --gbs 8
expect_fail "ep on a dense model" "--ep 2 needs a model with experts" -- "$MERAK" sim --model llama-tiny --dp 2 --ep 2
expect_ok "ep 1 on a dense model" "$MERAK" sim --model llama-tiny --ep 1
expect_fail "ep 0" "--ep must be an integer >= 1" -- "$MERAK" sim --model moe-tiny --ep 0
expect_fail "ep above its maximum" "--ep must be at most 16384" -- "$MERAK" sim --model moe-tiny --ep 99999
expect_fail "expert tensor parallelism" "--expert-tensor-parallel-size 2: only 1 is supported" -- \
  "$MERAK" sim --model moe-tiny --expert-tensor-parallel-size 2
expect_ok "expert tensor parallelism 1" "$MERAK" sim --model moe-tiny --expert-tensor-parallel-size 1
expect_fail "imbalance below 1" "--moe-imbalance must be from 1" -- "$MERAK" sim --model moe-tiny --moe-imbalance 0.5
expect_fail "imbalance too big" "--moe-imbalance must be at most" -- "$MERAK" sim --model moe-tiny --moe-imbalance 1e9
expect_fail "the long flag: ep on a dense model" "--ep 2 needs a model with experts" -- \
  "$MERAK" sim --model llama-tiny --dp 2 --expert-model-parallel-size 2
expect_fail "imbalance on a dense model" "--moe-imbalance 2 needs a model with experts" -- \
  "$MERAK" sim --model llama-tiny --moe-imbalance 2
expect_fail "plan: imbalance on a dense model" "--moe-imbalance 2 needs a model with experts" -- \
  "$MERAK" plan --model llama-tiny --moe-imbalance 2
expect_fail "plan: imbalance below 1" "--moe-imbalance must be from 1" -- "$MERAK" plan --model moe-tiny --moe-imbalance 0.5
# a hybrid ZeRO group cutting an EP group: Megatron-Core's optimizer instances split the expert
# data-parallel group (intra_partial_expert_data_parallel_size), so it must hold whole EP groups; the
# planner's node-sized groups skip such layouts (it proposed 5 among 300 plans here before)
expect_fail "ep 16 over a node's hybrid ZeRO group of 8" "--ep 16 must divide the 8 ranks of a hybrid ZeRO group" -- \
  "$MERAK" sim --model moe-tiny --num-experts 32 --cluster dgx-h100 --dp 16 --ep 16 --zero 1 --zero-shard-group node \
  --gbs 16
"$MERAK" plan --model moe-tiny --num-experts 32 --gpus 64 --cluster dgx-h100 --gbs 128 --top 300 --json \
  >"$tmpdir/hy.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
check "plan: its hybrid ZeRO groups hold whole EP groups" "$PY" -c '
import json, sys
ps = [p["plan"] for p in json.load(open(sys.argv[1]))["plans"]]
hy = [q for q in ps if q.get("zero_shard_size")]
bad = [q for q in hy if q["zero_shard_size"] * q.get("cp", 1) * q["tp"] % q.get("ep", 1)]
print("  %d plans, %d hybrid, %d cutting an EP group" % (len(ps), len(hy), len(bad))); sys.exit(1 if bad or not hy else 0)' \
  "$tmpdir/hy.json"
finish
