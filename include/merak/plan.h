/* A plan: everything both engines need to run one training step layout,
 * self-contained so a file written by `merak plan --save-plan` runs
 * unchanged under `merak sim --plan` and `merak run --plan`.
 *
 * Rank order: TP fastest, then CP, then DP, then PP (Megatron-LM's; TP
 * groups stay inside a node):
 *   rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)).
 * Virtual stages (chunks) are numbered chunk-major, k = chunk*pp + stage,
 * and virtual stage k owns graph layers [bounds[k], bounds[k+1]).  The
 * scheduler's per-(stage, chunk) arrays are indexed stage*vpp + chunk. */
#ifndef MERAK_PLAN_H
#define MERAK_PLAN_H

#include "merak/cluster.h"
#include "merak/graph.h"
#include "merak/limits.h"
#include "merak/sched.h"


#ifdef __cplusplus
extern "C" {
#endif

#define MK_PLAN_MAX_VSTAGES MK_MAX_VSTAGES

/* The attention core's implementation (Megatron-Core's --attention-backend values). */
typedef enum { MK_ATTN_UNFUSED = 0, MK_ATTN_FLASH, MK_ATTN_FUSED, MK_ATTN_AUTO } mk_attn_backend_t;
MK_API const char *mk_attn_backend_name(mk_attn_backend_t a);
/* "flash", "fused", "unfused" or "auto"; -1 with a message naming them otherwise. */
MK_API int mk_attn_backend_parse(const char *s, mk_attn_backend_t *out);

/* mk_xent_t, the loss's implementation: graph.h (graph.c loss_passes reads it). */

/* ZeRO-3's parameters between a layer's uses (torchtitan's
 * fsdp_reshard_after_forward values): always, gathered for every forward,
 * recompute and backward and freed after (DeepSpeed's and FSDP's per-layer
 * rule); never, gathered in a chunk's first forward of the step and kept
 * to its end, the gradients accumulated unsharded and reduce-scattered in
 * its last backward (FSDP2 under torch.distributed.pipelining, as
 * torchtitan runs it with PP). */
typedef enum { MK_RESHARD_ALWAYS = 0, MK_RESHARD_NEVER } mk_reshard_t;
MK_API const char *mk_reshard_name(mk_reshard_t r);
/* "always" or "never"; -1 with a message naming them otherwise. */
MK_API int mk_reshard_parse(const char *s, mk_reshard_t *out);
/* Context parallelism's exchange (Megatron-LM's --cp-comm-type, Transformer
 * Engine's three kernels): p2p, the K/V ring, each step's transfer hidden
 * behind a block's attention; allgather, K/V all-gathered over the CP group
 * before the attention (again in the backward, then dK/dV reduce-scattered),
 * not overlapped; a2a, DeepSpeed-Ulysses: all-to-alls of Q, K, V and the
 * output turn the sequence split into a head split, not overlapped. */
typedef enum { MK_CP_COMM_P2P = 0, MK_CP_COMM_ALLGATHER, MK_CP_COMM_A2A } mk_cp_comm_t;
MK_API const char *mk_cp_comm_name(mk_cp_comm_t c);
/* "p2p", "allgather" or "a2a"; -1 with a message naming them otherwise. */
MK_API int mk_cp_comm_parse(const char *s, mk_cp_comm_t *out);
MK_API const char *mk_xent_name(mk_xent_t x);
/* "vocab-parallel" or "torch"; -1 with a message naming them otherwise. */
MK_API int mk_xent_parse(const char *s, mk_xent_t *out);
/* "fused" -> 0, "eager" -> 1 (mk_plan_t.eager); else -1 with the error. */
MK_API int mk_elementwise_parse(const char *s, int *eager);
/* An fp8 plan's scaling recipe (Megatron-Core's --fp8-recipe, Transformer
 * Engine's recipes): delayed, each tensor's scale from an amax history
 * (DelayedScaling, Megatron-Core's default), its amax taken during the
 * cast; tensorwise, current scaling (Float8CurrentScaling, NeMo's and
 * Megatron-Bridge's FP8-CS), each tensor's scale from its own amax,
 * read in a pass of its own before the cast (and so no norm writes an FP8
 * output).  Both are Transformer Engine's linears, which keep an FP8 copy
 * of each weight and its transpose across a step's micro-batches
 * (sim/memory.c fp8_copies).  torchao: torchao's Float8Linear (torchtitan's
 * float8 converter, its default tensorwise recipe): current scaling as
 * tensorwise, but each weight cast to FP8 where it is used and nothing
 * kept beside the 16-bit weight.  mxfp8 and blockwise are not modelled. */
typedef enum { MK_FP8_DELAYED = 0, MK_FP8_TENSORWISE, MK_FP8_TORCHAO } mk_fp8_recipe_t;
MK_API const char *mk_fp8_recipe_name(mk_fp8_recipe_t r);
/* Current scaling: a recipe whose casts take their tensor's amax in a
 * pass of their own (tensorwise, torchao). */
MK_API int mk_fp8_recipe_current(mk_fp8_recipe_t r);
/* "delayed", "tensorwise" or "torchao"; -1 with a message naming them otherwise. */
MK_API int mk_fp8_recipe_parse(const char *s, mk_fp8_recipe_t *out);

typedef struct mk_plan {
    mk_model_config_t model;
    char cluster[512];          /* preset name or cluster JSON path */
    mk_dtype_t dtype;
    int gbs;                    /* global batch, sequences */
    int dp, pp, tp, vpp;
    int cp;                     /* context parallel (Megatron's --context-parallel-size): the
                                 * sequence split over cp ranks in 2*cp chunks (rank i holds
                                 * chunks i and 2cp-1-i); 1: none */
    int ep;                     /* expert parallel (Megatron's --expert-model-parallel-size): an
                                 * MoE layer's E experts split over ep consecutive ranks of a
                                 * stage (rank order tp, cp, dp: MoE parallel folding with expert
                                 * tensor parallelism 1), E/ep each, whole; ep divides tp x cp x
                                 * dp and E; 1: none (dense models: always 1) */
    double moe_imbalance;       /* the busiest expert's load over the mean N*k/E (>= 1; 1:
                                 * balanced; the executor's measured routing calibrates it) */
    int moe_deepep;             /* 1: the EP all-to-alls by DeepEP's normal kernels (Megatron-
                                 * Core's --moe-token-dispatcher-type flex --moe-enable-deepep):
                                 * a token crosses to each node holding its experts once, then
                                 * NVLink (cost.h mk_cost_a2a_deepep); 0: the pairwise all-to-all */
    int moe_a2a_overlap;        /* Megatron-Core's --overlap-moe-expert-parallel-comm (with
                                 * --delay-wgrad-compute): in 1F1B's steady state the forward of one
                                 * micro-batch runs merged with the backward of another, each one's
                                 * EP all-to-alls behind the other's compute (sim_step.c pair_hidden);
                                 * ep > 1, 1f1b at pp 1 or interleaved, recompute none or selective */
    int mbs;                    /* micro-batch size b */
    int m;                      /* micro-batches per replica: gbs / (dp*mbs) */
    mk_sched_kind_t schedule;
    mk_recompute_t recompute;
    int tp_overlap;             /* 0: none, 1-3: sub-pipelined TP levels */
    int tp_comm_overlap;        /* Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers):
                                 * with sequence parallelism, each TP all-gather and reduce-scatter
                                 * split into tp pieces pipelined with the GEMM that reads or
                                 * makes it (sim/README.md "TP communication overlap"); the
                                 * executor refuses it */
    int overlap_param_gather;   /* Megatron-Core's --overlap-param-gather (ZeRO-1, the distributed
                                 * optimizer, with overlap_grad_reduce): the updated weights'
                                 * all-gather runs behind the next step's first forward, bucket by
                                 * bucket, instead of after the optimizer step (sim/README.md
                                 * "Overlapped weight gather"); the executor refuses it */
    int scatter_gather_p2p;     /* Megatron-LM's --scatter-gather-tensors-in-pipeline (its default from
                                 * 2021 until Megatron-Core) and DeepSpeed's pipeline engine
                                 * (pipe_partitioned, on by default): without sequence parallelism
                                 * each TP rank sends 1/tp of the activation or gradient between
                                 * stages and the receiving TP group all-gathers it (sim/README.md
                                 * "Cost model", p2p); the executor refuses it */
    int zero;                   /* ZeRO stage over the sharding group: 0 none, 1 optimizer state
                                 * (Megatron's distributed optimizer), 2 + gradients (reduce-scattered),
                                 * 3 + parameters (FSDP: gathered per layer before use) */
    int zero_shard;             /* the sharding group's size: 0 = the whole data-parallel group;
                                 * k < dp (hybrid sharding, --zero-shard-group node): shard over k
                                 * consecutive DP ranks, replicate across the dp/k groups */
    int seqpar;                 /* sequence parallelism */
    int overlap_grad_reduce;    /* 1 (default): each gradient bucket's DP reduction starts as the
                                 * last backward makes it final (Megatron-Core's --overlap-grad-reduce,
                                 * merak run's executor); 0: all of them start at REDUCE_GRADS, after
                                 * the backward (Megatron-LM's local DDP before Megatron-Core,
                                 * Megatron-DeepSpeed) */
    int grad_reduce_dtype;      /* the gradient buffers' and their DP reduction's type, as
                                 * mk_dtype_t + 1; 0: the dtype's default (mk_plan_grad_dtype:
                                 * fp32 for bf16 and fp8, fp16 for fp16).  Megatron-LM's
                                 * --accumulate-allreduce-grads-in-fp32 makes an fp16 plan's fp32;
                                 * bf16 (NeMo's optim.grad_sync_dtype=bf16, torchtitan's
                                 * mixed_precision_reduce) a bf16 or fp8 plan's 16-bit */
    mk_attn_backend_t attention; /* the attention core (Megatron-Core's --attention-backend):
                                 * flash / fused, one fused kernel (FlashAttention, cuDNN's fused
                                 * attention): its time at the device's flash_attn_flops, no
                                 * b x heads x s x s scores stored or passed through memory;
                                 * unfused (mk_plan_init's default, and a plan file's without the
                                 * field): the materialised core (baddbmm, fused softmax, dropout,
                                 * bmm), not with cp > 1; auto: flash where the cluster's GPU has a
                                 * fused kernel or cp > 1 (mk_plan_attention), settled by
                                 * mk_plan_resolve.  The executor's attention is exact either way. */
    mk_cp_comm_t cp_comm;       /* cp > 1: the attention's exchange (mk_cp_comm_t; p2p by default and in
                                 * a plan file without cp_comm_type); the executor runs each (exec_cp.c, exec_cp_a2a.c) */
    int zero3_prefetch;         /* ZeRO-3: 1 (default): the next layer's gather runs behind this
                                 * layer's compute (prefetch depth 1: FSDP's, and DeepSpeed's from
                                 * 0.6.0); 0: each gather starts when the layer before it has ended,
                                 * so none overlaps compute and one layer is gathered at a time
                                 * (DeepSpeed's ZeRO-3 before 0.6.0 synchronized the device before
                                 * every parameter's gather: its PRs #1188 and #1453; a
                                 * stage3_prefetch_bucket_size of 0) */
    int zero3_per_param;        /* ZeRO-3: 0 (default): a layer's weights gathered and its gradients
                                 * reduced in one collective each (FSDP's flat parameters,
                                 * DeepSpeed's coalesced gathers from 0.5.7); 1: one per parameter
                                 * tensor (mk_graph_op_tensors), each through PyTorch's list form,
                                 * which copies every rank's shard with a kernel of its own
                                 * (DeepSpeed's ZeRO-3 before 0.5.7, November 2021); the executor
                                 * refuses it */
    mk_reshard_t reshard;       /* ZeRO-3: fsdp_reshard_after_forward (mk_reshard_t; always by
                                 * default and in a plan file without the field); the executor
                                 * gathers per layer and refuses never */
    int optimizer_offload;      /* optimizer CPU offload (Megatron-Core's --optimizer-cpu-offload,
                                 * DeepSpeed's ZeRO-Offload): the fp32 master weights and Adam
                                 * moments in host memory, the step on the CPU, gradients down
                                 * and weights up the host link (cluster host figures needed);
                                 * the executor refuses it */
    int cpu_offload_layers;     /* activation offload (Megatron-Core's --cpu-offloading
                                 * --cpu-offloading-num-layers N): the first N transformer blocks'
                                 * stored activations go to host memory after their forward and
                                 * come back for their backward, over the host link beside the
                                 * compute; 0: none.  Megatron-Core's rules: pp 1, no recompute,
                                 * N < the blocks; the executor refuses it */
    int eager;                  /* element-wise kernels as eager PyTorch runs them (plan file
                                 * "elementwise": "eager", --elementwise eager; torchtitan
                                 * without torch.compile): time only (mk_graph_opts_t.eager);
                                 * 0: fused.  The executor has its own kernels and refuses it. */
    mk_fp8_recipe_t fp8_recipe; /* an fp8 plan's scaling (mk_fp8_recipe_t; plan file
                                 * "fp8_recipe", absent: delayed); refused for other dtypes */
    mk_xent_t cross_entropy;    /* the loss's implementation (memory only; mk_xent_t):
                                 * vocab-parallel (mk_plan_init's default, and a plan file's
                                 * without the field) or torch.  The executor computes the
                                 * vocab-parallel one and refuses torch. */
    char partition[16];         /* uniform | parameters | compute | refine | explicit */
    int first_stage_layers;     /* uniform partition: transformer blocks on the first and the last
                                 * stage (Megatron-Core's --decoder-first-pipeline-num-layers,  */
    int last_stage_layers;      /* --decoder-last-pipeline-num-layers), the other stages sharing
                                 * the rest evenly; 0: an even split (vpp 1 only) */
    int n_vstages;              /* pp*vpp */
    int bounds[MK_PLAN_MAX_VSTAGES + 1];
    int has_ckpt;               /* ckpt[] holds per-(stage, chunk) checkpoint counts */
    int ckpt[MK_PLAN_MAX_VSTAGES];
} mk_plan_t;

/* Defaults: dp=pp=tp=vpp=1, mbs=1, 1f1b, full recompute, uniform, gradient
 * reduction overlapped with the backward. */
MK_API void mk_plan_init(mk_plan_t *p);

/* The layout's derived sizes, each computed here and nowhere else (plans
 * store them in m and n_vstages once checked; everything else reads those
 * or a resolved context, merak/plan_ctx.h). */
/* Micro-batches per replica, gbs / (dp*mbs); 0 when dp*mbs does not divide gbs. */
MK_API int mk_plan_micro_batches(const mk_plan_t *p);
/* Virtual stages pp*vpp, in 64 bits (any two ints multiply without overflow). */
MK_API int64_t mk_plan_vstages(const mk_plan_t *p);
/* The virtual stage stage s's chunk c runs under the plan's schedule (the
 * loop, or zb-v's and dualpipev's V: mk_sched_vstage). */
MK_API int mk_plan_vstage(const mk_plan_t *p, int s, int c);
/* The embedding and the head on different stages, so a tied embedding
 * has a copy on each (pp > 1 but in a V: mk_sched_ends_apart). */
MK_API int mk_plan_ends_apart(const mk_plan_t *p);
/* The stage holding the head (the last virtual stage). */
MK_API int mk_plan_head_stage(const mk_plan_t *p);

/* The plan as Megatron-LM's launch command, `torchrun --nnodes N
 * --nproc-per-node G pretrain_gpt.py ARGS` (Megatron-Core core_r0.13's
 * argument names; nodes of gpus_per_node), into buf; no data, tokenizer
 * or optimizer arguments.  Returns 0, or -1 naming what Megatron-LM
 * cannot run (src/plan/plan_export.c). */
MK_API int mk_plan_export_megatron(const mk_plan_t *p, int gpus_per_node, char *buf, size_t n);
/* The plan as torchtitan v0.2.2's job TOML ([model] llama3 flavor,
 * [training] batch and sequence, [parallelism] degrees and schedule,
 * [activation_checkpoint]); -1 naming what torchtitan cannot run. */
MK_API int mk_plan_export_torchtitan(const mk_plan_t *p, char *buf, size_t n);
/* The plan as DeepSpeed's ds_config.json (train_batch_size, micro batch,
 * gradient accumulation, ZeRO stage, bf16/fp16) into json, and the
 * Megatron-DeepSpeed pretrain_gpt.py arguments for its TP/PP into args;
 * -1 naming what DeepSpeed cannot run. */
MK_API int mk_plan_export_deepspeed(const mk_plan_t *p, char *json, size_t n, char *args, size_t na);
/* The ZeRO stage in effect: the plan's, 0 without data parallelism (dp 1). */
MK_API int mk_plan_zero(const mk_plan_t *p);
/* The ranks a gradient is reduced over, dp x cp (each CP rank's gradient
 * covers only its tokens: Megatron-LM reduces over the DP x CP group). */
MK_API int mk_plan_dp_cp(const mk_plan_t *p);
/* The GPUs of a plan, dp*cp*pp*tp (the one place it is computed; within
 * MK_MAX_GPUS once mk_plan_check_sizes accepted the plan). */
MK_API int64_t mk_plan_gpus(const mk_plan_t *p);
/* "dp D<sep>pp P<sep>tp T", with "cp C" after dp when cp > 1, then
 * " (ep E[, DeepEP][, a2a overlap])" with experts (messages). */
typedef struct { char s[96]; } mk_plan_layout_str_t;
MK_API mk_plan_layout_str_t mk_plan_layout_str(const mk_plan_t *p, const char *sep);
/* A trace's metadata for this plan ("otherData": model, layout as
 * mk_plan_layout_str, schedule with its vpp, micro_batches): what
 * experiments/plot_*.py title a figure with.  Both engines call it. */
struct mk_trace;
MK_API void mk_plan_trace_meta(const mk_plan_t *p, struct mk_trace *t);
/* The size of the ZeRO sharding group (the ranks that split optimizer
 * state, gradients, parameters): (zero_shard, or dp when 0) x cp, since
 * gradients are reduced over dp x cp (Megatron's convention: adding CP
 * never multiplies optimizer memory).  The replicas across groups are
 * dp*cp / mk_plan_zero_group. */
MK_API int mk_plan_zero_group(const mk_plan_t *p);
/* --zero-shard-group node: the DP ranks inside one node of gpus_per_node
 * GPUs (rank order TP fastest, then DP: gpus_per_node / tp of them, at
 * least 1, at most dp) become the sharding group.  Sets p->zero_shard;
 * -1 when it does not divide dp. */
MK_API int mk_plan_zero_shard_node(mk_plan_t *p, int gpus_per_node);

/* Check the layout against the model: sizes from 1 to their maxima
 * (merak/limits.h, products in 64 bits), tp divides the heads,
 * pp (times vpp) not above the blocks, gbs divisible by dp*mbs, interleaved
 * with m a multiple of pp and vpp >= 2, bounds covering the graph's layers
 * in order with no empty stage.  Fills p->m and p->n_vstages.  Returns 0 or -1. */
MK_API int mk_plan_check(mk_plan_t *p, const mk_graph_t *g);
/* The part of mk_plan_check that needs the graph (everything after the
 * sizes and tp), on a plan mk_plan_check_sizes accepted. */
MK_API int mk_plan_check_layout(const mk_plan_t *p, const mk_graph_t *g);
/* A plan that carries its stage bounds (a plan file) and names a method
 * that depends on the graph alone ("uniform", "parameters") must hold that
 * method's bounds: -1 with both when they differ (say "explicit" for
 * bounds of one's own).  "compute" and "refine" come from a cost model and
 * are taken as recorded.  0 otherwise. */
MK_API int mk_plan_check_partition(const mk_plan_t *p, const mk_graph_t *g);
/* Expert parallelism's rules (part of mk_plan_check_layout): ep divides a
 * stage's tp x cp x dp ranks and the plan model's experts, ep > 1 only with experts, 1 <=
 * moe_imbalance, other than 1 only with experts. */
MK_API int mk_plan_check_ep(const mk_plan_t *p);
/* 0, or -1 (mk_error_last) where a ZeRO-3 knob is set without ZeRO-3:
 * zero3_prefetch off (no gathers to prefetch) or zero3_per_param on.  The
 * command line and plan files check it; merak plan's candidates of other
 * ZeRO stages carry the flags and ignore them. */
MK_API int mk_plan_check_zero3(const mk_plan_t *p);
/* Megatron-Core's rules for --overlap-moe-expert-parallel-comm
 * (transformer_config.py): expert parallelism, pp 1 or virtual stages
 * (1f1b at pp 1, or interleaved), recompute none or selective (no layer
 * recompute: no granularity full, no method), a 16-bit model.
 * NULL where the plan keeps them, else the one it breaks. */
MK_API const char *mk_plan_moe_a2a_overlap_why(const mk_plan_t *p);
/* The part of mk_plan_check that needs no graph: each size against its
 * maximum (merak/limits.h), then the products in 64 bits: GPUs dp*pp*tp,
 * virtual stages pp*vpp, a replica's batch dp*mbs, micro-batches m and
 * the schedule's pp*vpp*m (mk_sched_check_size).  Fills p->m and
 * p->n_vstages.  Call it before multiplying any of them (plan readers). */
MK_API int mk_plan_check_sizes(mk_plan_t *p);
/* The GPUs a plan needs, dp*pp*tp, must fit the cluster (max_nodes *
 * gpus_per_node when max_nodes > 0).  Returns 0 or -1. */
MK_API int mk_plan_check_gpus(const mk_plan_t *p, const mk_cluster_t *c);

/* Stage bounds by blocks: each virtual stage gets an equal share of the
 * transformer blocks (extra blocks to the stages after the first), the
 * layers before the first block go to the first stage and those after the
 * last block to the last stage.  Models without blocks split layers evenly. */
MK_API int mk_plan_partition_uniform(mk_plan_t *p, const mk_graph_t *g);

/* Layers of (stage, chunk) that can be checkpointed (hold parameters and
 * are not the embedding), written to layers[s*vpp+c]. */
MK_API void mk_plan_ckpt_layers(const mk_plan_t *p, const mk_graph_t *g, int *layers);

/* Fill a scheduler spec; layers and ckpt must have room for pp*vpp ints
 * and must outlive the spec.  grad_buckets: REDUCE_GRADS per stage. */
MK_API void mk_plan_sched_spec(const mk_plan_t *p, const mk_graph_t *g, int grad_buckets, int *layers,
                        mk_sched_spec_t *spec);

/* Graph options the plan implies: its mbs, dtype and tp, and dropout
 * under mk_plan_dropout.  The one place graph options come from (the
 * simulator, the planner's per-(mbs, tp) cache and the executor). */
MK_API void mk_plan_graph_opts(const mk_plan_t *p, mk_graph_opts_t *o);
/* Whether a plan models dropout: for 16-bit training (Megatron-LM runs
 * with it), not for fp32 (the CPU executor has none). */
MK_API int mk_plan_dropout(mk_dtype_t dt);

/* The type of p's gradient buffers and of their DP reduction (reduce-
 * scatter): p->grad_reduce_dtype where set, else fp32 for fp32, bf16 and
 * fp8 plans and fp16 for fp16 ones.  Megatron-LM forces fp32 for bf16
 * ("bfloat16 requires gradient accumulation and all-reduce to be done in
 * fp32", megatron/training/arguments.py; Megatron-Core's DDP
 * grad_reduce_in_fp32 follows it, and Transformer Engine's fp8 runs keep
 * bf16 parameters); torchtitan's FSDP2 reduces in fp32 by default
 * (mixed_precision_reduce), DeepSpeed's bf16 optimizer accumulates in
 * fp32; fp16 keeps fp16 gradients unless asked (Megatron-LM, DeepSpeed).
 * The simulator's gradient bytes and DP volume and the executor's
 * gradient buffers both come from here. */
MK_API mk_dtype_t mk_plan_grad_dtype(const mk_plan_t *p);
/* 1 when the plan's pipeline sends are scatter-gathered over TP: the
 * flag (scatter_gather_p2p) with tp > 1 and no sequence parallelism, which
 * splits them already.  The simulator's sends, merak sim's headline and the
 * exports all ask here. */
MK_API int mk_plan_scatter_gathers(const mk_plan_t *p);
/* 0, or -1 naming the problem: a gradient type the plan's dtype cannot
 * have (16-bit gradients of another 16-bit type, or of an fp32 plan). */
MK_API int mk_plan_check_grad_dtype(const mk_plan_t *p);
/* Whether a hybrid ZeRO group (zero_shard) holds whole EP groups, as
 * Megatron-Core's optimizer instances need (1: yes, or not hybrid / no EP). */
MK_API int mk_plan_zero_ep_ok(const mk_plan_t *p);
/* The plan's graph (mk_plan_graph_opts); NULL with mk_error_last() on failure. */
MK_API mk_graph_t *mk_plan_graph(const mk_plan_t *p);
/* p's attention with auto settled against cluster c: flash under context
 * parallelism (cp > 1: it runs on fused kernels, plan.c check_cp_comm) or
 * where the GPU has a fused attention kernel (c->dev.flash_attn_flops > 0,
 * the cluster file's statement of it: Ampere and newer), else unfused
 * (NULL: unfused). */
MK_API mk_attn_backend_t mk_plan_attention(const mk_plan_t *p, const mk_cluster_t *c);

/* The plan file's JSON as text (see traces/README.md; JSON crosses the
 * API as text): a malloc'd string (free it), NULL on failure; parse and
 * check one (what names it in messages).  0 or -1. */
MK_API char *mk_plan_to_json_text(const mk_plan_t *p);
MK_API int mk_plan_from_json_text(const char *text, const char *what, mk_plan_t *p);
/* Write atomically (temporary file + rename); read and check. */
MK_API int mk_plan_save(const mk_plan_t *p, const char *path);
MK_API int mk_plan_load(const char *path, mk_plan_t *p);

/* Recompute spec as text ("none", "full", "selective", "stage-aware:0.8", "auto", "explicit"). */
MK_API void mk_recompute_format(const mk_recompute_t *r, char *buf, size_t n);

/* ---- The plan resolved once (mk_plan_ctx_t) ----
 * A plan resolved once.  mk_plan_resolve checks a plan (sizes, layout,
 * the engine's own rules, GPUs against the cluster or ranks against the
 * world), settles recompute `auto`, builds the graph and fills everything
 * the engines derive from a plan.  The simulator, the planner and the
 * executor then take a const mk_plan_ctx_t * and neither re-derive nor
 * re-check anything of the layout: virtual stages are ctx->plan.n_vstages,
 * micro-batches ctx->plan.m, stage bounds ctx->plan.bounds, checkpoint
 * counts ctx->plan.ckpt, ZeRO ctx->zero, the dtype ctx->plan.dtype.
 *
 * A context is not copied (its spec points into it); free it with
 * mk_plan_ctx_free.
 */

/* What a plan is resolved against.  Zero-initialise, then set what applies. */
typedef struct mk_plan_resolve_opts {
    const mk_cluster_t *cluster; /* the GPUs dp*pp*tp must fit it (sim, plan); NULL: none (run) */
    int world;                   /* > 0: dp*pp*tp must equal this rank count (run) */
    const char *partition;       /* non-NULL: the plan has no stage bounds yet; split by this
                                    method (mk_partition) before the layout is checked */
    const mk_graph_t *graph;     /* the plan's graph (mk_plan_graph_opts), borrowed: it must
                                    outlive the context (the planner's cache); NULL: built */
    /* The engine's own rules beyond the plan's (the executor's), checked
     * after the plan's and before the GPU or rank count; NULL: none. */
    int (*check)(const mk_plan_t *p, const mk_graph_t *g);
    /* Recompute `auto` without checkpoint counts: fills p->ckpt from a
     * memory model (the simulator's mk_sim_resolve_auto: passed in, so
     * that plan/ does not depend on sim/).  Needs cluster.  NULL: left to
     * the engine's check. */
    int (*resolve_auto)(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g);
} mk_plan_resolve_opts_t;

typedef struct mk_plan_ctx {
    mk_plan_t plan;              /* checked: m, n_vstages, bounds and (auto) ckpt filled */
    const mk_graph_t *g;         /* the plan's graph: built here (own) or borrowed */
    const mk_cluster_t *cluster; /* what it was resolved against (NULL: none) */
    int world;                   /* the rank count it was checked against (0: none) */
    int zero;                    /* ZeRO stage in effect (mk_plan_zero) */
    int layers[MK_PLAN_MAX_VSTAGES]; /* checkpointable layers of (stage s, chunk c) at [s*vpp + c] */
    mk_sched_spec_t spec;        /* the scheduler's spec (one REDUCE_GRADS bucket when dp > 1);
                                    points into layers and plan.ckpt */
    mk_graph_t *own;             /* g when built here (freed by mk_plan_ctx_free) */
} mk_plan_ctx_t;

/* Resolve p (copied) into ctx.  Order of the checks, each made once:
 * sizes and tp (mk_plan_check_sizes, mk_model_check_tp), the graph, the
 * partition (opts->partition), the layout (mk_plan_check_layout),
 * opts->check, GPUs against opts->cluster, dp*pp*tp against opts->world,
 * then recompute auto.  Returns 0, or -1 with mk_error_last() (ctx holds
 * nothing to free).  Never prints. */
MK_API int mk_plan_resolve(mk_plan_ctx_t *ctx, const mk_plan_t *p, const mk_plan_resolve_opts_t *opts);
MK_API void mk_plan_ctx_free(mk_plan_ctx_t *ctx);

#ifdef __cplusplus
}
#endif
#endif
