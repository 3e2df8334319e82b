#!/bin/sh
# Mixture of experts, the model description (issue 19, first step): the
# MoE presets' exact total and active parameter counts, the active-expert
# FLOP form within 1%, the MoE flags and their errors, and the engines
# (sim, plan, run) refusing an MoE model until they support experts.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}

expect_ok "merak models" "$MERAK" models
for m in moe-tiny mixtral-8x7b mixtral-8x22b deepseek-moe-16b; do
  check "models lists $m" grep -q -- "^  $m " "$tmpdir/out"
done
check "models says MoE trains on the CPU backend" grep -q "MoE presets: .*trained by merak run on the CPU backend" "$tmpdir/out"

# name params active layers hidden heads kv E k f shared first_dense dense_ffn vocab seq
while read -r m p act l h a kv E k f fs fd fdense V s; do
  "$MERAK" model --model "$m" --json >"$tmpdir/m.json" 2>"$tmpdir/err"
  check "$m: params $p, active $act, FLOPs within 1%" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
p, act, l, h, a, kv, E, k, f, fs, fd, fdense, V, s = map(int, sys.argv[2:16])
assert d["params"] == p, (d["params"], p)
assert d["active_params"] == act, (d["active_params"], act)
assert (d["num_experts"], d["moe_router_topk"], d["moe_ffn_hidden_size"]) == (E, k, f), d
assert d["moe_shared_expert_intermediate_size"] == fs and d["moe_expert_capacity_factor"] == 0
assert (d["num_layers"], d["hidden_size"], d["vocab_size"], d["seq_length"]) == (l, h, V, s)
B = d["gbs"]
hkv = kv * (h // a)
moe = k * 3 * h * f + 3 * h * fs + h * E
P = l * (2 * h * h + 2 * h * hkv) + (l - fd) * moe + fd * 3 * h * fdense + h * V
want = 3 * B * s * (2 * P + 4 * l * s * h)
got = d["flops_per_iteration"]
assert abs(got - want) <= 0.01 * want, (got, want)
assert sum(L["kind"] == "moe" for L in d["layers"]) == l - fd
' "$tmpdir/m.json" "$p" "$act" "$l" "$h" "$a" "$kv" "$E" "$k" "$f" "$fs" "$fd" "$fdense" "$V" "$s"
done <<'T'
moe-tiny 476736 280128 4 64 4 2 4 2 128 0 0 0 256 64
mixtral-8x7b 46702792704 12879925248 32 4096 32 8 8 2 14336 0 0 0 32000 32768
mixtral-8x22b 140630071296 39161468928 56 6144 48 8 8 2 16384 0 0 0 32768 65536
deepseek-moe-16b 16375728128 2828650496 28 2048 16 16 64 6 1408 2816 1 10944 102400 4096
T

# flags: experts on a dense preset, the expert width following the ffn
"$MERAK" model --model llama-tiny --num-experts 4 --moe-router-topk 1 --json >"$tmpdir/m.json"
check "--num-experts on llama-tiny: 4 experts of the ffn 192, top-1" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["num_experts"], d["moe_router_topk"], d["moe_ffn_hidden_size"]) == (4, 1, 192), d
h, f, E = 64, 192, 4
assert d["params"] - d["active_params"] == 4 * (E - 1) * 3 * h * f, d
' "$tmpdir/m.json"
"$MERAK" model --model moe-tiny --moe-layer-freq 2 --json >"$tmpdir/m.json"
check "--moe-layer-freq 2: blocks 0 and 2 are MoE" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [L["block"] for L in d["layers"] if L["kind"] == "moe"] == [0, 2], d["layers"]
' "$tmpdir/m.json"
"$MERAK" model --model moe-tiny --moe-layer-freq "([0]*1+[1]*3)" --json >"$tmpdir/m.json"
check "--moe-layer-freq pattern: the first block dense" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [L["block"] for L in d["layers"] if L["kind"] == "moe"] == [1, 2, 3], d["layers"]
' "$tmpdir/m.json"
"$MERAK" model --model moe-tiny --num-experts 0 --json >"$tmpdir/m.json"
check "--num-experts 0: dense, no MoE keys" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert "num_experts" not in d and d["params"] == d["active_params"], d
' "$tmpdir/m.json"
"$MERAK" model --model llama-tiny --json >"$tmpdir/m.json"
check "dense models keep their JSON (no MoE keys)" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert "num_experts" not in d and d["params"] == d["active_params"]
' "$tmpdir/m.json"
expect_ok "human output names the experts" "$MERAK" model --model mixtral-8x7b
check "active line" grep -q "^active: 12879925248 parameters" "$tmpdir/out"

# run trains MoE models with Llama blocks (tests/mpi-moe.sh); GPT blocks
# with experts and bad ep: one line, exit 2
expect_fail "run: MoE on GPT blocks" "MoE layers are Llama blocks" -- "$MERAK" run --model gpt-tiny --num-experts 4 --steps 1
expect_fail "run: ep not dividing a stage's ranks" "--ep 2 does not divide a stage's tp x cp x dp = 1 ranks" -- \
  "$MERAK" run --model moe-tiny --ep 2 --steps 1
expect_fail "run: top-k above E" "--moe-router-topk 5 is above --num-experts 4" -- \
  "$MERAK" run --model moe-tiny --moe-router-topk 5 --steps 1
expect_fail "run: MoE option on a dense model" "MoE options need experts" -- \
  "$MERAK" run --model llama-tiny --moe-expert-capacity-factor 1.0 --steps 1

# bad input
expect_fail "top-k above E" "--moe-router-topk 5 is above --num-experts 4" -- \
  "$MERAK" model --model moe-tiny --moe-router-topk 5
expect_fail "top-k 0" "--moe-router-topk must be an integer >= 1" -- "$MERAK" model --model moe-tiny --moe-router-topk 0
expect_fail "MoE option without experts" "MoE options need experts" -- \
  "$MERAK" model --model llama-tiny --moe-router-topk 2
expect_fail "MoE option with --num-experts 0" "MoE options need experts" -- \
  "$MERAK" model --model moe-tiny --num-experts 0 --moe-ffn-hidden-size 64
expect_fail "expert width 0" "--moe-ffn-hidden-size must be an integer >= 1" -- \
  "$MERAK" model --model moe-tiny --moe-ffn-hidden-size 0
expect_fail "too many experts" "--num-experts must be at most 16384" -- "$MERAK" model --model moe-tiny --num-experts 16385
expect_fail "expert width too big" "--moe-ffn-hidden-size must be at most" -- \
  "$MERAK" model --model moe-tiny --moe-ffn-hidden-size 999999999
expect_fail "capacity too big" "--moe-expert-capacity-factor must be at most" -- \
  "$MERAK" model --model moe-tiny --moe-expert-capacity-factor 5000
expect_fail "aux coefficient too big" "--moe-aux-loss-coeff must be at most" -- \
  "$MERAK" model --model moe-tiny --moe-aux-loss-coeff 1000
expect_fail "bad layer freq" "is not an integer or" -- "$MERAK" model --model moe-tiny --moe-layer-freq every
expect_fail "layer freq above the blocks" "--moe-layer-freq 5 must be from 1 to the 4 blocks" -- \
  "$MERAK" model --model moe-tiny --moe-layer-freq 5
expect_fail "pattern of the wrong length" "the pattern has 5 blocks, the model 4" -- \
  "$MERAK" model --model moe-tiny --moe-layer-freq "([0]*1+[1]*4)"
finish
