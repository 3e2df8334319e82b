#!/bin/sh
# A llama-tiny checkpoint rebuilt in numpy from its tensors and config
# alone (tests/llama_ref.py: LlamaForCausalLM's forward, float64) gives the
# executor's loss on the same batch (1e-6 relative): the untied GQA preset
# and a tied multi-query variant with another rotary base and epsilon, each
# trained 10 steps at a high learning rate so that attention (and with it
# RoPE) moves the loss by far more than the tolerance; a config with another
# rope_theta misses it; the kin transformers has (Mistral, Mixtral, Qwen2,
# Qwen3, Qwen3-MoE, DeepSeek-V3's latent attention) from their configs, and
# documents (--reset-*).  The same text as bytes and as
# uint16 ids trains to bitwise the same losses.  Skipped (77) without numpy.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=
for p in ${PYTHON:-python3} python3 /usr/bin/python3; do
  "$p" -c "import numpy" 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "no python3 with numpy: skipped"; exit 77; }
REF="$top_srcdir/tests/llama_ref.py"
EDIT="$top_srcdir/tests/st_edit.py"
D="$top_srcdir/experiments/train-shakespeare/tinyshakespeare.txt"
first_loss() { losses_of "$1" | cut -d' ' -f1; }

# hf_case NAME CHECK KEYS: a Hugging Face config of llama-tiny's sizes with KEYS (JSON members) trained as
# ref_case does, then CHECK (Python on m, t, c: the checkpoint's metadata, tensors, config) must hold
hf_case() {
  name=$1; chk=$2; keys=$3
  mkdir -p "$tmpdir/$name"
  printf '{"hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64, "rope_theta": 1000000.0, "tie_word_embeddings": false, "hidden_act": "silu", %s}\n' \
    "$keys" >"$tmpdir/$name/config.json"
  ref_case "$name" --model "$tmpdir/$name"
  check "$name: $chk" "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"]); exec(sys.argv[3])' "$top_srcdir/tests" "$tmpdir/$name.st" "$chk"
}

# misses WHAT CKPT WANT_JSON PYTHON-EDIT: the checkpoint's tensors under its config edited by PYTHON-EDIT (on
# the dict c) must NOT give the executor's loss in WANT_JSON: the reference can tell the feature apart
misses() {
  what=$1; ck=$2; want=$(first_loss "$3"); edit=$4
  cfg=$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
c = json.loads(st_read.read(sys.argv[2])[0]["config"]); exec(sys.argv[3]); print(json.dumps(c, separators=(",", ":")))' \
    "$top_srcdir/tests" "$ck" "$edit")
  "$PY" "$EDIT" "$ck" "$tmpdir/edited.st" "--meta=config=$cfg"
  if "$PY" "$REF" "$tmpdir/edited.st" "$D" --gbs 8 --batch 10 --want "$want" --rtol 1e-6 >"$tmpdir/o" 2>&1; then
    echo "FAIL: $what still gives the executor's loss: $(cat "$tmpdir/o")"; fails=$((fails + 1))
  else echo "ok: $what misses: $(tail -1 "$tmpdir/o")"; fi
}

# case NAME FLAGS...: train 10 steps, save; the 11th step's loss is the
# loss of the saved model on global batch 10
ref_case() {
  name=$1; shift
  # no warm-up: 10 steps at the full rate train far enough that a wrong rope_theta shows
  R="--gbs 8 --lr 3e-2 --lr-warmup-iters 0 --json --data $D $*"
  expect_ok "$name: train 10 steps, save" timeout 120 "$MERAK" run $R --steps 10 --save "$tmpdir/$name.st"
  expect_ok "$name: the saved model's loss on batch 10" timeout 60 "$MERAK" run $R --steps 1 --load "$tmpdir/$name.st"
  want=$(first_loss "$tmpdir/out")
  expect_ok "$name: numpy gives the executor's loss $want (1e-6)" \
    "$PY" "$REF" "$tmpdir/$name.st" "$D" --gbs 8 --batch 10 --want "$want" --rtol 1e-6
  echo "  numpy: $(cat "$tmpdir/out")"
}
ref_case untied --model llama-tiny
ref_case tied --model gpt-tiny --normalization RMSNorm --swiglu --position-embedding-type rope \
  --disable-bias-linear --group-query-attention --num-query-groups 1 --ffn-hidden-size 192 \
  --rotary-base 500000 --norm-epsilon 1e-6
# a head dim apart from hidden / heads (issue 36: --kv-channels, HF's
# head_dim): q_proj (96, 64), o_proj (64, 96), RoPE over 24 dims
ref_case headdim --model llama-tiny --kv-channels 24
check "headdim: the checkpoint's config says head_dim 24" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"])
assert c["head_dim"] == 24 and t["model.layers.0.self_attn.q_proj.weight"][0] == [96, 64], c' \
  "$top_srcdir/tests" "$tmpdir/headdim.st"
check "tied: no lm_head.weight in the file" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"])
assert "lm_head.weight" not in t and c["tie_word_embeddings"] is True and c["num_key_value_heads"] == 1
assert c["rope_theta"] == 500000 and c["rms_norm_eps"] == 1e-6' "$top_srcdir/tests" "$tmpdir/tied.st"

# Llama 3.1's rope_scaling (issue 36), from a Hugging Face config: the
# executor's scaled frequencies are transformers' formula (the reference's
# rope), on a short original context so that most pairs are scaled
mkdir -p "$tmpdir/hf31"
cat >"$tmpdir/hf31/config.json" <<'EOF'
{"model_type": "llama", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64, "rms_norm_eps": 1e-05,
 "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu",
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}}
EOF
ref_case scaled --model "$tmpdir/hf31"
check "scaled: the checkpoint's config carries the scaling" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
c = json.loads(st_read.read(sys.argv[2])[0]["config"])
assert c["rope_scaling"] == {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                             "original_max_position_embeddings": 32}, c' "$top_srcdir/tests" "$tmpdir/scaled.st"
# and the same model unscaled misses the scaled executor's loss
"$MERAK" run --model "$tmpdir/hf31" --gbs 8 --lr 3e-2 --json --data "$D" --steps 1 --load "$tmpdir/scaled.st" >"$tmpdir/s.json"
misses "the unscaled formula" "$tmpdir/scaled.st" "$tmpdir/s.json" 'del c["rope_scaling"]'

# Mistral's sliding window (issue 36): a query sees the 16 keys ending at
# itself (transformers' sliding_window_overlay), on sequences of 64; the
# checkpoint's config says it, and without it the same tensors miss
mkdir -p "$tmpdir/swa"
cat >"$tmpdir/swa/config.json" <<'EOF'
{"model_type": "mistral", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64, "rms_norm_eps": 1e-05,
 "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu", "sliding_window": 16}
EOF
ref_case window --model "$tmpdir/swa"
"$MERAK" run --model "$tmpdir/swa" --gbs 8 --lr 3e-2 --json --data "$D" --steps 1 --load "$tmpdir/window.st" >"$tmpdir/w.json"
check "window: the checkpoint's config is mistral's with its window" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
c = json.loads(st_read.read(sys.argv[2])[0]["config"]); assert c["sliding_window"] == 16 and c["model_type"] == "mistral", c' \
  "$top_srcdir/tests" "$tmpdir/window.st"
misses "attention over the whole prefix" "$tmpdir/window.st" "$tmpdir/w.json" \
  'del c["sliding_window"]; c["model_type"] = "llama"'

# Qwen2's q/k/v biases (issue 36: --add-qkv-bias), from its config: trained (the biases move from zero), the
# checkpoint a qwen2 model whose biases the reference adds
hf_case qwen2 'b = t["model.layers.0.self_attn.k_proj.bias"]
assert c["model_type"] == "qwen2" and b[0] == [32] and max(abs(v) for v in b[1]) > 1e-4, (c, b[0])' \
  '"model_type": "qwen2", "rms_norm_eps": 1e-06, "use_sliding_window": false'

# Qwen3's q/k norms (issue 36: --qk-layernorm), from its config (head_dim 24 on hidden 64: Qwen3Config's head_dim
# is its own): each q and k head RMSNorm'd before RoPE, the norms' weights trained
hf_case qwen3 'n = t["model.layers.1.self_attn.k_norm.weight"]
assert c["model_type"] == "qwen3" and c["head_dim"] == 24 and n[0] == [24] and max(abs(v - 1) for v in n[1]) > 1e-4, c' \
  '"model_type": "qwen3", "head_dim": 24, "rms_norm_eps": 1e-06, "attention_bias": false'

# mixture of experts (issue 36: the sparse blocks as transformers runs them): Mixtral's names, and Qwen3-MoE's
# (q/k norms, mlp.experts.*, mlp_only_layers for its dense first block, top-k renormalised by norm_topk_prob)
hf_case mixtral 'assert c["model_type"] == "mixtral" and "model.layers.3.block_sparse_moe.experts.3.w2.weight" in t, c' \
  '"model_type": "mixtral", "rms_norm_eps": 1e-05, "num_local_experts": 4, "num_experts_per_tok": 2'
# Qwen2-MoE (its q/k/v biases, a shared expert scaled by sigmoid(x . shared_expert_gate), top-k not renormalised)
hf_case qwen2-moe 'g = t["model.layers.2.mlp.shared_expert_gate.weight"]
assert c["model_type"] == "qwen2_moe" and c["shared_expert_intermediate_size"] == 96 and g[0] == [1, 64], c
assert "model.layers.1.mlp.shared_expert.down_proj.weight" in t and "model.layers.1.self_attn.q_proj.bias" in t' \
  '"model_type": "qwen2_moe", "rms_norm_eps": 1e-06, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 96, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [0], "use_sliding_window": false'
hf_case qwen3-moe 'assert c["model_type"] == "qwen3_moe" and c["mlp_only_layers"] == [0] and "model.layers.0.mlp.gate_proj.weight" in t and "model.layers.1.mlp.experts.3.down_proj.weight" in t, c' \
  '"model_type": "qwen3_moe", "head_dim": 16, "rms_norm_eps": 1e-06, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [0]'

# DeepSeek-V3's multi-head latent attention (issue 36), dense (no routed experts), from its config: q and kv
# latents of 32 and 16, heads of 16 + 8 (RoPE, pairs interleaved) for q/k and 12 for v; DeepseekV3Attention in
# the reference; the checkpoint a deepseek_v3 model; the same tensors with RoPE's pairs as halves miss
mkdir -p "$tmpdir/mla"
cat >"$tmpdir/mla/config.json" <<'EOF'
{"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 4,
 "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256, "max_position_embeddings": 64,
 "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu",
 "attention_bias": false, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
 "v_head_dim": 12, "n_routed_experts": null, "first_k_dense_replace": 4}
EOF
ref_case mla --model "$tmpdir/mla"
check "mla: the checkpoint's config is deepseek_v3's, its latents trained" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"]); n = t["model.layers.2.self_attn.kv_a_layernorm.weight"]
assert c["model_type"] == "deepseek_v3" and c["v_head_dim"] == 12 and c["n_routed_experts"] is None, c
assert t["model.layers.0.self_attn.kv_b_proj.weight"][0] == [112, 16] and max(abs(v - 1) for v in n[1]) > 1e-4' \
  "$top_srcdir/tests" "$tmpdir/mla.st"
"$MERAK" run --model "$tmpdir/mla" --gbs 8 --lr 3e-2 --json --data "$D" --steps 1 --load "$tmpdir/mla.st" >"$tmpdir/m.json"
misses "RoPE's pairs as halves" "$tmpdir/mla.st" "$tmpdir/m.json" 'c["rope_interleave"] = False'

# the tiny DeepSeek-V3 (issue 36: deepseek-tiny, MLA and DeepseekV3MoE: sigmoid scores, the best of 2 groups of
# 4 experts, the top 2 by score + e_score_correction_bias, weights renormalised x 2.5, a shared expert, the first
# block dense; the biases moved by the load each step): the reference's DeepseekV3MoE gives the loss; the same
# tensors without the groups or the scaling miss
ref_case deepseek --model deepseek-tiny
check "deepseek: the checkpoint is deepseek_v3's with its router, the score biases moved" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read, json
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"]); b = t["model.layers.3.mlp.gate.e_score_correction_bias"]
assert (c["model_type"], c["n_routed_experts"], c["n_group"], c["topk_group"], c["topk_method"]) == \
  ("deepseek_v3", 8, 2, 1, "noaux_tc") and c["first_k_dense_replace"] == 1, c
assert "model.layers.0.mlp.gate_proj.weight" in t and "model.layers.1.mlp.shared_experts.down_proj.weight" in t
assert b[0] == [8] and max(abs(v) for v in b[1]) > 5e-4, b' "$top_srcdir/tests" "$tmpdir/deepseek.st"
"$MERAK" run --model deepseek-tiny --gbs 8 --lr 3e-2 --json --data "$D" --steps 1 --load "$tmpdir/deepseek.st" \
  >"$tmpdir/ds.json"
misses "routing without the groups" "$tmpdir/deepseek.st" "$tmpdir/ds.json" 'c["n_group"] = c["topk_group"] = 1'
misses "weights not scaled" "$tmpdir/deepseek.st" "$tmpdir/ds.json" 'c["routed_scaling_factor"] = 1.0'

# Megatron's --reset-position-ids / --reset-attention-mask (issue 36): documents of 5-39 tokens in sequences of
# 64, from a Megatron dataset's index; positions restart and attention stays inside each, as the reference's
# get_ltor_masks_and_position_ids on the same documents; without the flags the reference misses
"$PY" "$top_srcdir/tests/megatron_write.py" "$tmpdir/docs" 3 400 5 40
DR="--model llama-tiny --gbs 8 --lr 3e-2 --lr-warmup-iters 0 --json --data-path $tmpdir/docs"
expect_ok "documents: train 10 steps, save" timeout 120 "$MERAK" run $DR --steps 10 --save "$tmpdir/docs.st" \
  --reset-position-ids --reset-attention-mask
for f in "--reset-position-ids --reset-attention-mask" --reset-position-ids --reset-attention-mask; do
  "$MERAK" run $DR --steps 1 --load "$tmpdir/docs.st" $f >"$tmpdir/d.json" 2>/dev/null
  expect_ok "documents ($f): numpy gives the executor's loss (1e-6)" "$PY" "$REF" "$tmpdir/docs.st" "$tmpdir/docs" \
    --gbs 8 --batch 10 --want "$(first_loss "$tmpdir/d.json")" --rtol 1e-6 $f
done
if "$PY" "$REF" "$tmpdir/docs.st" "$tmpdir/docs" --gbs 8 --batch 10 --want "$(first_loss "$tmpdir/d.json")" --rtol 1e-6 \
    >"$tmpdir/o" 2>&1; then
  echo "FAIL: attention across documents still gives the masked executor's loss"; fails=$((fails + 1))
else echo "ok: attention across documents misses the masked run: $(tail -1 "$tmpdir/o")"; fi
# and the latent attention's RoPE parts restart at each document too; with the fused attention (issue 37)
expect_ok "documents, MLA, fused attention: train 10 steps, save" timeout 120 "$MERAK" run ${DR#--model llama-tiny} \
  --model "$tmpdir/mla" --steps 10 --save "$tmpdir/docs-mla.st" --reset-position-ids --reset-attention-mask \
  --attention-backend fused
"$MERAK" run ${DR#--model llama-tiny} --model "$tmpdir/mla" --steps 1 --load "$tmpdir/docs-mla.st" --reset-position-ids \
  --reset-attention-mask --attention-backend fused >"$tmpdir/d.json" 2>/dev/null
expect_ok "documents, MLA: numpy gives the executor's loss (1e-6)" "$PY" "$REF" "$tmpdir/docs-mla.st" "$tmpdir/docs" \
  --gbs 8 --batch 10 --want "$(first_loss "$tmpdir/d.json")" --rtol 1e-6 --reset-position-ids --reset-attention-mask
expect_fail "--reset-attention-mask needs documents" "need a Megatron-LM dataset" -- \
  "$MERAK" run --model llama-tiny --steps 1 --data "$D" --reset-attention-mask

# the rebuild can fail: the same tensors under a config with another rotary base
"$MERAK" run --model llama-tiny --gbs 8 --lr 3e-2 --json --data "$D" --steps 1 --load "$tmpdir/untied.st" >"$tmpdir/u.json"
check "the executor's loss on batch 10 again: $(first_loss "$tmpdir/u.json")" test -n "$(first_loss "$tmpdir/u.json")"
misses "a wrong rope_theta" "$tmpdir/untied.st" "$tmpdir/u.json" 'assert c["rope_theta"] == 10000; c["rope_theta"] = 500000'

# bytes and uint16 ids of the same text: the same tokens, bitwise the same losses
"$PY" -c 'import sys, numpy as np
np.frombuffer(open(sys.argv[1], "rb").read(), dtype=np.uint8).astype("<u2").tofile(sys.argv[2])' "$D" "$tmpdir/t.u16"
L="--model llama-tiny --gbs 8 --json --steps 3 --lr-decay-iters 3"
expect_ok "llama-tiny on the byte file" timeout 60 "$MERAK" run $L --data "$D"
cp "$tmpdir/out" "$tmpdir/bytes.json"
expect_ok "llama-tiny on the uint16 file" timeout 60 "$MERAK" run $L --data "$tmpdir/t.u16"
check "uint16 file: bitwise the byte file's losses ($(losses_of "$tmpdir/out"))" \
  test -n "$(losses_of "$tmpdir/out")" -a "$(losses_of "$tmpdir/out")" = "$(losses_of "$tmpdir/bytes.json")"
check "uint16 file: format reported" grep -q '"data":".*t.u16"' "$tmpdir/out"
finish
