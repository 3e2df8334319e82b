#!/bin/sh
# Hugging Face config.json as --model (issue 36): the hub's published
# configs load verbatim with Hugging Face's parameter counts, as a file or
# a directory holding config.json, on every subcommand; unknown keys,
# missing keys and values merak cannot honour are exit 2 naming the key.
. "$top_srcdir/tests/lib.sh"
d="$tmpdir/hf"; mkdir -p "$d"
cfg() { mkdir -p "$d/$1"; cat >"$d/$1/config.json"; }
cfg gpt2 <<'EOF'
{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256,
 "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
 "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1,
 "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
 "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
 "vocab_size": 50257}
EOF
cfg llama-3-8b <<'EOF'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
 "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
 "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32,
 "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
 "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
 "use_cache": true, "vocab_size": 128256}
EOF
cfg llama-3.1-8b <<'EOF'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
 "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
 "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
 "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
 "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true,
 "vocab_size": 128256}
EOF
cfg llama-3.2-1b <<'EOF'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
 "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
 "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
 "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
 "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
 "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": true,
 "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}
EOF
cfg mistral-7b-v0.1 <<'EOF'
{"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
 "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
 "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000}
EOF
cfg mixtral-8x7b <<'EOF'
{"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
 "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
 "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
 "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
 "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0", "use_cache": true,
 "vocab_size": 32000}
EOF
cfg qwen2-7b <<'EOF'
{"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.37.2", "use_cache": true, "use_sliding_window": false, "vocab_size": 152064}
EOF
# a head dim apart from hidden / heads (5120 / 32 heads of 128: Megatron's --kv-channels)
cfg mistral-nemo-12b <<'EOF'
{"_name_or_path": "mistralai/Mistral-Nemo-Base-2407", "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0,
 "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
 "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 128000, "model_type": "mistral",
 "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
 "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
 "transformers_version": "4.43.3", "use_cache": true, "vocab_size": 131072}
EOF
# Qwen3: q_norm and k_norm (RMSNorm over each head's 128 dims: Megatron's --qk-layernorm), head_dim 128;
# Qwen3-MoE: 128 experts of 768, top 8 renormalised (norm_topk_prob), every block sparse
cfg qwen3-8b <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
 "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
 "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
 "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
 "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
 "vocab_size": 151936}
EOF
cfg qwen3-30b-a3b <<'EOF'
{"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
 "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
 "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
 "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
 "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
 "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
 "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
 "vocab_size": 151936}
EOF
# Qwen1.5-MoE-A2.7B (model_type qwen2_moe): qwen2's q/k/v biases, 60 experts of 1408 top-4 not renormalised, and
# a shared expert of 5632 scaled by sigmoid(shared_expert_gate . x): Megatron's --moe-shared-expert-gate
cfg qwen1.5-moe-a2.7b <<'EOF'
{"architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
 "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
 "max_position_embeddings": 8192, "max_window_layers": 21, "model_type": "qwen2_moe", "num_attention_heads": 16,
 "num_hidden_layers": 24, "num_key_value_heads": 16, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "sliding_window": 32768, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
 "transformers_version": "4.39.0.dev0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936,
 "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
 "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": false, "output_router_logits": false,
 "router_aux_loss_coef": 0.001}
EOF
# DeepSeek-V3 (model_type deepseek_v3): MLA, 256 experts of 2048 top-8 and a shared one, the first 3 blocks dense,
# noaux_tc's per-expert score bias; YaRN and the MTP layer (num_nextn_predict_layers, which transformers'
# DeepseekV3ForCausalLM does not build) change nothing here
cfg deepseek-v3 <<'EOF'
{"architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
 "AutoModel": "modeling_deepseek.DeepseekV3Model",
 "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"}, "aux_loss_alpha": 0.001, "bos_token_id": 0,
 "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
 "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
 "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8,
 "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 128,
 "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
 "pretraining_tp": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
 "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
 "weight_block_size": [128, 128]}, "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1,
 "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
 "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
 "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
 "transformers_version": "4.33.1", "use_cache": true, "v_head_dim": 128, "vocab_size": 129280}
EOF
# Hugging Face's own counts (model.num_parameters())
for c in gpt2:124439808 llama-3-8b:8030261248 llama-3.1-8b:8030261248 llama-3.2-1b:1235814400 \
         mistral-7b-v0.1:7241732096 mixtral-8x7b:46702792704 qwen2-7b:7615616512 mistral-nemo-12b:12247782400 \
         qwen3-8b:8190735360 qwen3-30b-a3b:30532122624 qwen1.5-moe-a2.7b:14315784192 \
         deepseek-v3:671026419200; do
  m=${c%%:*}; want=${c#*:}
  "$MERAK" model --model "$d/$m" --json >"$tmpdir/m.json" 2>"$tmpdir/err"
  got=$("$PYTHON" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["params"]))' "$tmpdir/m.json" 2>/dev/null)
  check "$m: $want parameters (got $got)" test "$got" = "$want"
done
# the file itself, as the directory; the name from the directory, the sequence torchtitan's 2048
"$MERAK" model --model "$d/llama-3-8b/config.json" >"$tmpdir/a" 2>&1
"$MERAK" model --model "$d/llama-3-8b" >"$tmpdir/b" 2>&1
check "config.json or its directory: the same model" cmp -s "$tmpdir/a" "$tmpdir/b"
check "named by its directory, seq min(max_position_embeddings, 2048)" grep -q "^model llama-3-8b: 32 blocks, hidden 4096, 32 heads, seq 2048, vocab 128256" "$tmpdir/a"
check "the architecture read" grep -q "8 KV heads (query groups), head dim 128, RMSNorm, SwiGLU MLP, rotary positions (theta 500000), eps 1e-05, untied head, no biases" "$tmpdir/a"
"$MERAK" model --model "$d/gpt2" >"$tmpdir/g" 2>&1
check "gpt2: GPT's architecture, seq 1024" sh -c "grep -q '^model gpt2: 12 blocks, hidden 768, 12 heads, seq 1024, vocab 50257' '$tmpdir/g'"
# every subcommand; --seq-length changes the sequence, nothing else changes a config
expect_ok "sim of an HF config" "$MERAK" sim --model "$d/mixtral-8x7b" --cluster dgx-h100 --dp 8 --ep 8 --pp 2 --tp 4 --gbs 64 --seq-length 4096
expect_ok "plan of an HF config, saved" "$MERAK" plan --model "$d/llama-3.1-8b" --cluster dgx-h100 --gpus 16 --gbs 64 --top 1 --save-plan "$tmpdir/p.json"
check "the plan file keeps the rope scaling" "$PYTHON" -c '
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert m["rope_scaling_factor"] == 8 and m["rope_scaling_original_max_position_embeddings"] == 8192, m' "$tmpdir/p.json"
expect_ok "the plan replays" "$MERAK" sim --plan "$tmpdir/p.json"
# a llama-like config is the Llama family (no dropout ops), so torchtitan's llama3 flavor exports it
"$MERAK" plan --model "$d/llama-3-8b" --cluster dgx-h100 --gpus 16 --gbs 64 --export torchtitan >"$tmpdir/tt.toml" 2>/dev/null
check "llama-3-8b's config exports as torchtitan's llama3 8B" grep -q '^flavor = "8B"' "$tmpdir/tt.toml"
# Megatron's --use-rope-scaling is Llama 3.1's (factor 8, low 1, high 4, original 8192): the same model as the config
"$MERAK" model --model "$d/llama-3.1-8b" --json >"$tmpdir/r1.json" 2>&1
"$MERAK" model --model llama-3-8b --use-rope-scaling --seq-length 2048 --json >"$tmpdir/r2.json" 2>&1
check "--use-rope-scaling gives llama-3.1-8b's config" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
del a["name"], b["name"]
assert a == b and a["rope_scaling_factor"] == 8, [(k, a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)]' \
  "$tmpdir/r1.json" "$tmpdir/r2.json"
# mistral's window: the fused attention does the window's share of the causal work, so at 16K tokens
# (window 4096) a step is shorter than the same model's without it, by less than its attention's time
W="--cluster dgx-h100 --dp 2 --pp 2 --tp 2 --gbs 32 --seq-length 16384 --json"
"$MERAK" sim --model "$d/mistral-7b-v0.1" $W >"$tmpdir/w1.json" 2>&1
"$PYTHON" -c "import json; c = json.load(open('$d/mistral-7b-v0.1/config.json')); del c['sliding_window']; json.dump(c, open('$tmpdir/nowin.json', 'w'))"
mkdir -p "$d/mistral-nowindow" && cp "$tmpdir/nowin.json" "$d/mistral-nowindow/config.json"
"$MERAK" sim --model "$d/mistral-nowindow" $W >"$tmpdir/w0.json" 2>&1
expect_fail "--window-size cannot change an HF config" "model flags cannot change a Hugging Face config" -- \
  "$MERAK" sim --model "$d/mistral-nowindow" --window-size 4095,0
"$MERAK" sim --model llama-3-8b --vocab-size 32000 $W >"$tmpdir/l0.json" 2>&1
"$MERAK" sim --model llama-3-8b --vocab-size 32000 --window-size 4095,0 $W >"$tmpdir/l1.json" 2>&1
check "a 4096-token window at 16K tokens: a shorter step, as --window-size 4095,0 gives a preset" "$PYTHON" -c '
import json, sys
w1, w0, l0, l1 = (json.load(open(f))["step_time_s"] for f in sys.argv[1:5])
assert w1 < 0.85 * w0 and l1 < 0.85 * l0, (w1, w0, l1, l0)' "$tmpdir/w1.json" "$tmpdir/w0.json" "$tmpdir/l0.json" "$tmpdir/l1.json"
expect_ok "mistral's window at the sequence: no change" "$MERAK" sim --model "$d/mistral-7b-v0.1" --seq-length 4096 --pp 2
expect_fail "a window under context parallelism" "cp 2 with a sliding attention window of 4096" -- \
  "$MERAK" sim --model "$d/mistral-7b-v0.1" --seq-length 8192 --cp 2
expect_fail "--window-size with RIGHT keys" "RIGHT must be 0" -- "$MERAK" sim --model llama-tiny --window-size 15,15
expect_fail "size flags" "model flags cannot change a Hugging Face config" -- "$MERAK" sim --model "$d/gpt2" --num-layers 6
# head_dim is Megatron's --kv-channels: the config and the flags give one model
"$MERAK" model --model "$d/mistral-nemo-12b" >"$tmpdir/n" 2>&1
check "mistral-nemo: head dim 128 on hidden 5120" grep -q "8 KV heads (query groups), head dim 128," "$tmpdir/n"
"$MERAK" model --model "$d/mistral-nemo-12b" --seq-length 4096 --json >"$tmpdir/n1.json" 2>&1
"$MERAK" model --model llama-3-8b --num-layers 40 --hidden-size 5120 --ffn-hidden-size 14336 --vocab-size 131072 \
  --kv-channels 128 --rotary-base 1000000 --seq-length 4096 --json >"$tmpdir/n2.json" 2>&1
check "--kv-channels 128 gives the config's parameters and FLOPs" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["params"] == b["params"] == 12247782400 and a["flops_per_iteration"] == b["flops_per_iteration"], (a, b)' \
  "$tmpdir/n1.json" "$tmpdir/n2.json"
expect_fail "--kv-channels on a GPT's executor" "kv-channels with GPT blocks is for merak sim and merak plan" -- \
  "$MERAK" run --model gpt-tiny --kv-channels 8 --steps 1
expect_ok "--kv-channels equal to hidden / heads is the plain model" "$MERAK" model --model llama-tiny --kv-channels 16
# qwen3: the q/k norms are Megatron's --qk-layernorm (2 x 128 weights a block), the experts top-8 of 128
"$MERAK" model --model "$d/qwen3-30b-a3b" >"$tmpdir/q3" 2>&1
check "qwen3-moe: q/k norm, 128 experts of 768, top-8 renormalised" sh -c "grep -q 'no biases, q/k norm' '$tmpdir/q3' &&
  grep -q 'experts: 128 of width 768, top-8 (top-k renormalised)' '$tmpdir/q3'"
"$MERAK" model --model "$d/qwen3-30b-a3b" --json >"$tmpdir/q3.json" 2>&1
check "qwen3-moe: 3,353,032,704 active parameters" "$PYTHON" -c '
import json, sys; assert int(json.load(open(sys.argv[1]))["active_params"]) == 3353032704' "$tmpdir/q3.json"
for f in "" --qk-layernorm; do
  "$MERAK" model --model llama-tiny $f --json | "$PYTHON" -c 'import json,sys; print(int(json.load(sys.stdin)["params"]))' >>"$tmpdir/qk"
done
check "--qk-layernorm adds a q and a k weight of the head dim per block (4 x 2 x 16)" "$PYTHON" -c '
import sys; a, b = map(int, open(sys.argv[1]).read().split()); assert b - a == 4 * 2 * 16, (a, b)' "$tmpdir/qk"
expect_ok "sim of qwen3-moe with EP and TP" "$MERAK" sim --model "$d/qwen3-30b-a3b" --cluster dgx-h100 --dp 4 --ep 4 --tp 2 --pp 2 --gbs 64 --seq-length 4096
expect_fail "merak run trains Qwen3 and Qwen3-MoE (tests/llama-numpy.sh), not q/k norms with shared experts" \
  "qk-layernorm with shared experts, sparse blocks apart, q/k/v biases or LayerNorm is for merak sim" -- \
  "$MERAK" run --model moe-tiny --qk-layernorm --moe-shared-expert-intermediate-size 64 --steps 1
"$MERAK" model --model "$d/qwen1.5-moe-a2.7b" >"$tmpdir/q2" 2>&1
check "qwen2-moe: biases on QKV, 60 experts top-4 not renormalised, a gated shared expert" sh -c "
  grep -q 'biases on QKV only' '$tmpdir/q2' &&
  grep -q 'experts: 60 of width 1408, top-4 (softmax then top-k, not renormalised), shared expert 5632 (sigmoid-gated)' '$tmpdir/q2'"
M="--model mixtral-8x7b --moe-shared-expert-intermediate-size 4096"
for f in "" --moe-shared-expert-gate; do
  "$MERAK" model $M $f --json | "$PYTHON" -c 'import json,sys; print(int(json.load(sys.stdin)["params"]))' >>"$tmpdir/sg"
done
check "--moe-shared-expert-gate adds an h-wide gate per MoE block (32 x 4096)" "$PYTHON" -c '
import sys; a, b = map(int, open(sys.argv[1]).read().split()); assert b - a == 32 * 4096, (a, b)' "$tmpdir/sg"
expect_fail "a shared expert gate without a shared expert" "moe-shared-expert-gate needs a shared expert" -- \
  "$MERAK" model --model mixtral-8x7b --moe-shared-expert-gate
expect_fail "merak run: the shared expert gate is Qwen2-MoE's" "moe-shared-expert-gate trains in Qwen2-MoE's blocks" -- \
  "$MERAK" run --model llama-tiny --num-experts 4 --moe-shared-expert-intermediate-size 64 --moe-shared-expert-gate --steps 1
expect_ok "merak run trains it with --add-qkv-bias" "$MERAK" run --model llama-tiny --num-experts 4 \
  --moe-shared-expert-intermediate-size 64 --moe-shared-expert-gate --add-qkv-bias --steps 1
"$MERAK" model --model "$d/deepseek-v3" --json >"$tmpdir/ds.json" 2>&1
"$MERAK" model --model deepseek-v3 --seq-length 2048 --json >"$tmpdir/ds2.json" 2>&1
check "deepseek-v3: 37,552,297,472 active parameters; the preset is the config's model" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert int(a["active_params"]) == 37552297472 and a["params"] == b["params"] and a["layers"] == b["layers"], (a["params"], b["params"])' \
  "$tmpdir/ds.json" "$tmpdir/ds2.json"
"$MERAK" model --model "$d/deepseek-v3" >"$tmpdir/ds.txt" 2>&1
check "deepseek-v3: its MLA read" grep -q "multi-latent attention: q latent 1536, kv latent 512, q/k head 128 + 64 rotary, v head 128" "$tmpdir/ds.txt"
expect_ok "sim of deepseek-v3 (EP 16, PP 8, TP 2, SP)" "$MERAK" sim --model "$d/deepseek-v3" --cluster dgx-h100 --dp 16 --ep 16 \
  --pp 8 --tp 2 --gbs 256 --sequence-parallel --dtype fp8
"$MERAK" model --model deepseek-v3 --mtp-num-layers 1 --json >"$tmpdir/ds3.json" 2>&1
check "deepseek-v3 with its MTP depth (--mtp-num-layers 1): 682,636,487,424 parameters" "$PYTHON" -c '
import json, sys; assert int(json.load(open(sys.argv[1]))["params"]) == 682636487424' "$tmpdir/ds3.json"
expect_fail "merak run refuses DeepSeek-V3's multi-token prediction" "multi-token prediction .* is for merak sim" -- \
  "$MERAK" run --model deepseek-tiny --mtp-num-layers 1 --steps 1
mkdir -p "$d/ds-yarn" "$d/ds-v2"
"$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); json.dump(c, open(sys.argv[2] + "/config.json", "w"))
del c["rope_scaling"]; c.update(scoring_func="softmax", topk_method="group_limited_greedy")
json.dump(c, open(sys.argv[3] + "/config.json", "w"))' "$d/deepseek-v3/config.json" "$d/ds-yarn" "$d/ds-v2"
expect_fail "merak run refuses DeepSeek-V3's YaRN" "YaRN rope_scaling .DeepSeek's. is for merak sim" -- \
  "$MERAK" run --model "$d/ds-yarn" --steps 1
expect_fail "merak run refuses DeepSeek-V2's softmax groups" "with softmax scores .DeepSeek-V2's. are for merak sim" -- \
  "$MERAK" run --model "$d/ds-v2" --steps 1
ds_bad() { # name, pattern, python edit of the deepseek-v3 config
  mkdir -p "$d/bad-$1"
  "$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); $3; json.dump(c, open(sys.argv[2], 'w'))" \
    "$d/deepseek-v3/config.json" "$d/bad-$1/config.json"
  expect_fail "$1" "$2" -- "$MERAK" model --model "$d/bad-$1"
}
ds_bad q-lora-null "q_lora_rank null .* is not modelled" "c['q_lora_rank'] = None"
ds_bad topk-method "topk_method sinkhorn is not supported" "c['topk_method'] = 'sinkhorn'"
ds_bad rope-type "rope_scaling: type llama3 is not supported" "c['rope_scaling']['type'] = 'llama3'"
ds_bad kv-groups "num_key_value_heads other than num_attention_heads: MLA has no K/V groups" "c['num_key_value_heads'] = 8"
expect_fail "MLA flags without --multi-latent-attention" "need --multi-latent-attention" -- \
  "$MERAK" model --model llama-tiny --kv-lora-rank 16
expect_fail "MLA without a q latent (Megatron's default)" "without a q latent .* give --q-lora-rank" -- \
  "$MERAK" model --model llama-tiny --multi-latent-attention
qwen_bad() { # name, pattern, python edit of the qwen3-30b-a3b config
  mkdir -p "$d/bad-$1"
  "$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); $3; json.dump(c, open(sys.argv[2], 'w'))" \
    "$d/qwen3-30b-a3b/config.json" "$d/bad-$1/config.json"
  expect_fail "$1" "$2" -- "$MERAK" model --model "$d/bad-$1"
}
qwen_bad sparse-step "decoder_sparse_step 2" "c['decoder_sparse_step'] = 2"
qwen_bad dense-gaps "mlp_only_layers must be the first blocks" "c['mlp_only_layers'] = [1, 3]"
mkdir -p "$d/qwen3-dense2"
"$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); c['mlp_only_layers'] = [0, 1]; json.dump(c, open(sys.argv[2], 'w'))" \
  "$d/qwen3-30b-a3b/config.json" "$d/qwen3-dense2/config.json"
"$MERAK" model --model "$d/qwen3-dense2" --json >"$tmpdir/q3d.json" 2>&1
check "mlp_only_layers [0, 1]: two dense blocks of intermediate_size 6144 in place of two MoE ones" "$PYTHON" -c '
import json, sys
a, b = (int(json.load(open(f))["params"]) for f in sys.argv[1:3])
moe, dense = 2048 * 128 + 128 * 3 * 2048 * 768, 3 * 2048 * 6144
assert a - b == 2 * (moe - dense), (a, b)' "$tmpdir/q3.json" "$tmpdir/q3d.json"
# qwen2's q/k/v biases: Megatron's --add-qkv-bias (the executor trains them: tests/llama-numpy.sh)
"$MERAK" model --model "$d/qwen2-7b" >"$tmpdir/q" 2>&1
check "qwen2: biases on QKV only" grep -q "untied head, biases on QKV only" "$tmpdir/q"
# a model whose fp32 state cannot fit (14.3 G parameters x 16 bytes on a machine under 200 GB): refused before
# anything is allocated, one line, exit 2 (it was an allocation failure and MPI_Abort)
if [ "$(awk '/^MemTotal/ {print $2}' /proc/meminfo)" -lt 200000000 ]; then
  expect_fail "merak run refuses Qwen1.5-MoE-A2.7B on this machine before allocating it" \
    "the model.s 1.432e\+10 parameters need at least .* GiB on a rank" -- \
    "$MERAK" run --model "$d/qwen1.5-moe-a2.7b" --steps 1
fi
for f in "" --add-qkv-bias; do
  "$MERAK" model --model llama-tiny $f --json | "$PYTHON" -c 'import json,sys; print(int(json.load(sys.stdin)["params"]))' >>"$tmpdir/qb"
done
check "--add-qkv-bias adds the q/k/v widths per block (4 x (64 + 2 x 32))" "$PYTHON" -c '
import sys; a, b = map(int, open(sys.argv[1]).read().split()); assert b - a == 4 * (64 + 2 * 32), (a, b)' "$tmpdir/qb"
# refusals: one line naming the key
bad() { # name, pattern, python edit of the llama-3-8b config
  mkdir -p "$d/bad-$1"
  "$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); $3; json.dump(c, open(sys.argv[2], 'w'))" \
    "$d/llama-3-8b/config.json" "$d/bad-$1/config.json"
  expect_fail "$1" "$2" -- "$MERAK" model --model "$d/bad-$1"
}
bad unknown-key "unknown field 'rope_mode'" "c['rope_mode'] = 1"
bad missing-key "missing field 'hidden_size'" "del c['hidden_size']"
bad wrong-type "field 'num_hidden_layers' must be" "c['num_hidden_layers'] = 'many'"
bad deepseek "model_type 'deepseek_v4' is not supported" "c['model_type'] = 'deepseek_v4'"
bad qwen3-moe-experts "missing field 'num_experts'" "c['model_type'] = 'qwen3_moe'"
bad attention-bias "attention_bias true" "c['attention_bias'] = True"
bad head-dim "field 'head_dim' must be an integer >= 1" "c['head_dim'] = 0"
bad odd-head-dim "the head dim 97 is odd" "c['head_dim'] = 97"
bad activation "hidden_act gelu is not supported" "c['hidden_act'] = 'gelu'"
bad rope-type "rope_type dynamic is not supported" "c['rope_scaling'] = {'rope_type': 'dynamic', 'factor': 2.0}"
bad rope-key "rope_scaling: missing field 'low_freq_factor'" "c['rope_scaling'] = {'rope_type': 'llama3', 'factor': 8.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}"
bad heads "num_key_value_heads 5 does not divide" "c['num_key_value_heads'] = 5"
expect_fail "not JSON" "malformed JSON" -- sh -c "mkdir -p '$d/x' && echo '{' >'$d/x/config.json' && '$MERAK' model --model '$d/x'"
# a tiny Llama written as a Hugging Face config trains as the same flags do
cfg tiny <<'EOF'
{"model_type": "llama", "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64, "rms_norm_eps": 1e-05,
 "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu"}
EOF
"$MERAK" run --model "$d/tiny" --gbs 4 --steps 2 --json >"$tmpdir/h.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
"$MERAK" run --model llama-tiny --num-layers 2 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 \
  --group-query-attention --ffn-hidden-size 176 --vocab-size 256 --seq-length 64 --gbs 4 --steps 2 --json >"$tmpdir/f.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
check "the HF tiny llama trains as its flags do (the same losses)" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(f))["losses"] for f in sys.argv[1:3])
assert a == b and len(a) == 2, (a, b)' "$tmpdir/h.json" "$tmpdir/f.json"
finish
