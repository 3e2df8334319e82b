/* A plan as the launch command of another engine (issue 36): Megatron-LM's
 * pretrain_gpt.py under torchrun, torchtitan's job TOML, or DeepSpeed's
 * ds_config.json with Megatron-DeepSpeed's arguments.  The arguments are Megatron-Core's as of
 * core_r0.13 (megatron/training/arguments.py): the parallel degrees, the
 * virtual pipeline, uneven first/last stages, sequence parallelism, the
 * distributed optimizer, recomputation, the batch, the precision, the
 * attention backend and the model's shape and architecture.  What
 * Megatron-LM cannot express (another schedule, ZeRO-2/3 or a hybrid
 * shard, per-stage recompute counts, sub-pipelined TP, a partition other
 * than the uniform one, RoPE scaling, a custom graph) is refused, naming
 * it.  The data, tokenizer, optimizer and training-length arguments are
 * the user's: the command carries none. */
#include "config.h"
#include "merak/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t n, k;
} mk_argbuf_t;

static void put(mk_argbuf_t *b, const char *fmt, ...)
{
    if (b->k >= b->n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->buf + b->k, b->n - b->k, fmt, ap);
    va_end(ap);
    b->k = w < 0 ? b->n : b->k + (size_t)w;
}

/* What Megatron-LM runs differently from the plan, or NULL. */
static const char *megatron_cannot(const mk_plan_t *p)
{
    const mk_model_config_t *m = &p->model;
    if (m->family != MK_FAMILY_GPT && m->family != MK_FAMILY_LLAMA) return "a model other than GPT or Llama";
    if (p->schedule != MK_SCHED_1F1B && p->schedule != MK_SCHED_INTERLEAVED)
        return "a schedule other than 1f1b and interleaved";
    if (p->vpp > 1 && (m->num_layers % (p->pp * p->vpp) || p->first_stage_layers || p->last_stage_layers))
        return "virtual stages of unequal blocks";
    if (p->zero > 1 || (p->zero == 1 && p->zero_shard)) return "ZeRO-2/3 or a hybrid shard (its distributed "
                                                               "optimizer is ZeRO-1 over the DP group)";
    if (p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_FULL &&
        p->recompute.kind != MK_RECOMPUTE_SELECTIVE)
        return "per-stage recompute counts (it takes none, full or selective)";
    if (p->tp_overlap > 0) return "sub-pipelined TP (--tp-overlap)";
    if (strcmp(p->partition, "uniform")) return "a partition other than uniform";
    if (m->rope_factor && (m->rope_low_freq != 1 || m->rope_high_freq != 4 || m->rope_orig_max_pos != 8192))
        return "RoPE scaling other than Llama 3.1's low 1, high 4 and original context 8192 (Megatron-Core fixes them)";
    if (p->optimizer_offload || p->cpu_offload_layers || p->cross_entropy == MK_XENT_TORCH ||
        p->reshard != MK_RESHARD_ALWAYS)
        return "an offload, torch cross entropy or FSDP resharding";
    if (p->eager) return "eager element-wise kernels (it runs fused ones)";
    if (mk_model_is_moe(m) && p->tp > 1 && !p->seqpar) /* megatron/training/arguments.py asserts it */
        return "MoE with TP but without --sequence-parallel (Megatron-LM requires sequence parallelism there)";
    if (p->dtype != MK_DTYPE_FP16 && mk_plan_grad_dtype(p) != MK_DTYPE_FP32)
        return "16-bit gradients of a bf16 plan (Megatron-LM reduces them in fp32)";
    if (mk_plan_scatter_gathers(p) && p->pp > 1)
        return "pipeline sends scatter-gathered over TP (Megatron-Core sends whole tensors; --sequence-parallel "
               "splits them)";
    return NULL;
}

static void model_args(mk_argbuf_t *b, const mk_model_config_t *m)
{
    put(b, " --num-layers %d --hidden-size %d --num-attention-heads %d --seq-length %d --max-position-embeddings %d"
           " --ffn-hidden-size %d --vocab-size %d", m->num_layers, m->hidden, m->heads, m->seq, m->seq, m->ffn,
        m->vocab);
    if (m->norm == MK_NORM_RMSNORM) put(b, " --normalization RMSNorm");
    if (m->swiglu) put(b, " --swiglu");
    if (m->pos == MK_POS_ROPE) put(b, " --position-embedding-type rope --rotary-base %g", m->rope_theta);
    if (m->rope_factor) put(b, " --use-rope-scaling --rope-scaling-factor %g", m->rope_factor);
    if (m->kv_heads != m->heads) put(b, " --group-query-attention --num-query-groups %d", m->kv_heads);
    if (m->kv_channels) put(b, " --kv-channels %d", m->kv_channels);
    if (m->qk_norm) put(b, " --qk-layernorm");
    if (m->kv_lora_rank)
        put(b, " --multi-latent-attention --q-lora-rank %d --kv-lora-rank %d --qk-head-dim %d --qk-pos-emb-head-dim %d"
               " --v-head-dim %d", m->q_lora_rank, m->kv_lora_rank, m->qk_head_dim, m->qk_pos_emb_head_dim,
            m->v_head_dim);
    if (m->window) put(b, " --window-size %d,0", m->window - 1);
    if (m->untied) put(b, " --untie-embeddings-and-output-weights");
    if (!m->bias) put(b, " --disable-bias-linear");
    if (m->qkv_bias && !m->bias) put(b, " --add-qkv-bias");
    if (m->norm_eps != 1e-5) put(b, " --norm-epsilon %g", m->norm_eps);
    if (m->family == MK_FAMILY_LLAMA || m->no_dropout) put(b, " --attention-dropout 0 --hidden-dropout 0");
    if (!m->num_experts) return;
    put(b, " --num-experts %d --moe-router-topk %d --moe-ffn-hidden-size %d", m->num_experts, m->moe_topk, m->moe_ffn);
    if (m->moe_shared_ffn) put(b, " --moe-shared-expert-intermediate-size %d", m->moe_shared_ffn);
    if (m->moe_shared_gate) put(b, " --moe-shared-expert-gate");
    if (m->moe_router_bias) put(b, " --moe-router-enable-expert-bias");
    if (m->moe_score_sigmoid) put(b, " --moe-router-score-function sigmoid");
    if (m->moe_topk_scale) put(b, " --moe-router-topk-scaling-factor %g", m->moe_topk_scale);
    if (m->moe_groups)
        put(b, " --moe-router-num-groups %d --moe-router-group-topk %d", m->moe_groups, m->moe_group_topk);
    if (m->mtp_layers) put(b, " --mtp-num-layers %d", m->mtp_layers);
    if (m->moe_pre_softmax) put(b, " --moe-router-pre-softmax");
    if (m->moe_first_dense) put(b, " --moe-layer-freq '([0]*%d+[1]*%d)'", m->moe_first_dense, m->num_layers - m->moe_first_dense);
    else if (m->moe_layer_freq != 1) put(b, " --moe-layer-freq %d", m->moe_layer_freq);
    if (m->moe_aux_coeff > 0) put(b, " --moe-aux-loss-coeff %g", m->moe_aux_coeff);
    if (m->moe_capacity > 0) put(b, " --moe-expert-capacity-factor %g", m->moe_capacity);
}

/* The dispatcher merak costs: the all-to-all (Megatron-LM's default is
 * allgather), or DeepEP's under the flex dispatcher. */
static void dispatcher_args(mk_argbuf_t *b, const mk_plan_t *p)
{
    if (!p->model.num_experts) return;
    if (p->moe_deepep) put(b, " --moe-token-dispatcher-type flex --moe-enable-deepep");
    else put(b, " --moe-token-dispatcher-type alltoall");
    /* the merged 1F1B steps, with the weight gradients split off as the Model Zoo's A2A_OVERLAP runs them */
    if (p->moe_a2a_overlap) put(b, " --overlap-moe-expert-parallel-comm --delay-wgrad-compute");
}

static void parallel_args(mk_argbuf_t *b, const mk_plan_t *p)
{
    put(b, " --tensor-model-parallel-size %d --pipeline-model-parallel-size %d", p->tp, p->pp);
    if (p->cp > 1) put(b, " --context-parallel-size %d", p->cp);
    if (p->cp > 1 && p->cp_comm != MK_CP_COMM_P2P) put(b, " --cp-comm-type %s", mk_cp_comm_name(p->cp_comm));
    if (p->ep > 1) put(b, " --expert-model-parallel-size %d", p->ep);
    /* the experts whole on each rank (merak's model; Megatron's default is tp) */
    if (p->model.num_experts > 0 && p->tp > 1) put(b, " --expert-tensor-parallel-size 1");
    if (p->vpp > 1) put(b, " --num-layers-per-virtual-pipeline-stage %d", p->model.num_layers / (p->pp * p->vpp));
    if (p->first_stage_layers) put(b, " --decoder-first-pipeline-num-layers %d", p->first_stage_layers);
    if (p->last_stage_layers) put(b, " --decoder-last-pipeline-num-layers %d", p->last_stage_layers);
    if (p->seqpar && p->tp > 1) put(b, " --sequence-parallel");
    if (p->tp_comm_overlap) put(b, " --tp-comm-overlap");
    if (p->overlap_param_gather) put(b, " --overlap-param-gather");
    if (p->zero == 1) put(b, " --use-distributed-optimizer");
    if (p->overlap_grad_reduce && mk_plan_dp_cp(p) > 1) put(b, " --overlap-grad-reduce");
    if (p->recompute.kind == MK_RECOMPUTE_FULL)
        put(b, " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    /* none said so (Megatron-LM's default, merak's is full): the first 0 blocks of each stage */
    if (p->recompute.kind == MK_RECOMPUTE_NONE)
        put(b, " --recompute-granularity full --recompute-method block --recompute-num-layers 0");
    if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE) put(b, " --recompute-granularity selective");
    put(b, " --micro-batch-size %d --global-batch-size %d", p->mbs, p->gbs);
    put(b, p->dtype == MK_DTYPE_BF16 ? " --bf16" : p->dtype == MK_DTYPE_FP16 ? " --fp16" : "");
    if (p->dtype == MK_DTYPE_FP16 && mk_plan_grad_dtype(p) == MK_DTYPE_FP32)
        put(b, " --accumulate-allreduce-grads-in-fp32"); /* bf16: forced */
    put(b, " --attention-backend %s", mk_attn_backend_name(p->attention));
    if (p->cross_entropy == MK_XENT_FUSED || p->cross_entropy == MK_XENT_FUSED_TE)
        put(b, " --cross-entropy-loss-fusion%s", p->cross_entropy == MK_XENT_FUSED_TE ? " --cross-entropy-fusion-impl te" : "");
}

int mk_plan_export_megatron(const mk_plan_t *p, int gpus_per_node, char *buf, size_t n)
{
    const char *why = megatron_cannot(p);
    if (why) return mk_error_set("Megatron-LM cannot run this plan: %s", why);
    if (p->dtype != MK_DTYPE_BF16 && p->dtype != MK_DTYPE_FP16)
        return mk_error_set("Megatron-LM cannot run this plan: %s training (export bf16 or fp16 plans)",
                            mk_dtype_name(p->dtype));
    int64_t g = mk_plan_gpus(p);
    int per = gpus_per_node > 0 && g > gpus_per_node ? gpus_per_node : (int)g;
    if (g % per) return mk_error_set("%lld GPUs do not fill nodes of %d evenly (torchrun's --nproc-per-node)",
                                     (long long)g, per);
    mk_argbuf_t b = {buf, n, 0};
    put(&b, "torchrun --nnodes %lld --nproc-per-node %d pretrain_gpt.py", (long long)(g / per), per);
    parallel_args(&b, p);
    model_args(&b, &p->model);
    dispatcher_args(&b, p);
    if (b.k >= n) return mk_error_set("the command is longer than %zu bytes", n);
    return 0;
}

/* ---- torchtitan v0.2.2's job TOML (torchtitan/config/job_config.py) ---- */

/* torchtitan's llama3 flavor of the model (torchtitan/models/llama3), or NULL. */
static const char *titan_flavor(const mk_model_config_t *m)
{
    static const struct { const char *name; int layers, hidden, heads, kv, ffn; } f[] = {
        {"8B", 32, 4096, 32, 8, 14336}, {"70B", 80, 8192, 64, 8, 28672}, {"405B", 126, 16384, 128, 8, 53248}};
    if (m->family != MK_FAMILY_LLAMA || m->vocab != 128256 || m->num_experts || m->untied != 1 || m->qkv_bias ||
        m->kv_channels || m->window || m->qk_norm || m->kv_lora_rank || m->mtp_layers)
        return NULL;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (m->num_layers == f[i].layers && m->hidden == f[i].hidden && m->heads == f[i].heads &&
            m->kv_heads == f[i].kv && m->ffn == f[i].ffn && m->rope_theta == 500000)
            return f[i].name;
    return NULL;
}

/* torchtitan's pipeline_parallel_schedule for the plan's, or NULL. */
static const char *titan_schedule(mk_sched_kind_t k)
{
    switch (k) {
    case MK_SCHED_GPIPE: return "GPipe";
    case MK_SCHED_1F1B: return "1F1B";
    case MK_SCHED_INTERLEAVED: return "Interleaved1F1B";
    case MK_SCHED_LOOPED_BFS: return "LoopedBFS";
    case MK_SCHED_ZB_V: return "ZBVZeroBubble";
    case MK_SCHED_DUALPIPEV: return "DualPipeV";
    default: return NULL;
    }
}

/* What torchtitan runs differently from the plan, or NULL. */
static const char *titan_cannot(const mk_plan_t *p)
{
    if (!titan_flavor(&p->model)) return "a model other than its llama3 flavors (8B, 70B, 405B)";
    if (p->pp > 1 && !titan_schedule(p->schedule)) return "this schedule (it has GPipe, 1F1B, Interleaved1F1B, "
                                                          "LoopedBFS, ZBVZeroBubble, DualPipeV)";
    if (p->zero == 1 || p->zero == 2) return "ZeRO-1/2 (it shards with FSDP, ZeRO-3, or replicates)";
    if (p->tp > 1 && !p->seqpar) return "TP without sequence parallelism (its TP shards the norms' sequence)";
    if (p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_FULL &&
        p->recompute.kind != MK_RECOMPUTE_SELECTIVE_OP)
        return "this recompute policy (it has none, full, and op-level selective)";
    if (p->tp_overlap > 0 || p->tp_comm_overlap || strcmp(p->partition, "uniform") || p->first_stage_layers ||
        p->last_stage_layers)
        return "sub-pipelined TP, TE's TP communication overlap or a partition other than the even uniform one";
    if (p->vpp > 1 && p->model.num_layers % (p->pp * p->vpp)) return "virtual stages of unequal blocks";
    if (p->dtype != MK_DTYPE_BF16) return "a dtype other than bf16 (mixed_precision_param)";
    if (p->optimizer_offload || p->cpu_offload_layers) return "an offload";
    if (p->zero == 3 && !p->zero3_prefetch) return "FSDP without prefetching (FSDP2 always prefetches one layer)";
    if (p->zero == 3 && p->zero3_per_param) return "a collective per parameter (FSDP2 gathers a layer's in one)";
    if (p->cp > 1 && p->cp_comm == MK_CP_COMM_A2A) return "all-to-all (Ulysses) context parallelism";
    if (p->cross_entropy == MK_XENT_FUSED || p->cross_entropy == MK_XENT_FUSED_TE)
        return "Megatron-Core's fused cross entropy (its loss is torch's F.cross_entropy)";
    return NULL;
}

static void titan_parallelism(mk_argbuf_t *b, const mk_plan_t *p)
{
    int shard = p->zero == 3 ? (p->zero_shard ? p->zero_shard : p->dp) : 1, repl = p->dp / shard;
    put(b, "[parallelism]\ndata_parallel_replicate_degree = %d\ndata_parallel_shard_degree = %d\n", repl, shard);
    if (p->zero == 3 && p->reshard == MK_RESHARD_NEVER) put(b, "fsdp_reshard_after_forward = \"never\"\n");
    put(b, "tensor_parallel_degree = %d\ncontext_parallel_degree = %d\nexpert_parallel_degree = %d\n", p->tp,
        p->cp, p->ep);
    /* torch's context parallelism: K/V all-gathered, or passed round the CP group ("alltoall": each step's
       exchange an all-to-all between ring neighbours, Megatron's p2p ring) */
    if (p->cp > 1)
        put(b, "context_parallel_rotate_method = \"%s\"\n", p->cp_comm == MK_CP_COMM_ALLGATHER ? "allgather" : "alltoall");
    put(b, "pipeline_parallel_degree = %d\n", p->pp);
    if (p->pp > 1) {
        put(b, "pipeline_parallel_schedule = \"%s\"\npipeline_parallel_microbatch_size = %d\n",
            titan_schedule(p->schedule), p->mbs);
        put(b, "pipeline_parallel_layers_per_stage = %d\n", p->model.num_layers / (p->pp * p->vpp));
    }
    if (p->cross_entropy == MK_XENT_TORCH && p->tp > 1) put(b, "disable_loss_parallel = true\n");
}

int mk_plan_export_torchtitan(const mk_plan_t *p, char *buf, size_t n)
{
    const char *why = titan_cannot(p);
    if (why) return mk_error_set("torchtitan cannot run this plan: %s", why);
    mk_argbuf_t b = {buf, n, 0};
    int local = p->mbs * (p->pp > 1 ? p->m : 1); /* per DP rank per step; without PP the rest accumulates */
    put(&b, "# torchtitan v0.2.2 job config from merak (%lld GPUs)\n[model]\nname = \"llama3\"\nflavor = \"%s\"\n\n",
        (long long)mk_plan_gpus(p), titan_flavor(&p->model));
    /* the gradients reduced as the plan's (mk_plan_grad_dtype; torchtitan's default is float32); the
       element-wise kernels fused by torch.compile unless the plan's are eager (its default, compile off) */
    put(&b, "[training]\nlocal_batch_size = %d\nglobal_batch_size = %d\nseq_len = %d\nmixed_precision_param = "
             "\"bfloat16\"\nmixed_precision_reduce = \"%s\"\ncompile = %s\n\n", local, p->gbs, p->model.seq,
        mk_plan_grad_dtype(p) == MK_DTYPE_FP32 ? "float32" : "bfloat16", p->eager ? "false" : "true");
    titan_parallelism(&b, p);
    const char *mode = p->recompute.kind == MK_RECOMPUTE_FULL ? "full"
                     : p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP ? "selective" : "none";
    put(&b, "\n[activation_checkpoint]\nmode = \"%s\"\n", mode);
    if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP) put(&b, "selective_ac_option = \"op\"\n");
    if (b.k >= n) return mk_error_set("the config is longer than %zu bytes", n);
    return 0;
}

/* ---- DeepSpeed: ds_config.json and Megatron-DeepSpeed's arguments ---- */

/* What DeepSpeed's engine (with Megatron-DeepSpeed's TP) runs differently,
 * or NULL: its pipeline engine runs one 1F1B-like schedule and takes ZeRO-1
 * at most (deepspeed/runtime/pipe/engine.py). */
static const char *ds_cannot(const mk_plan_t *p)
{
    const mk_model_config_t *m = &p->model;
    if (m->family != MK_FAMILY_GPT && m->family != MK_FAMILY_LLAMA) return "a model other than GPT or Llama";
    if (m->num_experts) return "mixture-of-experts (DeepSpeed-MoE's expert groups are not mapped)";
    if (m->kv_lora_rank || m->window || m->qk_norm || m->kv_channels || m->mtp_layers)
        return "multi-latent attention, a sliding window, q/k norms, --kv-channels or multi-token prediction (not in "
               "Megatron-DeepSpeed)";
    if (p->pp > 1 && p->schedule != MK_SCHED_1F1B) return "a pipeline schedule other than 1f1b";
    if (p->pp > 1 && p->zero > 1) return "ZeRO-2/3 with pipeline parallelism";
    if (p->zero_shard) return "a hybrid ZeRO group";
    if (p->zero3_per_param) return "a ZeRO-3 collective per parameter (DeepSpeed's before 0.5.7; it coalesces them)";
    if (p->cp > 1) return "context parallelism";
    if (p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_FULL)
        return "a recompute policy other than none or full (--checkpoint-activations)";
    if (p->tp_overlap > 0 || p->tp_comm_overlap || p->optimizer_offload || p->cpu_offload_layers)
        return "sub-pipelined TP, TE's TP communication overlap or an offload";
    if (p->overlap_param_gather) return "Megatron-Core's --overlap-param-gather (ZeRO-1 gathers after the step)";
    if (p->dtype != MK_DTYPE_BF16 && p->dtype != MK_DTYPE_FP16) return "a dtype other than bf16 or fp16";
    if (p->eager) return "eager element-wise kernels (Megatron-DeepSpeed runs Megatron's fused ones)";
    if (p->cross_entropy != MK_XENT_VOCAB_PARALLEL)
        return "a cross entropy other than Megatron's vocab-parallel one (Megatron-DeepSpeed's loss)";
    return NULL;
}

int mk_plan_export_deepspeed(const mk_plan_t *p, char *json, size_t n, char *args, size_t na)
{
    const char *why = ds_cannot(p);
    if (why) return mk_error_set("DeepSpeed cannot run this plan: %s", why);
    mk_argbuf_t b = {json, n, 0};
    put(&b, "{\n  \"train_batch_size\": %d,\n  \"train_micro_batch_size_per_gpu\": %d,\n"
            "  \"gradient_accumulation_steps\": %d,\n  \"zero_optimization\": {\"stage\": %d%s},\n"
            "  \"%s\": {\"enabled\": true}", p->gbs, p->mbs, p->m, p->zero,
        /* no prefetch: ZeRO-3 fetches each module's parameters when it runs */
        p->zero == 3 && !p->zero3_prefetch ? ", \"stage3_prefetch_bucket_size\": 0" : "",
        p->dtype == MK_DTYPE_BF16 ? "bf16" : "fp16");
    /* the plan's gradient buffers and reduction (mk_plan_grad_dtype) where they are not the
       parameters' type: fp32 for bf16 (DeepSpeed's BF16 optimizer accumulates in fp32 by
       default) and for fp16 with --grad-reduce-dtype fp32 */
    mk_dtype_t gd = mk_plan_grad_dtype(p);
    if (gd != p->dtype) /* DeepSpeed's fp16 engine's default is fp16: say it otherwise */
        put(&b, ",\n  \"data_types\": {\"grad_accum_dtype\": \"%s\"},\n  \"communication_data_type\": \"%s\"",
            mk_dtype_name(gd), mk_dtype_name(gd));
    /* its pipeline engine splits what it sends over the TP ranks unless told not to (pipe_partitioned,
       DeepSpeed 0.12.3 on): as the plan's sends are (--scatter-gather-tensors-in-pipeline) */
    if (p->pp > 1 && p->tp > 1 && !p->seqpar && !mk_plan_scatter_gathers(p))
        put(&b, ",\n  \"pipeline\": {\"pipe_partitioned\": false, \"grad_partitioned\": false}");
    put(&b, "\n}\n");
    mk_argbuf_t a = {args, na, 0};
    put(&a, "pretrain_gpt.py --tensor-model-parallel-size %d --pipeline-model-parallel-size %d", p->tp, p->pp);
    if (p->seqpar && p->tp > 1) put(&a, " --sequence-parallel");
    if (p->recompute.kind == MK_RECOMPUTE_FULL) put(&a, " --checkpoint-activations");
    put(&a, " --micro-batch-size %d --global-batch-size %d --%s", p->mbs, p->gbs,
        p->dtype == MK_DTYPE_BF16 ? "bf16" : "fp16");
    model_args(&a, &p->model);
    put(&a, " --deepspeed --deepspeed_config ds_config.json");
    if (b.k >= n || a.k >= na) return mk_error_set("the DeepSpeed config is longer than its buffer");
    return 0;
}
