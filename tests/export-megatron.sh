#!/bin/sh
# --export megatron (issue 36): a plan as Megatron-LM's launch command,
# stdout holding only `torchrun ... pretrain_gpt.py ARGS`; the round trip
# `merak sim --gpus N ARGS` accepts every token and predicts the same
# step; what Megatron-LM cannot run is exit 2 naming it.
. "$top_srcdir/tests/lib.sh"
step() { "$PYTHON" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["step_time_s"]))' "$1"; }
# roundtrip NAME CLUSTER GPUS SIM-ARGS...: export, rerun the export's own args, compare the steps
roundtrip() {
  name=$1; cl=$2; n=$3; shift 3
  "$MERAK" sim --cluster $cl "$@" --json >"$tmpdir/a.json" 2>/dev/null
  "$MERAK" sim --cluster $cl "$@" --export megatron >"$tmpdir/cmd" 2>"$tmpdir/err"
  check "$name: one torchrun command on stdout" sh -c "[ \$(wc -l <'$tmpdir/cmd') -eq 1 ] &&
    grep -q '^torchrun --nnodes [0-9]* --nproc-per-node [0-9]* pretrain_gpt.py --tensor-model-parallel-size' '$tmpdir/cmd' &&
    grep -q 'note: Megatron-LM' '$tmpdir/err'"
  args=$(sed 's/.*pretrain_gpt\.py//' "$tmpdir/cmd")
  eval "\"\$MERAK\" sim --cluster $cl --gpus $n $args --json" >"$tmpdir/b.json" 2>"$tmpdir/err2"
  check "$name: merak sim --gpus $n of the export predicts the same step" test "$(step "$tmpdir/a.json")" = "$(step "$tmpdir/b.json")"
}
roundtrip "gpt interleaved, full recompute" dgx-a100 24 --model gpt-2.5b --dp 2 --pp 3 --tp 4 --gbs 48 \
  --schedule interleaved --vpp 2 --recompute full
roundtrip "llama GQA, SP, distributed optimizer, cp 2, no recompute" dgx-h100 32 --model llama-3-8b --dp 4 --cp 2 \
  --pp 2 --tp 2 --gbs 64 --sequence-parallel --zero 1 --recompute none
roundtrip "SP with Transformer Engine's TP communication overlap" dgx-h100 32 --model llama-3-8b --dp 4 --pp 2 \
  --tp 4 --gbs 64 --sequence-parallel --tp-comm-overlap --zero 1 --recompute selective
check "--tp-comm-overlap exported" grep -q -- "--sequence-parallel --tp-comm-overlap " "$tmpdir/cmd"
roundtrip "mixtral, ep 4, selective" dgx-h100 32 --model mixtral-8x7b --dp 4 --ep 4 --pp 2 --tp 4 --gbs 64 \
  --seq-length 4096 --sequence-parallel --recompute selective
# merak's experts are whole on each rank (expert tensor parallelism 1), Megatron-LM's default is tp: said
check "--expert-tensor-parallel-size 1 exported with tp > 1" grep -q -- "--expert-model-parallel-size 4 --expert-tensor-parallel-size 1 " "$tmpdir/cmd"
check "the all-to-all dispatcher exported (Megatron-LM's default is allgather)" grep -q -- "--moe-token-dispatcher-type alltoall" "$tmpdir/cmd"
roundtrip "mixtral, DeepEP (the flex dispatcher)" dgx-h100 32 --model mixtral-8x7b --dp 4 --ep 8 --pp 2 --tp 4 --gbs 64 \
  --seq-length 4096 --sequence-parallel --recompute selective --moe-enable-deepep
check "DeepEP exported" grep -q -- "--moe-token-dispatcher-type flex --moe-enable-deepep" "$tmpdir/cmd"
roundtrip "mixtral, the merged 1F1B steps (--overlap-moe-expert-parallel-comm)" dgx-h100 32 --model mixtral-8x7b \
  --dp 4 --ep 8 --pp 2 --tp 4 --gbs 64 --seq-length 4096 --sequence-parallel --recompute selective \
  --schedule interleaved --vpp 2 --overlap-moe-expert-parallel-comm
check "the EP all-to-all overlap exported as the Model Zoo's A2A_OVERLAP runs it" grep -q -- \
  "--overlap-moe-expert-parallel-comm --delay-wgrad-compute" "$tmpdir/cmd"
roundtrip "mixtral, ep 8 folding tp 4 x dp 4 (MoE parallel folding)" dgx-h100 32 --model mixtral-8x7b --dp 4 --ep 8 \
  --pp 2 --tp 4 --gbs 64 --seq-length 4096 --sequence-parallel --recompute selective
roundtrip "a head dim apart from hidden / heads (--kv-channels)" dgx-h100 16 --model llama-3-8b --kv-channels 96 \
  --dp 2 --pp 2 --tp 4 --gbs 32
check "--kv-channels exported" grep -q -- "--kv-channels 96 " "$tmpdir/cmd"
roundtrip "q/k norms (--qk-layernorm), experts in the first blocks dense" dgx-h100 32 --model llama-3-8b --qk-layernorm \
  --num-experts 16 --moe-router-topk 4 --moe-ffn-hidden-size 2048 --moe-layer-freq '([0]*2+[1]*30)' \
  --moe-shared-expert-intermediate-size 4096 --moe-shared-expert-gate \
  --dp 4 --ep 4 --pp 2 --tp 4 --gbs 64 --sequence-parallel
check "--qk-layernorm and --moe-shared-expert-gate exported" sh -c "grep -q -- '--qk-layernorm ' '$tmpdir/cmd' &&
  grep -q -- '--moe-shared-expert-gate' '$tmpdir/cmd'"
roundtrip "Llama 3.1's RoPE scaling (--use-rope-scaling)" dgx-h100 16 --model llama-3-8b --use-rope-scaling \
  --rope-scaling-factor 8 --dp 4 --pp 2 --tp 2 --gbs 32
check "--use-rope-scaling exported" grep -q -- "--use-rope-scaling --rope-scaling-factor 8 " "$tmpdir/cmd"
roundtrip "DeepSeek-V3: MLA, the expert bias, dense first blocks, MTP" dgx-h100 256 --model deepseek-v3 --mtp-num-layers 1 \
  --dp 16 --ep 16 --pp 8 --tp 2 --gbs 256 --sequence-parallel --recompute full
check "MLA exported" grep -q -- "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 .*--moe-router-enable-expert-bias --moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.5 --moe-router-num-groups 8 --moe-router-group-topk 4 --mtp-num-layers 1 " "$tmpdir/cmd"
roundtrip "a sliding window (--window-size)" dgx-h100 16 --model llama-3-8b --window-size 4095,0 --seq-length 16384 \
  --dp 2 --pp 2 --tp 4 --gbs 16
check "--window-size exported" grep -q -- "--window-size 4095,0 " "$tmpdir/cmd"
roundtrip "uneven first and last stages, fp16" dgx-a100 16 --model gpt-20b --dp 1 --pp 4 --tp 4 --gbs 16 \
  --decoder-first-pipeline-num-layers 10 --decoder-last-pipeline-num-layers 10 --dtype fp16
# merak plan: the best plan in Megatron-LM's space, exported; its step is the round trip's
"$MERAK" plan --model llama-3-8b --cluster dgx-h100 --gpus 16 --gbs 64 --export megatron >"$tmpdir/cmd" 2>"$tmpdir/err"
want=$(sed -n 's/.*step \([0-9.e+-]*\) s,.*/\1/p' "$tmpdir/err")
args=$(sed 's/.*pretrain_gpt\.py//' "$tmpdir/cmd")
eval "\"\$MERAK\" sim --cluster dgx-h100 --gpus 16 $args --json" >"$tmpdir/b.json" 2>/dev/null
check "plan --export: only the command on stdout, its step (${want:-none}) is the round trip's" "$PYTHON" -c '
import json, sys
got = json.load(open(sys.argv[2]))["step_time_s"]
assert float(sys.argv[1]) == float("%.9g" % got), (sys.argv[1], got)' "$want" "$tmpdir/b.json"
check "plan --export: nothing else on stdout" sh -c "[ \$(wc -l <'$tmpdir/cmd') -eq 1 ]"
# what Megatron-LM cannot run
S="--model gpt-tiny --cluster dgx-a100 --pp 2 --gbs 8"
expect_fail "a zero-bubble schedule" "cannot run this plan: a schedule other than 1f1b and interleaved" -- \
  "$MERAK" sim $S --schedule zb-v --export megatron
expect_fail "ZeRO-3" "ZeRO-2/3 or a hybrid shard" -- "$MERAK" sim $S --dp 2 --zero 3 --export megatron
expect_fail "stage-aware recompute" "per-stage recompute counts" -- "$MERAK" sim $S --recompute stage-aware:0.5 --export megatron
expect_fail "sub-pipelined TP" "sub-pipelined TP" -- "$MERAK" sim $S --tp 2 --tp-overlap 1 --export megatron
expect_fail "fp32" "fp32 training" -- "$MERAK" sim $S --dtype fp32 --export megatron
expect_fail "MoE with TP, no SP" "MoE with TP but without --sequence-parallel" -- "$MERAK" sim --model moe-tiny \
  --cluster dgx-h100 --tp 2 --gbs 8 --dtype bf16 --export megatron
expect_fail "an unknown target" "megatron, torchtitan or deepspeed" -- "$MERAK" sim $S --export nemo
# DeepSpeed: ds_config.json on stdout (train_batch_size = micro x accumulation x dp), Megatron-DeepSpeed's args on stderr
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 4 --pp 2 --tp 2 --gbs 64 --mbs 2 --zero 1 --export deepspeed >"$tmpdir/ds.json" 2>"$tmpdir/err"
check "deepspeed: the ds_config says the plan" "$PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert c == {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8,
             "zero_optimization": {"stage": 1}, "bf16": {"enabled": True},
             "data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32",
             "pipeline": {"pipe_partitioned": False, "grad_partitioned": False}}, c' "$tmpdir/ds.json"
# fp16 keeps fp16 gradients (DeepSpeed's and Megatron-LM's default) unless asked for fp32 ones
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 4 --pp 2 --tp 2 --gbs 64 --mbs 2 --dtype fp16 --export deepspeed >"$tmpdir/ds16.json" 2>/dev/null
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 4 --pp 2 --tp 2 --gbs 64 --mbs 2 --dtype fp16 \
  --accumulate-allreduce-grads-in-fp32 --export deepspeed >"$tmpdir/ds16a.json" 2>/dev/null
check "deepspeed: fp16's gradients fp16, fp32 with --accumulate-allreduce-grads-in-fp32" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert "data_types" not in a and a["fp16"] == {"enabled": True}, a
assert b["data_types"] == {"grad_accum_dtype": "fp32"} and b["communication_data_type"] == "fp32", b' "$tmpdir/ds16.json" "$tmpdir/ds16a.json"
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 4 --gbs 64 --mbs 2 --dtype fp16 --accumulate-allreduce-grads-in-fp32 \
  --export megatron >"$tmpdir/m16.txt" 2>/dev/null
check "megatron: --fp16 --accumulate-allreduce-grads-in-fp32 kept" grep -q -- "--fp16 --accumulate-allreduce-grads-in-fp32" "$tmpdir/m16.txt"
check "deepspeed: Megatron-DeepSpeed's TP/PP arguments on stderr" grep -q "tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --checkpoint-activations .* --deepspeed --deepspeed_config ds_config.json" "$tmpdir/err"
# scatter-gathered sends (--scatter-gather-tensors-in-pipeline) are DeepSpeed's default; Megatron-Core cannot
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 4 --pp 2 --tp 2 --gbs 64 --mbs 2 --zero 1 \
  --scatter-gather-tensors-in-pipeline --export deepspeed >"$tmpdir/dssg.json" 2>/dev/null
check "deepspeed: scatter-gathered sends are its pipe_partitioned default" "$PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1])); assert "pipeline" not in c and c["train_batch_size"] == 64, c' "$tmpdir/dssg.json"
expect_fail "megatron: scatter-gathered sends" "pipeline sends scatter-gathered over TP" -- "$MERAK" sim --model gpt-2.5b \
  --cluster dgx-a100 --pp 2 --tp 2 --gbs 8 --scatter-gather-tensors-in-pipeline --export megatron
expect_fail "plan --export megatron refuses --scatter-gather-tensors-in-pipeline" "export megatron sends whole tensors" -- \
  "$MERAK" plan --model gpt-tiny --gpus 4 --gbs 8 --scatter-gather-tensors-in-pipeline --export megatron
expect_fail "deepspeed: interleaved" "a pipeline schedule other than 1f1b" -- "$MERAK" sim $S --schedule interleaved --vpp 2 --export deepspeed
expect_fail "deepspeed: ZeRO-3 with PP" "ZeRO-2/3 with pipeline parallelism" -- "$MERAK" sim $S --dp 2 --zero 3 --export deepspeed
# ZeRO-3 without prefetch: DeepSpeed's stage3_prefetch_bucket_size 0; FSDP2 always prefetches
"$MERAK" sim --model gpt-2.5b --cluster dgx-a100 --dp 8 --gbs 64 --mbs 2 --zero 3 --no-zero3-prefetch --export deepspeed \
  >"$tmpdir/ds3.json" 2>/dev/null
check "deepspeed: --no-zero3-prefetch is stage3_prefetch_bucket_size 0" "$PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert c["zero_optimization"] == {"stage": 3, "stage3_prefetch_bucket_size": 0}, c' "$tmpdir/ds3.json"
expect_fail "torchtitan: no prefetch" "FSDP without prefetching" -- "$MERAK" sim --model llama-3-8b --cluster dgx-h100 \
  --dp 8 --zero 3 --gbs 64 --no-zero3-prefetch --export torchtitan
"$MERAK" plan --model gpt-2.5b --cluster dgx-a100 --gpus 32 --gbs 128 --export deepspeed >"$tmpdir/ds2.json" 2>"$tmpdir/err"
check "plan --export deepspeed: a ds_config of the best plan it runs" "$PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert c["train_batch_size"] == 128 and c["zero_optimization"]["stage"] in (0, 1, 2, 3), c' "$tmpdir/ds2.json"
# torchtitan v0.2.2's job TOML: a llama3 flavor, FSDP (ZeRO-3) over dp, a
# zero-bubble schedule by its name, micro-batches as local_batch_size
"$MERAK" sim --model llama-3-8b --cluster dgx-h100 --dp 4 --zero 3 --pp 2 --tp 2 --sequence-parallel --schedule zb-v \
  --gbs 64 --recompute full --export torchtitan >"$tmpdir/t.toml" 2>"$tmpdir/err"
check "torchtitan: the TOML says the plan" "$PYTHON" -c '
import sys
try:
    import tomllib
except ImportError:
    sys.exit(0)  # Python < 3.11: no TOML reader to check with
t = tomllib.load(open(sys.argv[1], "rb"))
assert t["model"] == {"name": "llama3", "flavor": "8B"}, t["model"]
assert t["training"] == {"local_batch_size": 16, "global_batch_size": 64, "seq_len": 8192,
                         "mixed_precision_param": "bfloat16", "mixed_precision_reduce": "float32",
                         "compile": True}, t["training"]
p = t["parallelism"]
assert (p["data_parallel_replicate_degree"], p["data_parallel_shard_degree"], p["tensor_parallel_degree"],
        p["pipeline_parallel_degree"]) == (1, 4, 2, 2), p
assert p["pipeline_parallel_schedule"] == "ZBVZeroBubble" and p["pipeline_parallel_layers_per_stage"] == 8, p
assert t["activation_checkpoint"] == {"mode": "full"}, t["activation_checkpoint"]' "$tmpdir/t.toml"
check "torchtitan: its note on stderr" grep -q "note: torchtitan v0.2.2" "$tmpdir/err"
# eager element-wise kernels: torchtitan without torch.compile; Megatron and DeepSpeed run fused ones
"$MERAK" sim --model llama-3-8b --cluster dgx-h100 --dp 8 --gbs 64 --zero 3 --elementwise eager --export torchtitan \
  >"$tmpdir/te.toml" 2>/dev/null
check "torchtitan: an eager plan runs without torch.compile" grep -q "^compile = false$" "$tmpdir/te.toml"
expect_fail "megatron: eager element-wise kernels" "eager element-wise kernels" -- "$MERAK" sim --model llama-3-8b \
  --cluster dgx-h100 --dp 8 --gbs 64 --elementwise eager --export megatron
expect_fail "deepspeed: eager element-wise kernels" "eager element-wise kernels" -- "$MERAK" sim --model llama-3-8b \
  --cluster dgx-h100 --dp 8 --gbs 64 --elementwise eager --export deepspeed
"$MERAK" sim --model llama-3-8b --cluster dgx-h100 --dp 8 --gbs 64 --recompute selective-op --export torchtitan >"$tmpdir/t2.toml" 2>/dev/null
check "torchtitan: DDP as replicate, op-level selective recompute" sh -c "grep -q '^data_parallel_replicate_degree = 8' '$tmpdir/t2.toml' &&
  grep -q '^data_parallel_shard_degree = 1' '$tmpdir/t2.toml' && grep -q '^selective_ac_option = \"op\"' '$tmpdir/t2.toml'"
"$MERAK" plan --model llama-3-8b --cluster dgx-h100 --gpus 64 --gbs 256 --export torchtitan >"$tmpdir/t3.toml" 2>"$tmpdir/err"
check "plan --export torchtitan: the best plan it runs, FSDP (HSDP over the nodes)" "$PYTHON" -c '
import sys
try:
    import tomllib
except ImportError:
    sys.exit(0)
t = tomllib.load(open(sys.argv[1], "rb"))
p = t["parallelism"]
assert t["model"]["flavor"] == "8B" and p["data_parallel_shard_degree"] > 1, t
assert p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"] * p["tensor_parallel_degree"] * \
    p["pipeline_parallel_degree"] * p["context_parallel_degree"] == 64, p' "$tmpdir/t3.toml"
check "plan --export torchtitan: says which plan on stderr" grep -q "the best plan torchtitan runs" "$tmpdir/err"
expect_fail "torchtitan: not a llama3 flavor" "its llama3 flavors" -- "$MERAK" sim $S --export torchtitan
expect_fail "torchtitan: merak's schedule" "cannot run this plan: this schedule" -- "$MERAK" sim --model llama-3-8b \
  --cluster dgx-h100 --pp 2 --gbs 16 --schedule merak --export torchtitan
expect_fail "torchtitan: ZeRO-1" "ZeRO-1/2" -- "$MERAK" sim --model llama-3-8b --cluster dgx-h100 --dp 2 --zero 1 \
  --gbs 16 --export torchtitan
expect_fail "--gpus that does not divide" "--gpus 6 is not a multiple of tp x pp x cp = 4" -- \
  "$MERAK" sim --model gpt-tiny --pp 2 --tp 2 --gpus 6
finish
