#!/bin/sh
# llama-tiny (GQA 4/2 heads, RoPE, RMSNorm, SwiGLU, untied head) on up to 8
# ranks gives the one-rank losses (3 steps, 1e-5 relative) and step-1
# gradients (per tensor, 1e-5) under the layouts, schedules, TP overlap and
# ZeRO-1 the GPT is held to (a tied Llama head is covered by tests/test_gpt's
# finite differences only); and with --kv-channels 24 under TP, PP and CP,
# Qwen2's q/k/v biases under TP and PP, a sliding window and documents
# (--reset-position-ids --reset-attention-mask) under DP, TP and PP, and
# DeepSeek's multi-head latent attention under DP, TP (with overlap), PP,
# zero-bubble and ZeRO-1.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
RUN_COMMON="$RUN_COMMON --model llama-tiny"
make_reference
equiv 2 2 2 --schedule merak --recompute full
equiv 1 2 2 --schedule 1f1b --recompute none
equiv 2 4 1 --schedule gpipe
equiv 1 4 2 --schedule zb-h1 --recompute full
equiv 2 2 2 --schedule interleaved --vpp 2 --recompute none
equiv 1 1 2 --tp-overlap 1
equiv 1 1 2 --tp-overlap 2 --mbs 2
equiv 2 1 2 --tp-overlap 2 --mbs 2 --recompute none
equiv 4 1 2 --zero 1
equiv 2 2 2 --zero 1 --schedule merak
# a head dim apart from hidden / heads (--kv-channels, Hugging Face's
# head_dim; issue 36): 4 heads of 24 on hidden 64, split over TP and CP
base=$RUN_COMMON
RUN_COMMON="$base --kv-channels 24"
make_reference
equiv 1 2 2 --recompute full
EQUIV_CP=2 equiv 1 1 1 --recompute none
# Qwen2's q/k/v biases (--add-qkv-bias): split over TP with their weights' rows
RUN_COMMON="$base --add-qkv-bias"
make_reference
equiv 1 2 2 --recompute full --tp-overlap 1
# Qwen3's q/k norms (--qk-layernorm): their weights every TP rank's, the gradients summed over TP
RUN_COMMON="$base --qk-layernorm"
make_reference
equiv 2 2 2 --recompute full --tp-overlap 2 --mbs 2
# Mistral's sliding window (Megatron's --window-size 15,0: 16 keys a query)
RUN_COMMON="$base --window-size 15,0"
make_reference
equiv 2 2 2 --recompute full --schedule zb-h1
# Megatron's --reset-position-ids / --reset-attention-mask on a Megatron dataset's documents
"${PYTHON:-python3}" "$top_srcdir/tests/megatron_write.py" "$tmpdir/docs" 3 400 5 40
RUN_COMMON="$base --data-path $tmpdir/docs --reset-position-ids --reset-attention-mask"
make_reference
equiv 2 2 2 --recompute full --tp-overlap 1
# the fused attention (issue 37: FlashAttention-2, lse kept) against the materialised one-rank reference
equiv 1 2 2 --recompute full --tp-overlap 1 --attention-backend fused
# multi-head latent attention (issue 36): the latents every TP rank's, their gradients made whole over TP
RUN_COMMON="$base --multi-latent-attention --q-lora-rank 32 --kv-lora-rank 16 --qk-head-dim 16 --qk-pos-emb-head-dim 8"
RUN_COMMON="$RUN_COMMON --v-head-dim 12"
make_reference
equiv 2 2 2 --recompute full --tp-overlap 2 --mbs 2
equiv 1 2 4 --schedule zb-h1 --recompute none
equiv 2 1 2 --zero 1 --tp-overlap 1
finish
