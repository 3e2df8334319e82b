#!/bin/sh
# The Llama family on the command line (issue 16): the presets' exact
# parameter counts and FLOPs from `merak model --json`, Megatron-LM's
# architecture flags and their errors, plan files that keep the
# architecture, and `merak run` refusing a block that is neither (training: mpi-exec-llama.sh).
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}

expect_ok "merak models" "$MERAK" models
for m in llama-tiny llama-2-7b llama-2-13b llama-2-70b llama-3-8b llama-3-70b llama-3.1-405b; do
  check "models lists $m" grep -q -- "^  $m " "$tmpdir/out"
done

# name params layers hidden heads kv ffn vocab seq theta
while read -r m p l h a kv f v s theta; do
  "$MERAK" model --model "$m" --json >"$tmpdir/m.json" 2>"$tmpdir/err"
  check "$m: exact params $p and FLOPs" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
p, l, h, a, kv, f, V, s = map(int, sys.argv[2:10])
theta = float(sys.argv[10])
assert d["params"] == p, (d["params"], p)
assert d["family"] == "llama" and d["num_query_groups"] == kv and d["rotary_base"] == theta, d
assert d["normalization"] == "RMSNorm" and d["swiglu"] and d["position_embedding_type"] == "rope"
assert d["untie_embeddings_and_output_weights"] and not d["add_bias_linear"] and d["norm_epsilon"] == 1e-5
assert (d["num_layers"], d["hidden_size"], d["num_attention_heads"], d["ffn_hidden_size"], d["vocab_size"], d["seq_length"]) == (l, h, a, f, V, s)
B = d["gbs"]
hkv = kv * (h // a)
P = l * (2 * h * h + 2 * h * hkv + 3 * h * f) + h * V
want = 3 * B * s * (2 * P + 4 * l * s * h)
assert abs(d["flops_per_iteration"] - want) <= 1e-12 * want, (d["flops_per_iteration"], want)
assert d["flops_per_iteration_recompute"] > d["flops_per_iteration"]
' "$tmpdir/m.json" "$p" "$l" "$h" "$a" "$kv" "$f" "$v" "$s" "$theta"
done <<'EOF2'
llama-tiny 229952 4 64 4 2 192 256 64 10000
llama-2-7b 6738415616 32 4096 32 32 11008 32000 4096 10000
llama-2-13b 13015864320 40 5120 40 40 13824 32000 4096 10000
llama-2-70b 68976648192 80 8192 64 8 28672 32000 4096 10000
llama-3-8b 8030261248 32 4096 32 8 14336 128256 8192 500000
llama-3-70b 70553706496 80 8192 64 8 28672 128256 8192 500000
llama-3.1-405b 405853388800 126 16384 128 8 53248 128256 131072 500000
EOF2

# Megatron-LM's flags make gpt-tiny a llama-tiny (same parameters)
a=$("$MERAK" model --model gpt-tiny --normalization RMSNorm --swiglu --position-embedding-type rope \
    --rotary-base 10000 --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
    --disable-bias-linear --ffn-hidden-size 192 --norm-epsilon 1e-5 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["params"])')
b=$("$MERAK" model --model llama-tiny --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["params"])')
check "the flags on gpt-tiny give llama-tiny's parameters ($a, $b)" [ "$a" = "$b" ]
a=$("$MERAK" model --model llama-tiny --normalization LayerNorm --position-embedding-type learned_absolute --json |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["params"])')
check "LayerNorm and learned positions on llama-tiny ($a = 229952 + 9*64 + 64*64)" [ "$a" = 234624.0 ]
expect_ok "model prints the architecture" "$MERAK" model --model llama-3-70b
check "architecture line" grep -q "8 KV heads (query groups), head dim 128, RMSNorm, SwiGLU MLP, rotary positions (theta 500000)" "$tmpdir/out"

expect_fail "bad --normalization" "normalization 'BatchNorm' is not LayerNorm or RMSNorm" -- \
  "$MERAK" model --model llama-tiny --normalization BatchNorm
expect_fail "bad --position-embedding-type" "'alibi' is not learned_absolute or rope" -- \
  "$MERAK" model --position-embedding-type alibi
expect_fail "--rotary-base 0" "--rotary-base must be in" -- "$MERAK" model --model llama-tiny --rotary-base 0
expect_fail "--rotary-base not a number" "--rotary-base must be a non-negative number" -- "$MERAK" model --rotary-base x
expect_fail "--norm-epsilon too large" "--norm-epsilon must be at most 1" -- "$MERAK" model --norm-epsilon 3
expect_fail "--num-query-groups alone" "--num-query-groups needs --group-query-attention" -- \
  "$MERAK" model --model gpt-tiny --num-query-groups 2
expect_fail "groups not dividing heads" "--num-query-groups 3 does not divide --num-attention-heads 4" -- \
  "$MERAK" model --model gpt-tiny --group-query-attention --num-query-groups 3
expect_fail "groups 0" "--num-query-groups must be an integer >= 1" -- "$MERAK" model --num-query-groups 0
expect_fail "tp not dividing the KV heads" "tensor parallel size 16 does not divide the 8 KV heads" -- \
  "$MERAK" model --model llama-3-8b --tp 16
expect_fail "--swiglu takes no value" "unknown option|needs" -- "$MERAK" model --swiglu=1
expect_fail "architecture flags on a JSON model" "architecture flags cannot change a JSON model" -- \
  "$MERAK" model --model "$top_srcdir/traces/models/llama-small.json" --swiglu
expect_ok "llama-small.json" "$MERAK" model --model "$top_srcdir/traces/models/llama-small.json"

# a plan file keeps the architecture: sim --plan reproduces the planner's time
"$MERAK" plan --model llama-tiny --num-layers 8 --hidden-size 512 --num-attention-heads 8 --num-query-groups 2 \
  --group-query-attention --ffn-hidden-size 1376 --seq-length 512 --vocab-size 8000 --cluster dgx-a100 --gpus 8 \
  --gbs 32 --top 1 --json --save-plan "$tmpdir/p.json" >"$tmpdir/plan.json" 2>"$tmpdir/err"
check "plan llama exits 0" [ $? -eq 0 ]
check "the plan file names the family and its query groups" "$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert m["family"] == "llama" and m["num_query_groups"] == 2 and m["normalization"] == "RMSNorm", m
' "$tmpdir/p.json"
"$MERAK" sim --plan "$tmpdir/p.json" --json >"$tmpdir/sim.json" 2>"$tmpdir/err"
check "sim --plan reproduces the planned step time" "$PY" -c '
import json, sys
a = json.load(open(sys.argv[1]))["plans"][0]["step_time_s"]
b = json.load(open(sys.argv[2]))["step_time_s"]
assert abs(a - b) <= 1e-12 * a, (a, b)
' "$tmpdir/plan.json" "$tmpdir/sim.json"
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1])); d["model"]["normalization"] = "GroupNorm"
json.dump(d, open(sys.argv[2], "w"))
' "$tmpdir/p.json" "$tmpdir/bad.json"
expect_fail "plan file with a bad normalization" "normalization 'GroupNorm' is not LayerNorm or RMSNorm" -- \
  "$MERAK" sim --plan "$tmpdir/bad.json"

expect_fail "run refuses a mixture of GPT and Llama blocks" "not a mixture of the two" -- \
  "$MERAK" run --model gpt-tiny --swiglu --steps 1
finish
